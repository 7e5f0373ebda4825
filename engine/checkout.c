/*
 * Write files with the system calls Git's checkout uses (entry.c and
 * parallel-checkout.c): leading directories, open(O_WRONLY|O_CREAT|O_EXCL),
 * write, optional fsync, close. Workers are threads here where Git uses
 * `git checkout--worker` processes; the file-system work is the same, and
 * the per-process cost of Git's workers is measured separately by timing
 * real git.
 *
 * Git's main process makes an entry's leading directories (checkout_entry()
 * calls create_directories() before enqueue_checkout()), one at a time,
 * whatever the worker count; only the files are written in parallel. So
 * here too the directories are made first, on the calling thread, timed
 * apart (dirs_ns), and the workers' clock starts after them. Made by the
 * workers, creations in one parent would wait on the parent's lock, and a
 * storage's curve would flatten where git's does not.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_CHUNK (64 * 1024)

struct dirlist {
	char **v;
	size_t nr, alloc;
};

struct checkout_shared {
	const struct gt_run *run;
	const struct gt_checkout_opts *opts;
	int dirfd;
	const char **paths;
	const uint64_t *sizes;
	unsigned char *written;	/* written[i]: file i exists and is ours */
	struct dirlist dirs;	/* the directories we made */
	const char *chunk;
	int stop;
	int status;		/* first failure: ctl status or GT_ESYS */
	char *err;		/* first failure's message */
	size_t errlen;
	pthread_mutex_t err_lock;
};

struct checkout_worker {
	pthread_t tid;
	struct checkout_shared *sh;
	size_t begin, end;
	struct gt_thread_stat stat;
};

static int fail(struct checkout_shared *sh, int status, int errno_value, const char *what,
		const char *path)
{
	pthread_mutex_lock(&sh->err_lock);
	if (!sh->status) {
		if (errno_value)
			sh->status = gt_error_errno(errno_value, sh->err, sh->errlen,
						    "unable to %s '%s'", what, path);
		else
			sh->status = gt_error_run(status, sh->err, sh->errlen, "checkout");
	}
	pthread_mutex_unlock(&sh->err_lock);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	return -1;
}

static int dirlist_add(struct dirlist *d, const char *path, size_t len)
{
	char *copy;

	if (d->nr == d->alloc) {
		size_t alloc = d->alloc ? 2 * d->alloc : 16;
		char **v = realloc(d->v, alloc * sizeof(*v));
		if (!v)
			return -1;
		d->v = v;
		d->alloc = alloc;
	}
	copy = strndup(path, len);
	if (!copy)
		return -1;
	d->v[d->nr++] = copy;
	return 0;
}

/*
 * Create every missing leading directory of `path` (its first `len` bytes),
 * remembering ours in `made`. One mkdir of the whole directory first: where
 * it exists (EEXIST) or only it is missing, that is one path walk, where a
 * component at a time would walk the path from the root once per component
 * (a round trip each on storage that caches no lookups).
 */
static int create_leading_dirs(struct checkout_shared *sh, struct dirlist *made,
			       const char *path, size_t dirlen)
{
	char buf[4096];
	const char *slash;
	size_t len;

	if (dirlen >= sizeof(buf))
		return fail(sh, GT_ESYS, ENAMETOOLONG, "create directories for", path);
	memcpy(buf, path, dirlen);
	buf[dirlen] = '\0';
	if (!mkdirat(sh->dirfd, buf, 0777))
		return dirlist_add(made, buf, dirlen) ?
			fail(sh, GT_ESYS, ENOMEM, "remember directory", buf) : 0;
	if (errno == EEXIST)
		return 0;	/* a file there fails the file's open, with its path */
	if (errno != ENOENT)
		return fail(sh, GT_ESYS, errno, "create directory", buf);

	for (slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
		len = (size_t)(slash - path);
		memcpy(buf, path, len);
		buf[len] = '\0';
		if (!mkdirat(sh->dirfd, buf, 0777)) {
			if (dirlist_add(made, buf, len))
				return fail(sh, GT_ESYS, ENOMEM, "remember directory", buf);
		} else if (errno != EEXIST) {
			return fail(sh, GT_ESYS, errno, "create directory", buf);
		}
	}
	return 0;
}

