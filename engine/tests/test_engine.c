/*
 * C tests of the engine, run under AddressSanitizer and UBSan by
 * `make -C engine check`. Each test prints one line; the last line is
 * "N passed, N failed".
 */
#include "gittune.h"
#include "index_format.h"
#include "sha1.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
static char tmpdir[256];

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
		printf(__VA_ARGS__); \
		printf("\n"); \
		return 1; \
	} \
} while (0)

static void run(const char *name, int (*fn)(void))
{
	int rc = fn();

	printf("%s %s\n", rc ? "not ok" : "ok", name);
	if (rc)
		failed++;
	else
		passed++;
}

static char *path_in(const char *name)
{
	static char buf[512];

	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

static int write_bytes(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	fwrite(data, 1, len, f);
	return fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
}

static int count_entries(const char *dir)
{
	char cmd[600];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 | wc -l", dir);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static int test_sha1(void)
{
	struct gt_sha1 c;
	unsigned char out[20];
	static const unsigned char abc[20] = {
		0xa9, 0x99, 0x3e, 0x36, 0x47, 0x06, 0x81, 0x6a, 0xba, 0x3e,
		0x25, 0x71, 0x78, 0x50, 0xc2, 0x6c, 0x9c, 0xd0, 0xd8, 0x9d
	};

	gt_sha1_init(&c);
	gt_sha1_update(&c, "a", 1);
	gt_sha1_update(&c, "bc", 2);
	gt_sha1_final(&c, out);
	CHECK(!memcmp(out, abc, 20), "sha1(abc) wrong");
	return 0;
}

/* FIPS 180-4's examples: "abc" in pieces, and the 56-byte message that pads into two blocks. */
static int test_sha256(void)
{
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	static const unsigned char abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
		0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
		0xf2, 0x00, 0x15, 0xad
	};
	static const unsigned char two_blocks[32] = {
		0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26, 0x93, 0x0c, 0x3e,
		0x60, 0x39, 0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff, 0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4,
		0x19, 0xdb, 0x06, 0xc1
	};
	struct gt_sha256 c;
	unsigned char out[32];

	gt_sha256_init(&c);
	gt_sha256_update(&c, "a", 1);
	gt_sha256_update(&c, "bc", 2);
	gt_sha256_final(&c, out);
	CHECK(!memcmp(out, abc, 32), "sha256(abc) wrong");
	gt_sha256_init(&c);
	gt_sha256_update(&c, two, sizeof(two) - 1);
	gt_sha256_final(&c, out);
	CHECK(!memcmp(out, two_blocks, 32), "sha256 of 56 bytes wrong");
	return 0;
}

static int test_sizeof(void)
{
	CHECK(gt_abi_version() == GT_ABI_VERSION, "abi");
	CHECK(gt_sizeof("struct gt_preload_result") == sizeof(struct gt_preload_result), "size");
	CHECK(gt_sizeof("struct nope") == 0, "unknown name");
	CHECK(gt_sizeof(NULL) == 0, "NULL name");
	return 0;
}

static int test_hist(void)
{
	int b;

	for (b = 1; b < GT_HIST_BUCKETS; b++)
		CHECK(gt_hist_lower(b) > gt_hist_lower(b - 1), "bucket %d not increasing", b);
	return 0;
}

/* Files a, b, ... in tmpdir; half the list names missing files. */
static char *make_list(int n, size_t *len)
{
	char *buf = malloc((size_t)n * 32), *p = buf;
	int i;

	for (i = 0; i < n; i++) {
		p += sprintf(p, "%s%d", i % 2 ? "missing-" : "f", i) + 1;
		if (!(i % 2)) {
			char name[32];
			snprintf(name, sizeof(name), "f%d", i);
			write_bytes(path_in(name), "x", 1);
		}
	}
	*len = (size_t)(p - buf);
	return buf;
}

static int test_preload(void)
{
	struct gt_preload_opts o = { .threads = 4, .split = GT_SPLIT_SLICES, .record_latency = 1 };
	struct gt_preload_result r;
	char err[256];
	size_t len;
	char *list = make_list(2000, &len);
	int rc, split;

	for (split = 0; split < 2; split++) {
		o.split = split;
		o.io_streams = 2;
		o.batch = 100;
		rc = gt_preload_run(tmpdir, list, 2000, &o, NULL, &r, err, sizeof(err));
		CHECK(rc == GT_OK, "rc %d %s", rc, err);
		CHECK(r.done == 2000 && r.errors == 1000, "done %llu errors %llu",
		      (unsigned long long)r.done, (unsigned long long)r.errors);
		CHECK(r.errno_count[ENOENT] == 1000, "ENOENT count");
		CHECK(r.latency.count == 2000, "latency count");
		CHECK(r.threads == 4, "threads %d", r.threads);
	}
	o.threads = 0;
	CHECK(gt_preload_run(tmpdir, list, 2000, &o, NULL, &r, err, sizeof(err)) == GT_EINVAL, "threads 0");
	o.threads = 2;
	o.split = GT_SPLIT_STREAMS;
	o.io_streams = 3;
	CHECK(gt_preload_run(tmpdir, list, 2000, &o, NULL, &r, err, sizeof(err)) == GT_EINVAL,
	      "streams > threads");
	o.io_streams = 1;
	CHECK(gt_preload_run("/nonexistent-dir", list, 2000, &o, NULL, &r, err, sizeof(err)) == GT_ESYS,
	      "bad base");
	CHECK(strstr(err, "unable to open '/nonexistent-dir'"), "message: %s", err);
	free(list);
	return 0;
}

static int test_preload_cancel(void)
{
	struct gt_preload_opts o = { .threads = 2, .split = GT_SPLIT_SLICES };
	struct gt_preload_result r;
	struct gt_ctl ctl;
	char err[256];
	size_t len;
	char *list = make_list(4000, &len);
	int rc;

	gt_ctl_init(&ctl, 0, 0);
	gt_ctl_cancel(&ctl);
	rc = gt_preload_run(tmpdir, list, 4000, &o, &ctl, &r, err, sizeof(err));
	CHECK(rc == GT_ECANCELED, "rc %d", rc);
	CHECK(r.done < 4000, "stopped early");
	gt_ctl_init(&ctl, 1, 0);	/* 1 ns deadline */
	rc = gt_preload_run(tmpdir, list, 4000, &o, &ctl, &r, err, sizeof(err));
	CHECK(rc == GT_ETIMEDOUT, "rc %d", rc);
	free(list);
	return 0;
}

static int test_checkout(void)
{
	const char paths[] = "a/b/one\0a/b/two\0a/c/three\0top\0";
	uint64_t sizes[4] = { 10, 100000, 0, 5000 };
	struct gt_checkout_opts o = { .workers = 3, .threshold = 2 };
	struct gt_checkout_result r;
	char err[256];
	char *dir = strdup(path_in("co"));
	int rc;

	mkdir(dir, 0777);
	rc = gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_OK, "rc %d %s", rc, err);
	CHECK(r.files == 4 && r.bytes == 105010 && r.workers_used == 3, "files %llu bytes %llu",
	      (unsigned long long)r.files, (unsigned long long)r.bytes);
	CHECK(r.dirs_created == 3, "dirs %llu", (unsigned long long)r.dirs_created);
	CHECK(count_entries(dir) == 0, "left %d entries", count_entries(dir));

	/* Keep the directories: the files go; a second run makes no directory
	 * and, keeping nothing, leaves the first run's directories. */
	o.keep = GT_CHECKOUT_KEEP_DIRS;
	rc = gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_OK && r.dirs_created == 3, "rc %d %s", rc, err);
	CHECK(count_entries(dir) == 3, "kept dirs %d", count_entries(dir));
	o.keep = GT_CHECKOUT_REMOVE;
	rc = gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_OK && r.dirs_created == 0 && r.files == 4, "rc %d %s dirs %llu", rc, err,
	      (unsigned long long)r.dirs_created);
	CHECK(count_entries(dir) == 3, "earlier dirs left: %d", count_entries(dir));
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", dir);
		system(cmd);
	}
	/* Deep and partly there: the missing components are made, and only ours removed. */
	{
		char a[600];
		snprintf(a, sizeof(a), "%s/a", dir);
		mkdir(a, 0777);
		rc = gt_checkout_run(dir, "a/x/y/z/deep\0a/x/y/w/deep\0", sizes, 2, &o, NULL, &r,
				     err, sizeof(err));
		CHECK(rc == GT_OK && r.dirs_created == 4, "rc %d %s dirs %llu", rc, err,
		      (unsigned long long)r.dirs_created);
		CHECK(count_entries(dir) == 1, "only a left: %d", count_entries(dir));
		rmdir(a);
	}
	o.keep = 3;
	CHECK(gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err)) == GT_EINVAL,
	      "keep out of range refused");

	o.threshold = 100;
	o.keep = 1;
	rc = gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_OK && r.workers_used == 1, "below threshold is sequential");
	CHECK(count_entries(dir) == 7, "kept %d", count_entries(dir));
	/* O_EXCL: a second run over existing files fails and removes only its own. */
	o.keep = 0;
	rc = gt_checkout_run(dir, paths, sizes, 4, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_ESYS && strstr(err, "unable to create 'a/b/one'"), "rc %d %s", rc, err);
	CHECK(count_entries(dir) == 7, "user files kept: %d", count_entries(dir));
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", dir);
		system(cmd);
	}
	CHECK(gt_checkout_run(dir, "../escape\0", sizes, 1, &o, NULL, &r, err, sizeof(err)) == GT_EINVAL,
	      "dotdot refused");
	CHECK(gt_checkout_run(dir, "/abs\0", sizes, 1, &o, NULL, &r, err, sizeof(err)) == GT_EINVAL,
	      "absolute refused");
	{
		struct gt_ctl ctl;
		gt_ctl_init(&ctl, 0, 1000);
		CHECK(gt_checkout_run(dir, paths, sizes, 4, &o, &ctl, &r, err, sizeof(err)) == GT_EBUDGET,
		      "budget");
	}
	free(dir);
	return 0;
}

