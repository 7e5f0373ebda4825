/*
 * Seed 002's workload: create many small files a few per directory, stat
 * them, read them back, remove them, with an optional syncfs() after the
 * create and remove phases so write-back is part of what is timed.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sf {
	const struct gt_smallfile_opts *o;
	const struct gt_run *run;
	int dirfd;
	char *buf;
	char *err;
	size_t errlen;
	uint64_t made_files, made_dirs;	/* what exists and must go */
};

static void name_of(const struct sf *s, uint64_t i, char *path, size_t n)
{
	snprintf(path, n, "d%llu/f%llu", (unsigned long long)(i / s->o->per_dir),
		 (unsigned long long)(i % s->o->per_dir));
}

static int check(struct sf *s, uint64_t i)
{
	int st;

	if (i % GT_CHECK_EVERY || !(st = gt_run_check(s->run)))
		return GT_OK;
	return gt_error_run(st, s->err, s->errlen, "smallfile run");
}

static int create_phase(struct sf *s)
{
	char path[64];
	uint64_t i;
	int fd, st;

	for (i = 0; i < s->o->files; i++) {
		if ((st = check(s, i)))
			return st;
		if (!(i % s->o->per_dir)) {
			snprintf(path, sizeof(path), "d%llu", (unsigned long long)(i / s->o->per_dir));
			if (mkdirat(s->dirfd, path, 0777))
				return gt_error_errno(errno, s->err, s->errlen,
						      "unable to create directory '%s'", path);
			s->made_dirs++;
		}
		name_of(s, i, path, sizeof(path));
		fd = openat(s->dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			return gt_error_errno(errno, s->err, s->errlen, "unable to create '%s'", path);
		s->made_files++;
		if (write(fd, s->buf, s->o->file_size) != (ssize_t)s->o->file_size) {
			int e = errno ? errno : ENOSPC;
			close(fd);
			return gt_error_errno(e, s->err, s->errlen, "unable to write '%s'", path);
		}
		if (close(fd))
			return gt_error_errno(errno, s->err, s->errlen, "unable to close '%s'", path);
	}
	return GT_OK;
}

static int stat_phase(struct sf *s)
{
	struct stat st;
	char path[64];
	uint64_t i;
	int status;

	for (i = 0; i < s->o->files; i++) {
		if ((status = check(s, i)))
			return status;
		name_of(s, i, path, sizeof(path));
		if (fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW))
			return gt_error_errno(errno, s->err, s->errlen, "unable to stat '%s'", path);
	}
	return GT_OK;
}

static int read_phase(struct sf *s)
{
	char path[64];
	uint64_t i;
	int fd, status;
	ssize_t n;

	for (i = 0; i < s->o->files; i++) {
		if ((status = check(s, i)))
			return status;
		name_of(s, i, path, sizeof(path));
		fd = openat(s->dirfd, path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return gt_error_errno(errno, s->err, s->errlen, "unable to open '%s'", path);
		do
			n = read(fd, s->buf, s->o->file_size ? s->o->file_size : 1);
		while (n > 0);
		close(fd);
		if (n < 0)
			return gt_error_errno(errno, s->err, s->errlen, "unable to read '%s'", path);
	}
	return GT_OK;
}

/* Remove whatever exists; runs on every path out, so it never stops early. */
static void remove_phase(struct sf *s)
{
	char path[64];
	uint64_t i;

	for (i = 0; i < s->made_files; i++) {
		name_of(s, i, path, sizeof(path));
		unlinkat(s->dirfd, path, 0);
	}
	for (i = 0; i < s->made_dirs; i++) {
		snprintf(path, sizeof(path), "d%llu", (unsigned long long)i);
		unlinkat(s->dirfd, path, AT_REMOVEDIR);
	}
	s->made_files = s->made_dirs = 0;
}

static uint64_t timed_sync(int fd)
{
	uint64_t t0 = gt_now_ns();

	syncfs(fd);
	return gt_now_ns() - t0;
}

int gt_smallfile_run(const char *dir, const struct gt_smallfile_opts *opts,
		     struct gt_ctl *ctl, struct gt_smallfile_result *out,
		     char *err, size_t errlen)
{
	struct gt_run run;
	struct sf s = { .o = opts, .run = &run, .err = err, .errlen = errlen };
	uint64_t t0;
	int status;

	if (!dir || !opts || !out)
		return gt_error(GT_EINVAL, err, errlen, "dir, opts and out are required");
	memset(out, 0, sizeof(*out));
	if (!opts->per_dir || opts->file_size > (1u << 24))
		return gt_error(GT_EINVAL, err, errlen, "per_dir must be >= 1 and file_size <= 16 MiB");
	gt_run_start(&run, ctl);
	if (opts->files > UINT64_MAX / (opts->file_size + 1) ||
	    gt_run_budget(&run, opts->files * opts->file_size))
		return gt_error(GT_EBUDGET, err, errlen, "%llu files of %llu bytes exceed the byte budget",
				(unsigned long long)opts->files, (unsigned long long)opts->file_size);
	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.dirfd < 0)
		return gt_error_errno(errno, err, errlen, "unable to open '%s'", dir);
	s.buf = malloc(opts->file_size ? opts->file_size : 1);
	if (!s.buf) {
		close(s.dirfd);
		return gt_error(GT_ENOMEM, err, errlen, "out of memory");
	}
	memset(s.buf, 's', opts->file_size ? opts->file_size : 1);

	t0 = gt_now_ns();
	status = create_phase(&s);
	out->create_ns = gt_now_ns() - t0;
	out->files = s.made_files;
	out->dirs = s.made_dirs;
	out->bytes = s.made_files * opts->file_size;
	if (!status && opts->sync)
		out->sync_create_ns = timed_sync(s.dirfd);
	if (!status) {
		t0 = gt_now_ns();
		status = stat_phase(&s);
		out->stat_ns = gt_now_ns() - t0;
	}
	if (!status) {
		t0 = gt_now_ns();
		status = read_phase(&s);
		out->read_ns = gt_now_ns() - t0;
	}
	t0 = gt_now_ns();
	remove_phase(&s);
	out->remove_ns = gt_now_ns() - t0;
	if (!status && opts->sync)
		out->sync_remove_ns = timed_sync(s.dirfd);
	free(s.buf);
	close(s.dirfd);
	return status;
}
