#ifndef GITTUNE_H
#define GITTUNE_H

/*
 * git-tune engine: Git's file-system hot paths, reproduced so they can be
 * measured on this host without running Git thousands of times.
 *
 * Conventions shared by every call:
 *
 *  - A call returns GT_OK (0) or a negative `enum gt_status`, and on error
 *    writes one lower-case sentence into `err` (at most `errlen` bytes,
 *    always NUL-terminated when errlen > 0).
 *  - Nothing here calls exit() or abort(), and there is no global mutable
 *    state: everything a call needs comes through its arguments.
 *  - Every long call takes a `struct gt_ctl`, owned by the caller, that
 *    bounds it (deadline, byte budget) and lets another thread cancel it
 *    with gt_ctl_cancel(). A cancelled or timed-out call stops within a
 *    few milliseconds, cleans up what it created, fills the result with
 *    what it measured so far and returns GT_ECANCELED or GT_ETIMEDOUT.
 *  - Path lists are passed as one buffer of `count` NUL-terminated strings
 *    laid end to end ("a\0b/c\0"), which keeps pointer arrays out of the
 *    bindings.
 *  - Results are plain structs the caller allocates; gt_sizeof() reports
 *    their sizes so a binding can check the layout it mirrors.
 */

#include <stddef.h>
#include <stdint.h>

/* Bumped whenever a struct layout or a signature below changes. */
#define GT_ABI_VERSION 4

#define GT_MAX_THREADS 64
#define GT_HIST_BUCKETS 128	/* 4 buckets per power of two, 1 ns .. ~8.6 s */
#define GT_ERRNO_SLOTS 160	/* errno values 0..159 counted one by one */
#define GT_SIZE_BUCKETS 34	/* file sizes by power of two, up to 4 GiB */

enum gt_status {
	GT_OK = 0,
	GT_EINVAL = -1,		/* bad argument */
	GT_ESYS = -2,		/* a system call failed; err names it */
	GT_ENOMEM = -3,
	GT_ECORRUPT = -4,	/* input file is not what it claims to be */
	GT_ECANCELED = -5,
	GT_ETIMEDOUT = -6,
	GT_EBUDGET = -7,	/* the work would exceed ctl->byte_budget */
};

/*
 * Bounds and cancellation for one call. Initialise with gt_ctl_init();
 * `timeout_ns` (0 = none) counts from the start of the call that uses it,
 * `byte_budget` (0 = none) caps bytes written to disk or allocated.
 */
struct gt_ctl {
	int cancel;		/* set only through gt_ctl_cancel() */
	int reserved;
	uint64_t timeout_ns;
	uint64_t byte_budget;
};

void gt_ctl_init(struct gt_ctl *ctl, uint64_t timeout_ns, uint64_t byte_budget);
/* Safe to call from any thread while a call using `ctl` runs. */
void gt_ctl_cancel(struct gt_ctl *ctl);

/* Latency histogram: bucket b holds samples in [gt_hist_lower(b), gt_hist_lower(b+1)). */
struct gt_hist {
	uint64_t count;
	uint64_t min_ns;
	uint64_t max_ns;
	uint64_t sum_ns;
	uint64_t bucket[GT_HIST_BUCKETS];
};
uint64_t gt_hist_lower(int bucket);

/* Start and end of one worker, in ns since the call started. */
struct gt_thread_stat {
	uint64_t start_ns;
	uint64_t end_ns;
	uint64_t ops;
	uint64_t errors;
	uint64_t bytes;
};

/* ---- 1. preload: lstat() a list of paths, as preload-index.c does ---- */

enum gt_split {
	/* preload-index.c: contiguous DIV_ROUND_UP slices, one per thread. */
	GT_SPLIT_SLICES = 0,
	/*
	 * Seed 000's "parallel IO": `io_streams` cursors walk the list in
	 * order, each owning a contiguous region; threads take batches of
	 * `batch` entries from their stream's cursor. One stream is the
	 * "optimize for sequential IO" patch.
	 */
	GT_SPLIT_STREAMS = 1,
};