static int test_smallfile_and_latency(void)
{
	struct gt_smallfile_opts o = { .files = 250, .file_size = 4096, .per_dir = 10, .sync = 1 };
	struct gt_smallfile_result r;
	struct gt_latency_result l;
	char err[256];
	char *dir = strdup(path_in("sf"));
	int rc;

	mkdir(dir, 0777);
	rc = gt_smallfile_run(dir, &o, NULL, &r, err, sizeof(err));
	CHECK(rc == GT_OK, "rc %d %s", rc, err);
	CHECK(r.files == 250 && r.dirs == 25, "files %llu", (unsigned long long)r.files);
	CHECK(count_entries(dir) == 0, "left %d", count_entries(dir));
	rc = gt_latency_run(dir, 100, 3, 4, NULL, &l, err, sizeof(err));
	CHECK(rc == GT_OK, "rc %d %s", rc, err);
	CHECK(l.op[GT_LAT_LSTAT_MISS].count == 100 && l.op[GT_LAT_FSYNC].count == 3, "counts");
	CHECK(l.op[GT_LAT_READ_4K].min_ns > 0, "read timed");
	CHECK(l.op[GT_LAT_COLD_READ].count == 4, "cold reads");
	CHECK(count_entries(dir) == 0, "latency left %d", count_entries(dir));
	free(dir);
	return 0;
}

