/*
 * Single-operation latencies on one file system: what a hit lstat, a
 * negative lookup (seed 004's NFS clone), a small read, a small create and
 * an fsync each cost here. Every sample is timed alone, so the histogram
 * is of latencies, not of throughput.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAMPLE_BYTES 4096
#define POOL_FILES 64	/* distinct files the hit/read samples rotate over */

struct lat {
	int dirfd;
	char buf[SAMPLE_BYTES];
	const struct gt_run *run;
	char *err;
	size_t errlen;
	int pool_made;
	int probes_made;
	int cold_made;
};

static int make_file(struct lat *l, const char *name, int do_fsync)
{
	int fd = openat(l->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);

	if (fd < 0)
		return -1;
	if (write(fd, l->buf, SAMPLE_BYTES) != SAMPLE_BYTES || (do_fsync && fsync(fd))) {
		int e = errno ? errno : ENOSPC;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

static int sample(struct lat *l, int op, uint32_t i, struct gt_hist *h)
{
	char name[64];
	struct stat st;
	uint64_t t0;
	int fd, rc = 0;

	snprintf(name, sizeof(name), "gt-lat-%u", i % POOL_FILES);
	switch (op) {
	case GT_LAT_LSTAT_HIT:
		t0 = gt_now_ns();
		rc = fstatat(l->dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
		break;
	case GT_LAT_LSTAT_MISS:
		snprintf(name, sizeof(name), "gt-lat-missing-%u", i);
		t0 = gt_now_ns();
		rc = fstatat(l->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ? 0 : -1;
		errno = EEXIST;
		break;
	case GT_LAT_READ_4K:
		t0 = gt_now_ns();
		fd = openat(l->dirfd, name, O_RDONLY | O_CLOEXEC);
		rc = fd < 0 || read(fd, l->buf, SAMPLE_BYTES) < 0;
		if (fd >= 0)
			close(fd);
		break;
	default:	/* GT_LAT_CREATE, GT_LAT_FSYNC */
		snprintf(name, sizeof(name), "gt-lat-new-%u", i);
		t0 = gt_now_ns();
		rc = make_file(l, name, op == GT_LAT_FSYNC);
		if (!rc)
			l->probes_made++;
		break;
	}
	if (rc)
		return gt_error_errno(errno, l->err, l->errlen, "latency sample '%s' failed", name);
	gt_hist_add(h, gt_now_ns() - t0);
	if (op == GT_LAT_CREATE || op == GT_LAT_FSYNC) {
		unlinkat(l->dirfd, name, 0);
		l->probes_made--;
	}
	return GT_OK;
}

#define COLD_STRIDE (1u << 20)
#define COLD_MAX_MIB 64

/* Write, fsync and evict a file of `mib` MiB for the cold-read samples. */
static int make_cold_file(struct lat *l, uint32_t mib)
{
	char *chunk = malloc(COLD_STRIDE);
	int fd, rc = -1;
	uint32_t i;

	if (!chunk) {
		errno = ENOMEM;
		return -1;
	}
	memset(chunk, 'c', COLD_STRIDE);
	fd = openat(l->dirfd, "gt-lat-cold", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd >= 0) {
		l->cold_made = 1;
		for (i = 0; i < mib; i++)
			if (write(fd, chunk, COLD_STRIDE) != (ssize_t)COLD_STRIDE)
				break;
		if (i == mib && !fsync(fd) && !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
			rc = 0;
		if (rc && !errno)
			errno = ENOSPC;
		close(fd);
	}
	free(chunk);
	return rc;
}

static int cold_reads(struct lat *l, uint32_t n, struct gt_hist *h)
{
	uint64_t t0;
	uint32_t i, at;
	int fd, status = GT_OK;

	if (make_cold_file(l, n))
		return gt_error_errno(errno, l->err, l->errlen, "unable to prepare the cold-read file");
	fd = openat(l->dirfd, "gt-lat-cold", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gt_error_errno(errno, l->err, l->errlen, "unable to open the cold-read file");
	for (i = 0; i < n && !status; i++) {
		/* Visit the strides out of order so readahead cannot guess. */
		at = (uint32_t)(((uint64_t)i * 7 + 3) % n);
		t0 = gt_now_ns();
		if (pread(fd, l->buf, SAMPLE_BYTES, (off_t)at * COLD_STRIDE + 512 * 1024) < 0)
			status = gt_error_errno(errno, l->err, l->errlen, "cold read failed");
		else
			gt_hist_add(h, gt_now_ns() - t0);
	}
	close(fd);
	return status;
}

static void cleanup(struct lat *l)
{
	char name[64];
	int i;

	for (i = 0; i < l->pool_made; i++) {
		snprintf(name, sizeof(name), "gt-lat-%d", i);
		unlinkat(l->dirfd, name, 0);
	}
	if (l->cold_made)
		unlinkat(l->dirfd, "gt-lat-cold", 0);
}

int gt_latency_run(const char *dir, uint32_t samples, uint32_t fsync_samples,
		   uint32_t cold_samples, struct gt_ctl *ctl,
		   struct gt_latency_result *out, char *err, size_t errlen)
{
	struct gt_run run;
	struct lat l = { .run = &run, .err = err, .errlen = errlen };
	char name[64];
	uint32_t i, n;
	int op, status = GT_OK;

	if (!dir || !out)
		return gt_error(GT_EINVAL, err, errlen, "dir and out are required");
	memset(out, 0, sizeof(*out));
	for (op = 0; op < GT_LAT_NR; op++)
		gt_hist_init(&out->op[op]);
	gt_run_start(&run, ctl);
	if (cold_samples > COLD_MAX_MIB)
		cold_samples = COLD_MAX_MIB;
	if (gt_run_budget(&run, (uint64_t)(POOL_FILES + 1) * SAMPLE_BYTES +
				(uint64_t)cold_samples * COLD_STRIDE))
		return gt_error(GT_EBUDGET, err, errlen, "latency probe needs %llu bytes",
				(unsigned long long)((POOL_FILES + 1) * SAMPLE_BYTES +
						     (uint64_t)cold_samples * COLD_STRIDE));
	l.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l.dirfd < 0)
		return gt_error_errno(errno, err, errlen, "unable to open '%s'", dir);
	memset(l.buf, 'l', sizeof(l.buf));
	for (i = 0; i < POOL_FILES && i < (samples ? samples : 1); i++, l.pool_made++) {
		snprintf(name, sizeof(name), "gt-lat-%u", i);
		if (make_file(&l, name, 0)) {
			status = gt_error_errno(errno, err, errlen, "unable to create '%s' in '%s'", name, dir);
			goto out;
		}
	}
	for (op = 0; op < GT_LAT_COLD_READ && !status; op++) {
		n = op == GT_LAT_FSYNC ? fsync_samples : samples;
		for (i = 0; i < n && !status; i++) {
			if (!(i % 16) && (status = gt_run_check(&run)))
				status = gt_error_run(status, err, errlen, "latency probe");
			else
				status = sample(&l, op, i, &out->op[op]);
		}
	}
	if (!status && cold_samples)
		status = cold_reads(&l, cold_samples, &out->op[GT_LAT_COLD_READ]);
out:
	cleanup(&l);
	close(l.dirfd);
	return status;
}
