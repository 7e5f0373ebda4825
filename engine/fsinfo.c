/* File-system facts for the probes: statfs() and page-cache residency. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define RESIDENCY_WINDOW (256u << 20)	/* map big files a window at a time */

int gt_fs_info(const char *path, struct gt_fs_info *out, char *err, size_t errlen)
{
	struct statfs fs;
	struct stat st;

	if (!path || !out)
		return gt_error(GT_EINVAL, err, errlen, "path and out are required");
	memset(out, 0, sizeof(*out));
	if (statfs(path, &fs))
		return gt_error_errno(errno, err, errlen, "unable to statfs '%s'", path);
	if (stat(path, &st))
		return gt_error_errno(errno, err, errlen, "unable to stat '%s'", path);
	out->magic = (uint64_t)fs.f_type;
	out->block_size = (uint64_t)fs.f_bsize;
	out->blocks = (uint64_t)fs.f_blocks;
	out->blocks_free = (uint64_t)fs.f_bavail;
	out->flags = (uint64_t)fs.f_flags;
	out->name_max = (uint32_t)fs.f_namelen;
	out->dev_major = major(st.st_dev);
	out->dev_minor = minor(st.st_dev);
	return GT_OK;
}

/*
 * Open the last component `name` in dirfd for reading: never through a link,
 * never waiting for a FIFO's writer or a device; O_NOATIME where permitted.
 */
static int open_leaf(int dirfd, const char *name)
{
	const int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	int fd = openat(dirfd, name, flags | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = openat(dirfd, name, flags);
	return fd;
}

/*
 * Open `path` beneath the directory `base`, one component at a time, none of
 * them a symbolic link or "..": what git itself would check out there, and
 * nothing a link in the work tree points at.
 */
static int open_beneath(const char *base, const char *path)
{
	char comp[4096];
	const char *p = path, *slash;
	int dirfd, next, saved;

	if (*path == '/' || !*path) {
		errno = EINVAL;
		return -1;
	}
	dirfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -1;
	while ((slash = strchr(p, '/'))) {
		size_t len = (size_t)(slash - p);

		if (len >= sizeof(comp) || (len == 2 && !memcmp(p, "..", 2))) {
			close(dirfd);
			errno = EINVAL;
			return -1;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		next = len ? openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			   : dup(dirfd);
		saved = errno;
		close(dirfd);
		if (next < 0) {
			errno = saved;
			return -1;
		}
		dirfd = next;
		p = slash + 1;
	}
	if (!strcmp(p, "..") || !*p) {
		close(dirfd);
		errno = EINVAL;
		return -1;
	}
	next = open_leaf(dirfd, p);
	saved = errno;
	close(dirfd);
	errno = saved;
	return next;
}

int gt_cache_residency(const char *base, const char *path, struct gt_residency *out,
		       char *err, size_t errlen)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *vec = NULL;
	struct stat st;
	uint64_t off, i, n;
	size_t len;
	void *map;
	int fd, status = GT_OK;

	if (!path || !out)
		return gt_error(GT_EINVAL, err, errlen, "path and out are required");
	fd = base ? open_beneath(base, path) : open_leaf(AT_FDCWD, path);
	if (fd < 0)
		return gt_error_errno(errno, err, errlen, "unable to open '%s'", path);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		status = gt_error(GT_EINVAL, err, errlen, "'%s' is not a regular file", path);
		goto out;
	}
	vec = malloc(RESIDENCY_WINDOW / (uint64_t)page);
	if (!vec) {
		status = gt_error(GT_ENOMEM, err, errlen, "out of memory");
		goto out;
	}
	out->bytes += (uint64_t)st.st_size;
	for (off = 0; off < (uint64_t)st.st_size; off += RESIDENCY_WINDOW) {
		len = (uint64_t)st.st_size - off < RESIDENCY_WINDOW ?
			(size_t)((uint64_t)st.st_size - off) : RESIDENCY_WINDOW;
		map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
		if (map == MAP_FAILED) {
			status = gt_error_errno(errno, err, errlen, "unable to map '%s'", path);
			goto out;
		}
		n = DIV_ROUND_UP(len, (uint64_t)page);
		if (mincore(map, len, vec)) {
			status = gt_error_errno(errno, err, errlen, "mincore failed on '%s'", path);
			munmap(map, len);
			goto out;
		}
		for (i = 0; i < n; i++)
			out->resident += vec[i] & 1;
		out->pages += n;
		munmap(map, len);
	}
out:
	free(vec);
	close(fd);
	return status;
}