static int test_index_roundtrip(void)
{
	struct gt_index_shape s = { .version = 2, .entries = 30000, .depth = 3, .width = 10, .files = 30 };
	struct gt_index_opts o = { .threads = 1, .verify_checksum = 1 };
	struct gt_index_result r;
	char err[256];
	uint32_t v;
	int rc, alloc, threads;

	for (v = 2; v <= 4; v++) {
		s.version = v;
		s.ieot_blocks = v == 3 ? 0 : 4;
		rc = gt_index_write_synthetic(path_in("index"), &s, NULL, err, sizeof(err));
		CHECK(rc == GT_OK, "write rc %d %s", rc, err);
		for (alloc = 0; alloc < 2; alloc++)
			for (threads = 1; threads <= 4; threads += 3) {
				o.alloc = alloc;
				o.threads = threads;
				rc = gt_index_read(path_in("index"), &o, NULL, &r, err, sizeof(err));
				CHECK(rc == GT_OK, "v%u read rc %d %s", v, rc, err);
				CHECK(r.entries == 30000 && r.version == v, "entries %u", r.entries);
				/* 30 files per dir: 1 + 10 + 100 + 889 dirs hold 30000 */
				CHECK(r.dirs == 999 && r.max_depth == 3, "dirs %u depth %u", r.dirs, r.max_depth);
				CHECK(r.size_hist[0] == 30000, "all empty");
				CHECK(r.has_ieot == (v != 3), "ieot %d", r.has_ieot);
				CHECK(r.threads_used == ((v != 3 && threads == 4) ? 4 : 1),
				      "threads %d", r.threads_used);
				CHECK(alloc == GT_ALLOC_MALLOC ? r.allocations == 30000 : r.allocations < 100,
				      "allocations %llu", (unsigned long long)r.allocations);
			}
	}
	return 0;
}