/* The length of `path`'s leading directories ("a/b" of "a/b/c"; 0 for "c"). */
static size_t dir_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) : 0;
}

/*
 * Every path's leading directories, made one at a time before the workers
 * start, as Git's main process makes them. A path in the directory of the
 * one before it needs none (Git's lstat cache skips them the same way).
 */
static int make_directories(struct checkout_shared *sh, size_t count)
{
	const char *prev = NULL;
	size_t i, len, prev_len = 0, made = 0;
	int st;

	for (i = 0; i < count; i++) {
		const char *path = sh->paths[i];

		len = dir_len(path);
		if (!len || (prev && len == prev_len && !memcmp(path, prev, len)))
			continue;
		if (!(made++ % 16) && (st = gt_run_check(sh->run)))
			return fail(sh, st, 0, NULL, NULL);
		if (create_leading_dirs(sh, &sh->dirs, path, len))
			return -1;
		prev = path;
		prev_len = len;
	}
	return 0;
}

static int write_all(int fd, const char *chunk, uint64_t size)
{
	while (size) {
		size_t n = size > WRITE_CHUNK ? WRITE_CHUNK : (size_t)size;
		ssize_t got = write(fd, chunk, n);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		size -= (uint64_t)got;
	}
	return 0;
}

static int write_one(struct checkout_worker *w, size_t i)
{
	struct checkout_shared *sh = w->sh;
	const char *path = sh->paths[i];
	int fd;

	fd = openat(sh->dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return fail(sh, GT_ESYS, errno, "create", path);
	sh->written[i] = 1;
	if (write_all(fd, sh->chunk, sh->sizes[i]) ||
	    (sh->opts->fsync && fsync(fd))) {
		int e = errno;
		close(fd);
		return fail(sh, GT_ESYS, e, "write", path);
	}
	if (close(fd))
		return fail(sh, GT_ESYS, errno, "close", path);
	w->stat.ops++;
	w->stat.bytes += sh->sizes[i];
	return 0;
}

static void *checkout_thread(void *arg)
{
	struct checkout_worker *w = arg;
	struct checkout_shared *sh = w->sh;
	size_t i;
	int st;

	w->stat.start_ns = gt_now_ns() - sh->run->start_ns;
	for (i = w->begin; i < w->end; i++) {
		if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
			break;
		if (!((i - w->begin) % 16) && (st = gt_run_check(sh->run))) {
			fail(sh, st, 0, NULL, NULL);
			break;
		}
		if (write_one(w, i)) {
			w->stat.errors++;
			break;
		}
	}
	w->stat.end_ns = gt_now_ns() - sh->run->start_ns;
	return NULL;
}

static int valid_path(const char *p)
{
	const char *c;

	if (!*p || *p == '/')
		return 0;
	for (c = p; *c; c++)
		if (c[0] == '.' && c[1] == '.' && (c == p || c[-1] == '/') &&
		    (c[2] == '/' || !c[2]))
			return 0;
	return p[strlen(p) - 1] != '/';
}

static size_t depth(const char *p)
{
	size_t n = 0;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

static int deeper_first(const void *a, const void *b)
{
	size_t da = depth(*(char *const *)a), db = depth(*(char *const *)b);

	return da < db ? 1 : da > db ? -1 : 0;
}

/*
 * Removal is not timed, but where every unlink is a round trip to a server
 * it costs more than the write it follows. Where the first removal prices
 * the rest above REMOVE_POOL_WORTH_NS (what starting the threads costs),
 * the rest are removed by up to REMOVE_THREADS threads, a slice each.
 */
#define REMOVE_THREADS 16
#define REMOVE_POOL_WORTH_NS 1000000ULL

struct remove_slice {
	pthread_t tid;
	int dirfd, flags;
	const char *const *paths;
	const unsigned char *only;	/* NULL: every path; else only[i] set */
	size_t begin, end;
};

static void *remove_slice(void *arg)
{
	struct remove_slice *s = arg;
	size_t i;

	for (i = s->begin; i < s->end; i++)
		if (!s->only || s->only[i])
			unlinkat(s->dirfd, s->paths[i], s->flags);
	return NULL;
}

static void remove_paths(int dirfd, const char *const *paths, const unsigned char *only,
			 size_t n, int flags)
{
	struct remove_slice s[REMOVE_THREADS];
	size_t first = 0, base, extra, next;
	uint64_t t0;
	int nr, k, started = 0;

	while (first < n && only && !only[first])
		first++;
	if (first >= n)
		return;
	t0 = gt_now_ns();
	unlinkat(dirfd, paths[first], flags);
	first++;
	if (first >= n)
		return;
	nr = n - first < REMOVE_THREADS ? (int)(n - first) : REMOVE_THREADS;
	if ((gt_now_ns() - t0) * (n - first) <= REMOVE_POOL_WORTH_NS)
		nr = 1;
	base = (n - first) / (size_t)nr;
	extra = (n - first) % (size_t)nr;
	next = first;
	for (k = 0; k < nr; k++) {
		s[k].dirfd = dirfd;
		s[k].flags = flags;
		s[k].paths = paths;
		s[k].only = only;
		s[k].begin = next;
		next += base + ((size_t)k < extra);
		s[k].end = next;
	}
	for (k = 0; nr > 1 && k < nr; k++, started++)
		if (pthread_create(&s[k].tid, NULL, remove_slice, &s[k]))
			break;
	/* The slices no thread could be started for are removed here. */
	for (k = started; k < nr; k++)
		remove_slice(&s[k]);
	for (k = 0; k < started; k++)
		pthread_join(s[k].tid, NULL);
}

/*
 * Remove our files, then (unless files_only) our directories, children
 * before parents: one depth at a time, deepest first, so no directory is
 * removed before what is in it.
 */
static void remove_all(struct checkout_shared *sh, size_t count, int files_only)
{
	struct dirlist *all = &sh->dirs;
	size_t i, j;

	remove_paths(sh->dirfd, sh->paths, sh->written, count, 0);
	if (files_only)
		return;
	if (all->nr)
		qsort(all->v, all->nr, sizeof(*all->v), deeper_first);
	for (i = 0; i < all->nr; i = j) {
		for (j = i + 1; j < all->nr && depth(all->v[j]) == depth(all->v[i]); j++)
			;
		remove_paths(sh->dirfd, (const char *const *)all->v + i, NULL, j - i,
			     AT_REMOVEDIR);
	}
}

static void release_dirs(struct dirlist *d)
{
	size_t i;

	for (i = 0; i < d->nr; i++)
		free(d->v[i]);
	free(d->v);
}

static int prepare(const char *paths_buf, const uint64_t *sizes, size_t count,
		   const struct gt_checkout_opts *opts, const struct gt_run *run,
		   struct checkout_shared *sh, char *err, size_t errlen)
{
	uint64_t total = 0;
	size_t i;
	int status;

	if (opts->workers < 1 || opts->workers > GT_MAX_THREADS)
		return gt_error(GT_EINVAL, err, errlen, "workers must be 1..%d, not %d",
				GT_MAX_THREADS, opts->workers);
	if (opts->keep < GT_CHECKOUT_REMOVE || opts->keep > GT_CHECKOUT_KEEP_DIRS)
		return gt_error(GT_EINVAL, err, errlen, "keep must be 0..2, not %d", opts->keep);
	if (count && !sizes)
		return gt_error(GT_EINVAL, err, errlen, "sizes is NULL");
	for (i = 0; i < count; i++)
		total += sizes[i];
	if ((status = gt_run_budget(run, total)))
		return gt_error(status, err, errlen,
				"checkout of %llu bytes exceeds the byte budget",
				(unsigned long long)total);
	sh->paths = gt_split_paths(paths_buf, count, &status, err, errlen);
	if (!sh->paths)
		return status;
	for (i = 0; i < count; i++)
		if (!valid_path(sh->paths[i]))
			return gt_error(GT_EINVAL, err, errlen,
					"path '%s' is not a relative path below the directory",
					sh->paths[i]);
	return GT_OK;
}

int gt_checkout_run(const char *dir, const char *paths, const uint64_t *sizes,
		    size_t count, const struct gt_checkout_opts *opts,
		    struct gt_ctl *ctl, struct gt_checkout_result *out,
		    char *err, size_t errlen)
{
	struct gt_run run;
	struct checkout_shared sh;
	struct checkout_worker *w = NULL;
	char *chunk = NULL;
	size_t base, extra, next = 0;
	int nr = 0, started = 0, k, status;
	uint64_t t0;

	if (!dir || !opts || !out)
		return gt_error(GT_EINVAL, err, errlen, "dir, opts and out are required");
	memset(out, 0, sizeof(*out));
	memset(&sh, 0, sizeof(sh));
	gt_run_start(&run, ctl);
	sh.run = &run;
	sh.opts = opts;
	sh.err = err;
	sh.errlen = errlen;
	pthread_mutex_init(&sh.err_lock, NULL);
	sh.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sh.dirfd < 0) {
		status = gt_error_errno(errno, err, errlen, "unable to open '%s'", dir);
		goto done;
	}
	if ((status = prepare(paths, sizes, count, opts, &run, &sh, err, errlen)))
		goto done;
	sh.sizes = sizes;
	sh.written = calloc(count ? count : 1, 1);
	chunk = malloc(WRITE_CHUNK);
	/* parallel-checkout.c: sequential below the threshold, workers <= items. */
	nr = (count < (size_t)(opts->threshold > 0 ? opts->threshold : 0) || opts->workers <= 1)
		? 1 : (count < (size_t)opts->workers ? (int)count : opts->workers);
	if (nr < 1)
		nr = 1;
	w = calloc((size_t)nr, sizeof(*w));
	if (!sh.written || !chunk || !w) {
		status = gt_error(GT_ENOMEM, err, errlen, "out of memory for %zu files", count);
		goto done;
	}
	memset(chunk, 'g', WRITE_CHUNK);
	sh.chunk = chunk;

	base = count / (size_t)nr;
	extra = count % (size_t)nr;
	for (k = 0; k < nr; k++) {
		w[k].sh = &sh;
		w[k].begin = next;
		next += base + ((size_t)k < extra);
		w[k].end = next;
	}
	t0 = gt_now_ns();
	make_directories(&sh, count);
	out->dirs_ns = gt_now_ns() - t0;
	out->dirs_created = sh.dirs.nr;
	t0 = gt_now_ns();
	if (sh.status) {
		/* a directory could not be made: no file is written */
	} else if (nr == 1) {
		checkout_thread(&w[0]);
		started = 1;
	} else {
		for (k = 0; k < nr; k++) {
			int e = pthread_create(&w[k].tid, NULL, checkout_thread, &w[k]);
			if (e) {
				fail(&sh, GT_ESYS, e, "start worker for", dir);
				break;
			}
			started++;
		}
		for (k = 0; k < started; k++)
			pthread_join(w[k].tid, NULL);
	}
	out->wall_ns = gt_now_ns() - t0;
	out->workers_used = nr;
	for (k = 0; k < started; k++) {
		out->worker[k] = w[k].stat;
		out->files += w[k].stat.ops;
		out->bytes += w[k].stat.bytes;
	}
	status = sh.status;
	if (opts->keep != GT_CHECKOUT_KEEP || status) {
		t0 = gt_now_ns();
		remove_all(&sh, count, opts->keep == GT_CHECKOUT_KEEP_DIRS && !status);
		out->remove_ns = gt_now_ns() - t0;
	}
done:
	release_dirs(&sh.dirs);
	free(w);
	free(chunk);
	free(sh.written);
	free((void *)sh.paths);
	if (sh.dirfd >= 0)
		close(sh.dirfd);
	pthread_mutex_destroy(&sh.err_lock);
	return status;
}
