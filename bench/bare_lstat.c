/* The baseline for bench/engine_lstat.py: a bare single-threaded lstat loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv)
{
	static char buf[1 << 26];
	struct timespec a, b;
	struct stat st;
	size_t n, i, count = 0;
	char **v;
	FILE *f;
	int r, rounds;

	if (argc != 3 || !(f = fopen(argv[1], "rb")))
		return 2;
	rounds = atoi(argv[2]);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (i = 0; i < n; i++)
		count += !buf[i];
	v = malloc(count * sizeof(*v));
	for (i = 0, count = 0; i < n; i += strlen(buf + i) + 1)
		v[count++] = buf + i;
	for (r = 0; r < rounds; r++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (i = 0; i < count; i++)
			lstat(v[i], &st);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("%.9f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
	}
	free(v);
	return 0;
}