/* Rewrite the trailer so a deliberately damaged file passes the checksum. */
static void fix_trailer(unsigned char *buf, size_t len)
{
	struct gt_sha1 c;

	gt_sha1_init(&c);
	gt_sha1_update(&c, buf, len - 20);
	gt_sha1_final(&c, buf + len - 20);
}

static int expect_corrupt(const unsigned char *buf, size_t len, const char *want)
{
	struct gt_index_opts o = { .threads = 2, .verify_checksum = 1 };
	struct gt_index_result r;
	char err[256] = "";
	int rc, alloc;

	for (alloc = 0; alloc < 2; alloc++) {
		o.alloc = alloc;
		rc = gt_index_parse(buf, len, &o, NULL, &r, err, sizeof(err));
		CHECK(rc == GT_ECORRUPT, "want corrupt (%s), got %d: %s", want, rc, err);
		CHECK(strstr(err, want), "message '%s' lacks '%s'", err, want);
	}
	return 0;
}

static int test_index_corrupt(void)
{
	struct gt_index_shape s = { .version = 2, .entries = 50, .depth = 1, .width = 5, .files = 10 };
	unsigned char *good, *buf;
	size_t len;
	char err[256];
	int rc = 0;

	CHECK(gt_index_write_synthetic(path_in("small"), &s, NULL, err, sizeof(err)) == GT_OK, "%s", err);
	good = read_bytes(path_in("small"), &len);
	buf = malloc(len);

	rc |= expect_corrupt(good, 10, "too short");
	memcpy(buf, good, len); buf[0] = 'X';
	rc |= expect_corrupt(buf, len, "bad index signature");
	memcpy(buf, good, len); gt_put_be32(buf + 4, 5); fix_trailer(buf, len);
	rc |= expect_corrupt(buf, len, "bad index version 5");
	memcpy(buf, good, len); gt_put_be32(buf + 8, 1000000); fix_trailer(buf, len);
	rc |= expect_corrupt(buf, len, "claims 1000000 entries");
	memcpy(buf, good, len); buf[len - 1] ^= 1;
	rc |= expect_corrupt(buf, len, "checksum mismatch");
	/* First entry's name length says 0xFFF and there is no NUL before the end. */
	memcpy(buf, good, len);
	buf[12 + 60] = 0x0f; buf[12 + 61] = 0xff;
	memset(buf + 12 + 62, 'a', len - 12 - 62 - 20);
	fix_trailer(buf, len);
	rc |= expect_corrupt(buf, len, "runs past the end");
	/* An extended flags word with a bit Git does not know (Git reads it in any version). */
	memcpy(buf, good, len); buf[12 + 60] |= 0x40; buf[12 + 62] = 0x01; fix_trailer(buf, len);
	rc |= expect_corrupt(buf, len, "unknown index entry format");
	/* The flags give the path's length (as Git reads it): one past the end is refused. */
	memcpy(buf, good, len); buf[12 + 60] = 0x0f; buf[12 + 61] = 0xfe; fix_trailer(buf, len);
	rc |= expect_corrupt(buf, len, "runs past the end");
	/* An extension whose size runs past the trailer. */
	{
		unsigned char *ext = malloc(len + 8);
		memcpy(ext, good, len - 20);
		memcpy(ext + len - 20, "TREE", 4);
		gt_put_be32(ext + len - 16, 1000);
		fix_trailer(ext, len + 8);
		rc |= expect_corrupt(ext, len + 8, "runs past the end");
		free(ext);
	}
	free(good);

	/* v4: the second entry strips more than the first entry's path. */
	s.version = 4;
	CHECK(gt_index_write_synthetic(path_in("small4"), &s, NULL, err, sizeof(err)) == GT_OK, "%s", err);
	good = read_bytes(path_in("small4"), &len);
	{
		/* entry 0: fixed 62 + varint(0) + "dir0/file0\0" */
		size_t second = 12 + 62 + 1 + strlen((char *)good + 12 + 63) + 1;
		buf = realloc(buf, len);
		memcpy(buf, good, len);
		buf[second + 62] = 100;
		fix_trailer(buf, len);
		rc |= expect_corrupt(buf, len, "strips 100 bytes");
	}
	free(good);
	free(buf);
	return rc;
}

