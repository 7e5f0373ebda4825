/*
 * latfs: a passthrough FUSE file system that sleeps a configurable time in
 * each class of operation, so one machine can have storage that behaves
 * like a local disk, like NFS with lookupcache=positive, or like NFS with
 * caching off. It runs multi-threaded, as a network file server serves
 * many requests at once; parallel clients gain on it exactly as far as the
 * latency, not a lock, is what they wait for.
 *
 *   latfs BACKING MOUNTPOINT [-f] -o lookup_us=N,open_us=N,read_us=N,write_us=N,
 *         create_us=N,fsync_us=N,readdir_us=N,attr_timeout=S,entry_timeout=S,
 *         negative_timeout=S
 *
 * lookup_us applies to getattr (every kernel LOOKUP and GETATTR: the high-level
 * FUSE API hands both to getattr); the *_timeout options are the kernel's caches,
 * in seconds (0 = no caching). libfuse's own max_threads=N bounds the requests the
 * server serves at once (a small NFS server, or one of many clients).
 *
 * unstable_ctime=1 reports every regular file's ctime a few seconds further at every
 * call, and unstable_ino=1 a different inode number at every call, as some container and VM
 * mounts do (9p, virtiofs, WSL's drvfs): the stat data git caches in its index never
 * matches again, and every status re-reads and hashes the files (a rehash storm).
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct latfs_opts {
	char *backing;
	int lookup_us, open_us, read_us, write_us, create_us, fsync_us, readdir_us;
	int unstable_ctime, unstable_ino;
	double attr_timeout, entry_timeout, negative_timeout;
};

static struct latfs_opts opts = { .attr_timeout = 1, .entry_timeout = 1 };

#define OPT(t, p) { t, offsetof(struct latfs_opts, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("lookup_us=%d", lookup_us), OPT("open_us=%d", open_us),
	OPT("read_us=%d", read_us), OPT("write_us=%d", write_us),
	OPT("create_us=%d", create_us), OPT("fsync_us=%d", fsync_us),
	OPT("readdir_us=%d", readdir_us), OPT("attr_timeout=%lf", attr_timeout),
	OPT("unstable_ctime=%d", unstable_ctime), OPT("unstable_ino=%d", unstable_ino),
	OPT("entry_timeout=%lf", entry_timeout), OPT("negative_timeout=%lf", negative_timeout),
	FUSE_OPT_END
};

static void delay(int us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	if (us > 0)
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
}

/* Map a path in the mount to the backing directory. */
static void real(char *out, const char *path)
{
	snprintf(out, PATH_MAX, "%s%s", opts.backing, path);
}

static void *latfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->attr_timeout = opts.attr_timeout;
	cfg->entry_timeout = opts.entry_timeout;
	cfg->negative_timeout = opts.negative_timeout;
	return NULL;
}

/*
 * The stat data an unstable mount reports (see the options above): a field that moves
 * at every call, so that even git's next command, within the same second, finds it
 * changed.
 */
static void unsettle(struct stat *st)
{
	static unsigned long generation;
	unsigned long g = __atomic_add_fetch(&generation, 1, __ATOMIC_RELAXED);

	if (opts.unstable_ctime)
		st->st_ctim.tv_sec += (time_t)g;
	if (opts.unstable_ino)
		st->st_ino += (ino_t)g << 20;	/* git keeps the low 32 bits */
}

static int latfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	int rc;

	delay(opts.lookup_us);
	if (fi)
		rc = fstat((int)fi->fh, st);
	else {
		real(p, path);
		rc = lstat(p, st);
	}
	if (rc)
		return -errno;
	if (S_ISREG(st->st_mode))
		unsettle(st);
	return 0;
}

static int latfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	char p[PATH_MAX];
	struct dirent *de;
	DIR *dp;

	(void)off; (void)fi; (void)flags;
	delay(opts.readdir_us);
	real(p, path);
	dp = opendir(p);
	if (!dp)
		return -errno;
	while ((de = readdir(dp))) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12 };
		if (fill(buf, de->d_name, &st, 0, 0))
			break;
	}
	closedir(dp);
	return 0;
}

#define PATH_OP(name, call, us) \
static int latfs_##name(const char *path) \
{ \
	char p[PATH_MAX]; \
	delay(us); \
	real(p, path); \
	return call(p) ? -errno : 0; \
}
PATH_OP(unlink, unlink, opts.create_us)
PATH_OP(rmdir, rmdir, opts.create_us)