struct gt_preload_opts {
	int threads;		/* 1..GT_MAX_THREADS */
	int split;		/* enum gt_split */
	int io_streams;		/* GT_SPLIT_STREAMS: 1..threads */
	int batch;		/* GT_SPLIT_STREAMS: entries per grab, >= 1 */
	int record_latency;	/* fill `latency` (two clock reads per lstat) */
	int reserved;
};

struct gt_preload_result {
	uint64_t wall_ns;
	uint64_t entries;
	uint64_t done;		/* lstat calls made */
	uint64_t errors;
	int threads;
	int reserved;
	struct gt_thread_stat thread[GT_MAX_THREADS];
	uint64_t errno_count[GT_ERRNO_SLOTS];
	struct gt_hist latency;
};

/*
 * lstat() each of `count` paths (relative ones resolve against `base`, or
 * the working directory when `base` is NULL). A path that fails lstat is
 * counted by errno, not an error of the call.
 */
int gt_preload_run(const char *base, const char *paths, size_t count,
		   const struct gt_preload_opts *opts, struct gt_ctl *ctl,
		   struct gt_preload_result *out, char *err, size_t errlen);

/* ---- 2. checkout: write files as parallel-checkout.c's workers do ---- */

struct gt_checkout_opts {
	int workers;		/* 1..GT_MAX_THREADS (threads; Git uses processes) */
	int threshold;		/* fewer files than this: write sequentially */
	int fsync;		/* fsync() each file before close() */
	int keep;		/* enum gt_checkout_keep: what is left in place */
};

enum gt_checkout_keep {
	GT_CHECKOUT_REMOVE = 0,		/* remove the files and the directories made */
	GT_CHECKOUT_KEEP = 1,		/* leave both */
	GT_CHECKOUT_KEEP_DIRS = 2,	/* remove the files, leave the directories */
};

struct gt_checkout_result {
	uint64_t wall_ns;	/* the workers writing the files, only */
	uint64_t remove_ns;	/* removing what was written */
	uint64_t dirs_ns;	/* making the leading directories, before wall_ns */
	uint64_t files;
	uint64_t bytes;
	uint64_t dirs_created;
	int workers_used;	/* 1 when the threshold kept it sequential */
	int reserved;
	struct gt_thread_stat worker[GT_MAX_THREADS];
};

/*
 * Create `count` files named by `paths` (relative, no "..") below the
 * existing directory `dir`, `sizes[i]` bytes each: first every leading
 * directory on the calling thread (as Git's main process makes them), then
 * open(O_WRONLY|O_CREAT|O_EXCL), write, optional fsync, close. Files are
 * split among workers in contiguous batches like run_parallel_checkout().
 * What was created is removed again as opts->keep says, and all of it on
 * error. GT_CHECKOUT_KEEP_DIRS lets repeated runs on the same paths skip
 * making the directories: each leading directory that exists costs one
 * mkdir (EEXIST) and is never removed by a later run.
 */
int gt_checkout_run(const char *dir, const char *paths, const uint64_t *sizes,
		    size_t count, const struct gt_checkout_opts *opts,
		    struct gt_ctl *ctl, struct gt_checkout_result *out,
		    char *err, size_t errlen);

/* ---- 3. index: read and write Git index files ---- */

enum gt_alloc {
	GT_ALLOC_MALLOC = 0,	/* one malloc() per entry, as before Git 2.19 */
	GT_ALLOC_POOL = 1,	/* a mem-pool.c style pool (seed 003) */
};

struct gt_index_opts {
	int threads;		/* >1 uses the IEOT table when the file has one */
	int alloc;		/* enum gt_alloc */
	uint64_t pool_block;	/* GT_ALLOC_POOL: block size, 0 = 1 MiB like Git */
	int verify_checksum;	/* check the trailing hash (skipped if all zero) */
	int hash_algo;		/* enum gt_hash_id: the repository's object format */
};

