/*
 * lstat() every path of a list with several threads, the way Git's
 * preload-index.c refreshes the index, plus the "parallel IO" variant from
 * Karsten Blees' 2014 patches (seed 000) where a bounded number of cursors
 * walk the list in order so a cold disk sees few seek positions at once.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

struct stream {
	pthread_mutex_t lock;
	size_t next;
	size_t end;
};

struct preload_shared {
	const struct gt_run *run;
	const char **paths;
	int dirfd;
	int record_latency;
	int batch;
	int stop;		/* set by the main thread when setup fails */
	int status;		/* first ctl status seen by a worker */
	struct stream *streams;
};

struct preload_worker {
	pthread_t tid;
	struct preload_shared *sh;
	size_t begin, end;	/* GT_SPLIT_SLICES */
	struct stream *stream;	/* GT_SPLIT_STREAMS */
	struct gt_thread_stat stat;
	uint64_t errno_count[GT_ERRNO_SLOTS];
	struct gt_hist latency;
};

static int should_stop(struct preload_shared *sh)
{
	int st;

	if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
		return 1;
	st = gt_run_check(sh->run);
	if (st) {
		int expected = GT_OK;
		__atomic_compare_exchange_n(&sh->status, &expected, st, 0,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
		return 1;
	}
	return 0;
}

static void lstat_one(struct preload_worker *w, const char *path)
{
	struct stat st;
	uint64_t t0 = 0;

	if (w->sh->record_latency)
		t0 = gt_now_ns();
	if (fstatat(w->sh->dirfd, path, &st, AT_SYMLINK_NOFOLLOW)) {
		w->stat.errors++;
		gt_count_errno(w->errno_count, errno);
	}
	if (w->sh->record_latency)
		gt_hist_add(&w->latency, gt_now_ns() - t0);
	w->stat.ops++;
}

static void run_range(struct preload_worker *w, size_t begin, size_t end)
{
	size_t i;

	for (i = begin; i < end; i++) {
		if (!((i - begin) % GT_CHECK_EVERY) && should_stop(w->sh))
			return;
		lstat_one(w, w->sh->paths[i]);
	}
}

/* Take the next batch of the stream; 0 when it is exhausted. */
static int grab(struct stream *s, size_t batch, size_t *begin, size_t *end)
{
	int got = 0;

	pthread_mutex_lock(&s->lock);
	if (s->next < s->end) {
		*begin = s->next;
		*end = s->end - s->next > batch ? s->next + batch : s->end;
		s->next = *end;
		got = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return got;
}

static void *preload_thread(void *arg)
{
	struct preload_worker *w = arg;
	const struct gt_run *run = w->sh->run;
	size_t begin, end;

	w->stat.start_ns = gt_now_ns() - run->start_ns;
	if (!w->stream)
		run_range(w, w->begin, w->end);
	else
		while (!should_stop(w->sh) &&
		       grab(w->stream, (size_t)w->sh->batch, &begin, &end))
			run_range(w, begin, end);
	w->stat.end_ns = gt_now_ns() - run->start_ns;
	return NULL;
}

static int check_opts(const struct gt_preload_opts *o, char *err, size_t errlen)
{
	if (o->threads < 1 || o->threads > GT_MAX_THREADS)
		return gt_error(GT_EINVAL, err, errlen,
				"threads must be 1..%d, not %d", GT_MAX_THREADS, o->threads);
	if (o->split != GT_SPLIT_SLICES && o->split != GT_SPLIT_STREAMS)
		return gt_error(GT_EINVAL, err, errlen, "unknown split mode %d", o->split);
	if (o->split == GT_SPLIT_STREAMS &&
	    (o->io_streams < 1 || o->io_streams > o->threads || o->batch < 1))
		return gt_error(GT_EINVAL, err, errlen,
				"io_streams must be 1..threads and batch >= 1");
	return GT_OK;
}

/* Give each worker its slice or its stream before any thread starts. */
static void assign_work(struct preload_worker *w, int nr, size_t count,
			const struct gt_preload_opts *o, struct stream *streams)
{
	size_t work = DIV_ROUND_UP(count, (size_t)nr);
	size_t region = DIV_ROUND_UP(count, (size_t)(o->split == GT_SPLIT_STREAMS ? o->io_streams : 1));
	int i;

	if (o->split == GT_SPLIT_STREAMS)
		for (i = 0; i < o->io_streams; i++) {
			streams[i].next = (size_t)i * region < count ? (size_t)i * region : count;
			streams[i].end = streams[i].next + region < count ? streams[i].next + region : count;
		}
	for (i = 0; i < nr; i++) {
		w[i].begin = (size_t)i * work < count ? (size_t)i * work : count;
		w[i].end = w[i].begin + work < count ? w[i].begin + work : count;
		w[i].stream = o->split == GT_SPLIT_STREAMS ? &streams[i % o->io_streams] : NULL;
		gt_hist_init(&w[i].latency);
	}
}

static void collect(struct gt_preload_result *out, struct preload_worker *w, int nr)
{
	int i, e;

	for (i = 0; i < nr; i++) {
		out->thread[i] = w[i].stat;
		out->done += w[i].stat.ops;
		out->errors += w[i].stat.errors;
		for (e = 0; e < GT_ERRNO_SLOTS; e++)
			out->errno_count[e] += w[i].errno_count[e];
		gt_hist_merge(&out->latency, &w[i].latency);
	}
}

int gt_preload_run(const char *base, const char *paths, size_t count,
		   const struct gt_preload_opts *opts, struct gt_ctl *ctl,
		   struct gt_preload_result *out, char *err, size_t errlen)
{
	struct gt_run run;
	struct preload_shared sh;
	struct preload_worker *w = NULL;
	struct stream *streams = NULL;
	int nr, started = 0, i, status;

	if (!opts || !out)
		return gt_error(GT_EINVAL, err, errlen, "opts and out are required");
	memset(out, 0, sizeof(*out));
	gt_hist_init(&out->latency);
	status = check_opts(opts, err, errlen);
	if (status)
		return status;

	memset(&sh, 0, sizeof(sh));
	gt_run_start(&run, ctl);
	sh.run = &run;
	sh.record_latency = opts->record_latency;
	sh.batch = opts->batch;
	sh.dirfd = AT_FDCWD;
	if (base) {
		sh.dirfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sh.dirfd < 0)
			return gt_error_errno(errno, err, errlen, "unable to open '%s'", base);
	}
	sh.paths = gt_split_paths(paths, count, &status, err, errlen);
	if (!sh.paths)
		goto done;

	/* Never more threads than entries, as preload-index.c. */
	nr = count < (size_t)opts->threads ? (int)(count ? count : 1) : opts->threads;
	w = calloc((size_t)nr, sizeof(*w));
	streams = calloc((size_t)(opts->io_streams > 0 ? opts->io_streams : 1), sizeof(*streams));
	if (!w || !streams) {
		status = gt_error(GT_ENOMEM, err, errlen, "out of memory for %d threads", nr);
		goto done;
	}
	for (i = 0; i < (opts->split == GT_SPLIT_STREAMS ? opts->io_streams : 0); i++)
		pthread_mutex_init(&streams[i].lock, NULL);
	assign_work(w, nr, count, opts, streams);

	for (i = 0; i < nr; i++) {
		w[i].sh = &sh;
		if (nr == 1) {
			preload_thread(&w[0]);
			started = 1;
			break;
		}
		if ((status = pthread_create(&w[i].tid, NULL, preload_thread, &w[i]))) {
			__atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
			status = gt_error_errno(status, err, errlen, "unable to create thread %d", i);
			break;
		}
		started++;
	}
	for (i = 0; nr > 1 && i < started; i++)
		pthread_join(w[i].tid, NULL);
	out->wall_ns = gt_now_ns() - run.start_ns;
	out->entries = count;
	out->threads = started;
	collect(out, w, started);
	if (!status && sh.status)
		status = gt_error_run(sh.status, err, errlen, "preload");
	for (i = 0; i < (opts->split == GT_SPLIT_STREAMS ? opts->io_streams : 0); i++)
		pthread_mutex_destroy(&streams[i].lock);
done:
	free(streams);
	free(w);
	free((void *)sh.paths);
	if (sh.dirfd >= 0 && sh.dirfd != AT_FDCWD)
		close(sh.dirfd);
	return status;
}