static int latfs_mkdir(const char *path, mode_t mode)
{
	char p[PATH_MAX];

	delay(opts.create_us);
	real(p, path);
	return mkdir(p, mode) ? -errno : 0;
}

static int latfs_symlink(const char *target, const char *path)
{
	char p[PATH_MAX];

	delay(opts.create_us);
	real(p, path);
	return symlink(target, p) ? -errno : 0;
}

static int latfs_readlink(const char *path, char *buf, size_t size)
{
	char p[PATH_MAX];
	ssize_t n;

	delay(opts.lookup_us);
	real(p, path);
	n = readlink(p, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int latfs_rename(const char *from, const char *to, unsigned int flags)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (flags)
		return -EINVAL;
	delay(opts.create_us);
	real(a, from);
	real(b, to);
	return rename(a, b) ? -errno : 0;
}

static int latfs_link(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];

	delay(opts.create_us);
	real(a, from);
	real(b, to);
	return link(a, b) ? -errno : 0;
}

static int latfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char p[PATH_MAX];

	delay(opts.write_us);
	if (fi)
		return fchmod((int)fi->fh, mode) ? -errno : 0;
	real(p, path);
	return chmod(p, mode) ? -errno : 0;
}

static int latfs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	char p[PATH_MAX];

	delay(opts.write_us);
	if (fi)
		return fchown((int)fi->fh, uid, gid) ? -errno : 0;
	real(p, path);
	return lchown(p, uid, gid) ? -errno : 0;
}

static int latfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	char p[PATH_MAX];

	delay(opts.write_us);
	if (fi)
		return ftruncate((int)fi->fh, size) ? -errno : 0;
	real(p, path);
	return truncate(p, size) ? -errno : 0;
}

static int latfs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	char p[PATH_MAX];

	delay(opts.write_us);
	if (fi)
		return futimens((int)fi->fh, tv) ? -errno : 0;
	real(p, path);
	return utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int latfs_open(const char *path, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	int fd;

	delay(opts.open_us);
	real(p, path);
	fd = open(p, fi->flags);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int latfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	int fd;

	delay(opts.create_us);
	real(p, path);
	fd = open(p, fi->flags, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int latfs_read(const char *path, char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	ssize_t n;

	(void)path;
	delay(opts.read_us);
	n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int latfs_write(const char *path, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	ssize_t n;

	(void)path;
	delay(opts.write_us);
	n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int latfs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int latfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	delay(opts.fsync_us);
	return (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) ? -errno : 0;
}

static int latfs_statfs(const char *path, struct statvfs *st)
{
	char p[PATH_MAX];

	real(p, path);
	return statvfs(p, st) ? -errno : 0;
}

static int latfs_access(const char *path, int mask)
{
	char p[PATH_MAX];

	delay(opts.lookup_us);
	real(p, path);
	return access(p, mask) ? -errno : 0;
}

static const struct fuse_operations latfs_ops = {
	.init = latfs_init, .getattr = latfs_getattr, .readdir = latfs_readdir,
	.mkdir = latfs_mkdir, .unlink = latfs_unlink, .rmdir = latfs_rmdir,
	.symlink = latfs_symlink, .readlink = latfs_readlink, .rename = latfs_rename,
	.link = latfs_link, .chmod = latfs_chmod, .chown = latfs_chown, .truncate = latfs_truncate,
	.utimens = latfs_utimens, .open = latfs_open, .create = latfs_create,
	.read = latfs_read, .write = latfs_write, .release = latfs_release,
	.fsync = latfs_fsync, .statfs = latfs_statfs, .access = latfs_access,
};

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	char resolved[PATH_MAX];
	int i, rc;

	if (argc < 3) {
		fprintf(stderr, "usage: latfs BACKING MOUNTPOINT [fuse options] [-o latfs options]\n");
		return 2;
	}
	if (!realpath(argv[1], resolved)) {
		fprintf(stderr, "latfs: unable to resolve '%s'\n", argv[1]);
		return 2;
	}
	opts.backing = strdup(resolved);
	/* Drop BACKING from the arguments fuse parses. */
	for (i = 1; i < args.argc - 1; i++)
		args.argv[i] = args.argv[i + 1];
	args.argc--;
	if (fuse_opt_parse(&args, &opts, option_spec, NULL) == -1)
		return 2;
	umask(0);
	rc = fuse_main(args.argc, args.argv, &latfs_ops, NULL);
	fuse_opt_free_args(&args);
	free(opts.backing);
	return rc;
}