/* Object formats (`git rev-parse --show-object-format`); 0 is Git's default. */
enum gt_hash_id {
	GT_HASH_SHA1 = 0,
	GT_HASH_SHA256 = 1,
};

struct gt_index_result {
	uint32_t version;
	uint32_t entries;
	uint64_t file_bytes;
	uint64_t read_ns;	/* reading the file into memory */
	uint64_t checksum_ns;
	uint64_t parse_ns;	/* decoding entries, allocation included */
	uint64_t free_ns;	/* releasing the entries */
	uint64_t peak_bytes;	/* memory held for entries at the peak */
	uint64_t allocations;	/* malloc() calls made for entries */
	uint64_t name_bytes;	/* sum of path lengths */
	int threads_used;
	int has_eoie;
	int has_ieot;
	int ieot_blocks;
	int extensions;		/* number of extensions seen */
	int skip_hash;		/* trailer was all zero */
	char ext_sig[16][4];	/* first 16 extension signatures */
	/* The tree the index describes (sequentially loaded entries only). */
	uint32_t dirs;		/* distinct leading directories */
	uint32_t max_depth;	/* most '/' in one path */
	uint64_t size_hist[GT_SIZE_BUCKETS];	/* [0]: empty; [k]: 2^(k-1) <= size < 2^k */
	uint64_t gitlinks;	/* submodule entries */
	uint64_t symlinks;
	uint64_t skip_worktree;	/* sparse-checkout entries */
};

/*
 * Parse the index file at `path` (in the object format opts->hash_algo says),
 * materialise every entry and release them again, timing each phase. Corrupt input returns
 * GT_ECORRUPT with the reason; nothing is leaked on any path.
 */
int gt_index_read(const char *path, const struct gt_index_opts *opts,
		  struct gt_ctl *ctl, struct gt_index_result *out,
		  char *err, size_t errlen);

/*
 * Same, from a buffer already in memory (fuzzing, tests). `buf` is not
 * modified.
 */
int gt_index_parse(const unsigned char *buf, size_t len,
		   const struct gt_index_opts *opts, struct gt_ctl *ctl,
		   struct gt_index_result *out, char *err, size_t errlen);

/*
 * How the stat data an index holds compares with what lstat() says now, field
 * by field as Git's match_stat_data() compares them, over up to `sample`
 * entries spread evenly over the index (regular files and links; gitlinks and
 * skip-worktree entries are not in the work tree). An entry git finds changed
 * is re-read and hashed by every `git status` until the index is written again:
 * where that never happens, or the fields never settle (a mount that renumbers
 * inodes), every command re-reads those files.
 */
struct gt_stat_check {
	uint32_t sampled;	/* entries compared */
	uint32_t missing;	/* no longer in the work tree, or of another type */
	uint32_t mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
	uint32_t ino, dev, owner, size;	/* owner: uid or gid */
	uint32_t changed;	/* entries git's default checks find changed (mtime or
				   ctime seconds, owner, inode, size; not nsec nor dev,
				   which need USE_NSEC / USE_STDEV builds) */
};

int gt_index_stat_check(const char *path, const char *base, const struct gt_index_opts *opts,
			uint32_t sample, struct gt_ctl *ctl, struct gt_stat_check *out,
			char *err, size_t errlen);

struct gt_index_shape {
	uint32_t version;	/* 2, 3 or 4 */
	uint32_t entries;
	int depth;		/* many-files.sh: depth, width, files per dir */
	int width;
	int files;
	int ieot_blocks;	/* >1 writes EOIE and IEOT like index.threads=N */
};

/*
 * Write a synthetic, valid index of `shape->entries` sorted paths shaped
 * like t/perf/repos/many-files.sh (all pointing to the empty blob) to
 * `path`, atomically (temporary file and rename).
 */
int gt_index_write_synthetic(const char *path, const struct gt_index_shape *shape,
			     struct gt_ctl *ctl, char *err, size_t errlen);