struct cancel_arg {
	struct gt_ctl *ctl;
};

static void *cancel_soon(void *p)
{
	struct cancel_arg *a = p;
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	gt_ctl_cancel(a->ctl);
	return NULL;
}

static int test_cancel_from_thread(void)
{
	struct gt_smallfile_opts o = { .files = 10000000, .file_size = 0, .per_dir = 100 };
	struct gt_smallfile_result r;
	struct gt_ctl ctl;
	struct cancel_arg a = { &ctl };
	pthread_t t;
	char err[256];
	char *dir = strdup(path_in("cancel"));
	int rc;

	mkdir(dir, 0777);
	gt_ctl_init(&ctl, 0, 0);
	pthread_create(&t, NULL, cancel_soon, &a);
	rc = gt_smallfile_run(dir, &o, &ctl, &r, err, sizeof(err));
	pthread_join(t, NULL);
	CHECK(rc == GT_ECANCELED, "rc %d %s", rc, err);
	CHECK(count_entries(dir) == 0, "cancelled run left %d", count_entries(dir));
	free(dir);
	return 0;
}

int main(void)
{
	char cmd[300];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gt-ctest-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	run("sha1", test_sha1);
	run("sha256", test_sha256);
	run("sizeof", test_sizeof);
	run("histogram buckets", test_hist);
	run("preload slices and streams", test_preload);
	run("preload cancel and deadline", test_preload_cancel);
	run("checkout", test_checkout);
	run("smallfile and latency", test_smallfile_and_latency);
	run("index write/read v2 v3 v4", test_index_roundtrip);
	run("index corrupt input", test_index_corrupt);
	run("cancel from another thread", test_cancel_from_thread);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	system(cmd);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