/* ---- 4. smallfile: seed 002's many small files ---- */

struct gt_smallfile_opts {
	uint64_t files;
	uint64_t file_size;
	uint32_t per_dir;	/* files per directory, >= 1 */
	int sync;		/* syncfs() after create and after remove */
};

struct gt_smallfile_result {
	uint64_t create_ns;	/* mkdir + create + write + close */
	uint64_t sync_create_ns;
	uint64_t stat_ns;
	uint64_t read_ns;
	uint64_t remove_ns;	/* unlink + rmdir */
	uint64_t sync_remove_ns;
	uint64_t files;
	uint64_t dirs;
	uint64_t bytes;
};

/* Create, stat, read and remove files below the existing directory `dir`. */
int gt_smallfile_run(const char *dir, const struct gt_smallfile_opts *opts,
		     struct gt_ctl *ctl, struct gt_smallfile_result *out,
		     char *err, size_t errlen);

/* ---- 5. latency: the cost of single operations ---- */

enum gt_latency_op {
	GT_LAT_LSTAT_HIT = 0,
	GT_LAT_LSTAT_MISS = 1,	/* negative lookup, seed 004 */
	GT_LAT_READ_4K = 2,	/* open + read 4 KiB + close */
	GT_LAT_CREATE = 3,	/* create + write 4 KiB + close */
	GT_LAT_FSYNC = 4,	/* fsync of a freshly written 4 KiB file */
	/*
	 * pread of 4 KiB at 1 MiB strides from a file written, fsynced and
	 * evicted with posix_fadvise(DONTNEED): a device read, one seek apart.
	 */
	GT_LAT_COLD_READ = 5,
	GT_LAT_NR = 6,
};

struct gt_latency_result {
	struct gt_hist op[GT_LAT_NR];
};

/*
 * Sample each operation `samples` times on files it creates in the
 * existing directory `dir` (and removes again). The slow classes have
 * their own counts: `fsync_samples` fsyncs and `cold_samples` cold reads
 * (a cold_samples MiB file is written for them; 0 skips both writes).
 */
int gt_latency_run(const char *dir, uint32_t samples, uint32_t fsync_samples,
		   uint32_t cold_samples, struct gt_ctl *ctl,
		   struct gt_latency_result *out, char *err, size_t errlen);

/* ---- 6. file-system facts ---- */

struct gt_fs_info {
	uint64_t magic;		/* statfs f_type */
	uint64_t block_size;
	uint64_t blocks;
	uint64_t blocks_free;
	uint64_t flags;		/* statfs f_flags (ST_RDONLY, ...) */
	uint32_t dev_major;	/* st_dev of the path */
	uint32_t dev_minor;
	uint32_t name_max;
	int reserved;
};

/* statfs() and stat() of `path`. */
int gt_fs_info(const char *path, struct gt_fs_info *out, char *err, size_t errlen);

struct gt_residency {
	uint64_t bytes;
	uint64_t pages;
	uint64_t resident;	/* pages in the page cache */
};

/*
 * How much of the regular file `path` is in the page cache (mmap and
 * mincore, so nothing is read or faulted in). Adds to `out`.
 *
 * With `base`, `path` is relative to it and every component is opened
 * beneath it without following a symbolic link, so a tracked path of a
 * hostile repository cannot name a file outside its work tree. Without, a
 * final symbolic link is not followed. Either way only a regular file is
 * looked at, and opening never blocks (a FIFO at a tracked path).
 */
int gt_cache_residency(const char *base, const char *path, struct gt_residency *out,
		       char *err, size_t errlen);

/* ---- layout checks for bindings ---- */

int gt_abi_version(void);
/* sizeof the named public struct ("struct gt_preload_result"), 0 if unknown. */
size_t gt_sizeof(const char *name);
/* Human name of a status code. */
const char *gt_strstatus(int status);

#endif /* GITTUNE_H */
