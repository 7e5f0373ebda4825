/*
 * Read a Git index the way read-cache.c's do_read_index() does: verify the
 * header and checksum, find EOIE/IEOT, decode the entries (one thread, or
 * one per group of IEOT blocks) into in-memory cache entries allocated one
 * malloc() each or from a memory pool, then release them. Every length
 * read from the file is checked against the bytes that are really there.
 */
#include "internal.h"
#include "index_format.h"
#include "mem_pool.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The in-memory entry, shaped like Git's struct cache_entry. */
struct cache_entry {
	uint32_t ctime_sec, ctime_nsec, mtime_sec, mtime_nsec;
	uint32_t dev, ino, mode, uid, gid, size;
	uint32_t flags;
	uint32_t namelen;
	unsigned char oid[GT_MAX_HASH_SZ];
	char name[];
};

struct ieot_block {
	uint32_t offset;
	uint32_t nr;
};

struct index_file {
	const unsigned char *buf;
	size_t len;
	const struct gt_hash_algo *algo;	/* the repository's object format */
	uint32_t version;
	uint32_t entries;
	size_t entries_end;		/* where extensions start, from EOIE */
	struct ieot_block *ieot;	/* NULL when absent or unusable */
	uint32_t ieot_nr;
};

/* One range of entries decoded by one thread. */
struct loader {
	pthread_t tid;
	const struct index_file *ix;
	const struct gt_run *run;
	const struct gt_index_opts *opts;
	struct cache_entry **ce;	/* this loader's slots in the entry array */
	size_t offset;			/* first entry's byte offset */
	size_t limit;			/* entries must end by here */
	uint32_t nr;
	size_t end;			/* offset after the last entry decoded */
	struct gt_mem_pool pool;
	uint64_t malloc_bytes, allocations, name_bytes;
	int status;
	char err[256];
};

/* Git's varint.c decode_varint(), bounded by `end`. */
static int decode_varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
	const unsigned char *b = *p;
	unsigned char c;
	uint64_t val;

	if (b >= end)
		return -1;
	c = *b++;
	val = c & 127;
	while (c & 128) {
		val += 1;
		if (!val || (val >> 57))
			return -1;
		if (b >= end)
			return -1;
		c = *b++;
		val = (val << 7) + (c & 127);
	}
	*p = b;
	*out = val;
	return 0;
}

static struct cache_entry *alloc_ce(struct loader *l, size_t namelen)
{
	size_t sz = sizeof(struct cache_entry) + namelen + 1;

	if (l->opts->alloc == GT_ALLOC_POOL)
		return gt_mem_pool_alloc(&l->pool, sz);
	l->allocations++;
	l->malloc_bytes += sz;
	return malloc(sz);
}

static int corrupt(struct loader *l, const char *fmt, uint32_t i, uint64_t a)
{
	l->status = gt_error(GT_ECORRUPT, l->err, sizeof(l->err), fmt, i, (unsigned long long)a);
	return -1;
}

/* Decode entry `i` at *pos into a new cache entry; prev is the one before it. */
/*
 * The entry's flags word, and the second one where the first says so:
 * the size of the fixed part before the path goes into *fixed.
 */
static int read_flags(struct loader *l, uint32_t i, const unsigned char *p,
		      const unsigned char *end, size_t *fixed, uint32_t *flags)
{
	const size_t rawsz = l->ix->algo->rawsz, base = gt_ondisk_fixed(rawsz);

	*fixed = base;
	if ((size_t)(end - p) < base)
		return corrupt(l, "entry %u is truncated (%llu bytes left)", i, (uint64_t)(end - p));
	*flags = gt_get_be16(p + 40 + rawsz);
	if (!(*flags & GT_CE_EXTENDED))
		return 0;
	/*
	 * Git reads the second flags word whatever the version says and
	 * refuses only bits it does not know ("unknown index entry format").
	 */
	*fixed += 2;
	if ((size_t)(end - p) < *fixed)
		return corrupt(l, "entry %u is truncated (%llu bytes left)", i, (uint64_t)(end - p));
	if (((uint32_t)gt_get_be16(p + base) << 16) & ~GT_CE_EXTENDED_FLAGS)
		return corrupt(l, "entry %u has an unknown index entry format 0x%08x", i,
			       (uint32_t)gt_get_be16(p + base) << 16);
	*flags |= (uint32_t)gt_get_be16(p + base) << 16;
	return 0;
}

/*
 * Where the entry's own path bytes start (*name, after a v4 prefix length)
 * and how many there are (*len), and how many it shares with the previous
 * entry's path (*copy_len, v4 only).
 */
static int read_path(struct loader *l, uint32_t i, size_t pos, const unsigned char **name,
		     const unsigned char *end, uint32_t flags, const struct cache_entry *prev,
		     size_t *len, size_t *copy_len)
{
	const unsigned char *nul;
	uint64_t strip = 0;

	*copy_len = 0;
	if (l->ix->version == 4) {
		if (decode_varint(name, end, &strip))
			return corrupt(l, "entry %u has a bad path prefix length at offset %llu", i,
				       (uint64_t)pos);
		/* The first entry of an IEOT block ignores its strip, as Git does. */
		if (prev) {
			if (strip > prev->namelen)
				return corrupt(l, "entry %u strips %llu bytes from a shorter previous path",
					       i, strip);
			*copy_len = prev->namelen - (size_t)strip;
		}
	}
	/*
	 * The path's length is the one in the flags, as create_from_disk()
	 * takes it; only a length too long for the flags (CE_NAMEMASK) is
	 * found with strlen(). Git does not look at the byte after the path
	 * nor at the padding, so neither do we; unlike Git, every length is
	 * checked against the end of the entries.
	 */
	*len = flags & GT_CE_NAMEMASK;
	if (*len == GT_CE_NAMEMASK) {
		nul = memchr(*name, '\0', (size_t)(end - *name));
		if (!nul)
			return corrupt(l, "entry %u: path runs past the end of the entries (%llu bytes)",
				       i, (uint64_t)(end - *name));
		*len = (size_t)(nul - *name);
	} else if (l->ix->version == 4) {
		if (*len < *copy_len)
			return corrupt(l, "entry %u: path length %llu is shorter than its shared prefix",
				       i, (uint64_t)*len);
		*len -= *copy_len;	/* the flags hold the whole path's length */
	}
	if (*len >= (size_t)(end - *name))
		return corrupt(l, "entry %u: path runs past the end of the entries (%llu bytes)",
			       i, (uint64_t)(end - *name));
	return 0;
}

static void copy_stat(struct cache_entry *ce, const unsigned char *p, size_t rawsz)
{
	ce->ctime_sec = gt_get_be32(p);
	ce->ctime_nsec = gt_get_be32(p + 4);
	ce->mtime_sec = gt_get_be32(p + 8);
	ce->mtime_nsec = gt_get_be32(p + 12);
	ce->dev = gt_get_be32(p + 16);
	ce->ino = gt_get_be32(p + 20);
	ce->mode = gt_get_be32(p + 24);
	ce->uid = gt_get_be32(p + 28);
	ce->gid = gt_get_be32(p + 32);
	ce->size = gt_get_be32(p + 36);
	memcpy(ce->oid, p + 40, rawsz);
}

static int create_from_disk(struct loader *l, uint32_t i, size_t *pos,
			    const struct cache_entry *prev, struct cache_entry **out)
{
	const struct index_file *ix = l->ix;
	const unsigned char *p = ix->buf + *pos, *end = ix->buf + l->limit;
	const unsigned char *name;
	size_t fixed, len, copy_len, ondisk;
	uint32_t flags;
	struct cache_entry *ce;

	if (read_flags(l, i, p, end, &fixed, &flags))
		return -1;
	name = p + fixed;
	if (read_path(l, i, *pos, &name, end, flags, prev, &len, &copy_len))
		return -1;
	ondisk = ix->version == 4 ? (size_t)(name + len + 1 - p) : gt_ondisk_ce_size(fixed, len);
	if (ondisk > (size_t)(end - p))
		return corrupt(l, "entry %u: padding runs past the end (%llu bytes)", i, ondisk);

	ce = alloc_ce(l, copy_len + len);
	if (!ce) {
		l->status = gt_error(GT_ENOMEM, l->err, sizeof(l->err),
				     "out of memory at entry %u", i);
		return -1;
	}
	copy_stat(ce, p, ix->algo->rawsz);
	ce->flags = flags;
	ce->namelen = (uint32_t)(copy_len + len);
	if (copy_len)
		memcpy(ce->name, prev->name, copy_len);
	memcpy(ce->name + copy_len, name, len);
	ce->name[copy_len + len] = '\0';
	l->name_bytes += ce->namelen;
	*pos += ondisk;
	*out = ce;
	return 0;
}

static void *load_entries(void *arg)
{
	struct loader *l = arg;
	const struct cache_entry *prev = NULL;
	size_t pos = l->offset;
	uint32_t i;

	for (i = 0; i < l->nr; i++) {
		if (!(i % 1024) && (l->status = gt_run_check(l->run))) {
			gt_error_run(l->status, l->err, sizeof(l->err), "index load");
			break;
		}
		if (create_from_disk(l, i, &pos, prev, &l->ce[i]))
			break;
		prev = l->ce[i];
	}
	l->end = pos;
	return NULL;
}

#define CE_SKIP_WORKTREE (0x4000u << 16)
#define S_IFGITLINK 0160000

static size_t dir_len(const struct cache_entry *ce)
{
	const char *slash = memrchr(ce->name, '/', ce->namelen);

	return slash ? (size_t)(slash - ce->name) : 0;
}

/*
 * Describe the tree: entries are sorted, so everything below a directory
 * is contiguous and a directory is new exactly when it is not shared with
 * the previous entry's directory, component by component.
 */
static void summarise(struct cache_entry *const *ce, uint32_t n, struct gt_index_result *out)
{
	const char *prev = "";
	size_t prev_len = 0, len, k, j;
	uint32_t i, depth;
	int b;

	for (i = 0; i < n; i++) {
		const char *name = ce[i]->name;

		len = dir_len(ce[i]);
		for (k = 0; k < len && k < prev_len && name[k] == prev[k]; k++)
			;
		for (j = k; j > 0; j--)
			if ((j == len || name[j] == '/') && (j == prev_len || prev[j] == '/'))
				break;
		/* Components of this directory past the shared ones are new. */
		if (j < len)
			out->dirs += (j == 0);
		for (k = j; k < len; k++)
			out->dirs += name[k] == '/';
		for (depth = 0, k = 0; k < ce[i]->namelen; k++)
			depth += name[k] == '/';
		if (depth > out->max_depth)
			out->max_depth = depth;
		b = ce[i]->size ? 64 - __builtin_clzll(ce[i]->size) : 0;
		out->size_hist[b < GT_SIZE_BUCKETS ? b : GT_SIZE_BUCKETS - 1]++;
		if ((ce[i]->mode & S_IFMT) == S_IFLNK)
			out->symlinks++;
		else if ((ce[i]->mode & S_IFMT) == S_IFGITLINK)
			out->gitlinks++;
		if (ce[i]->flags & CE_SKIP_WORKTREE)
			out->skip_worktree++;
		prev = name;
		prev_len = len;
	}
}

static int check_header(struct index_file *ix, char *err, size_t errlen)
{
	const size_t rawsz = ix->algo->rawsz;
	uint32_t most;

	if (ix->len < GT_INDEX_HEADER + rawsz)
		return gt_error(GT_ECORRUPT, err, errlen,
				"index is too short (%zu bytes)", ix->len);
	if (memcmp(ix->buf, "DIRC", 4))
		return gt_error(GT_ECORRUPT, err, errlen, "bad index signature");
	ix->version = gt_get_be32(ix->buf + 4);
	if (ix->version < 2 || ix->version > 4)
		return gt_error(GT_ECORRUPT, err, errlen,
				"bad index version %u", ix->version);
	ix->entries = gt_get_be32(ix->buf + 8);
	most = (uint32_t)((ix->len - GT_INDEX_HEADER - rawsz) / GT_MIN_ENTRY);
	if (ix->entries > most)
		return gt_error(GT_ECORRUPT, err, errlen,
				"index claims %u entries but its %zu bytes hold at most %u",
				ix->entries, ix->len, most);
	return GT_OK;
}

static int verify_checksum(const struct index_file *ix, int *skip_hash,
			   char *err, size_t errlen)
{
	static const unsigned char zero[GT_MAX_HASH_SZ];
	const size_t rawsz = ix->algo->rawsz;
	const unsigned char *trailer = ix->buf + ix->len - rawsz;
	unsigned char sum[GT_MAX_HASH_SZ];
	union gt_hash_ctx c;

	*skip_hash = !memcmp(trailer, zero, rawsz);
	if (*skip_hash)
		return GT_OK;
	ix->algo->init(&c);
	ix->algo->update(&c, ix->buf, ix->len - rawsz);
	ix->algo->final(&c, sum);
	if (memcmp(sum, trailer, rawsz))
		return gt_error(GT_ECORRUPT, err, errlen, "index checksum mismatch");
	return GT_OK;
}

/*
 * Find EOIE in the last extension slot and, through it, IEOT, as
 * read_eoie_extension() and read_ieot_extension() do. Anything that does
 * not check out is ignored, leaving a sequential load.
 */
static void find_offset_tables(struct index_file *ix, struct gt_index_result *out)
{
	const size_t rawsz = ix->algo->rawsz, eoie_size = 4 + rawsz;
	const unsigned char *eoie;
	size_t at, off, end, ext_sz;
	unsigned char sum[GT_MAX_HASH_SZ];
	union gt_hash_ctx c;
	uint64_t total = 0;
	uint32_t k;

	if (ix->len < GT_INDEX_HEADER + GT_EXT_HEADER + eoie_size + rawsz)
		return;
	at = ix->len - rawsz - GT_EXT_HEADER - eoie_size;
	eoie = ix->buf + at;
	if (memcmp(eoie, "EOIE", 4) || gt_get_be32(eoie + 4) != eoie_size)
		return;
	off = gt_get_be32(eoie + 8);
	if (off < GT_INDEX_HEADER || off > at)
		return;
	ix->algo->init(&c);
	for (end = off; end < at; end += GT_EXT_HEADER + ext_sz) {
		if (at - end < GT_EXT_HEADER)
			goto drop;
		ext_sz = gt_get_be32(ix->buf + end + 4);
		if (ext_sz > at - end - GT_EXT_HEADER)
			goto drop;
		ix->algo->update(&c, ix->buf + end, GT_EXT_HEADER);
		if (!memcmp(ix->buf + end, "IEOT", 4) && ext_sz >= 4 &&
		    !((ext_sz - 4) % 8) && gt_get_be32(ix->buf + end + 8) == 1) {
			free(ix->ieot);
			ix->ieot_nr = (uint32_t)((ext_sz - 4) / 8);
			ix->ieot = calloc(ix->ieot_nr ? ix->ieot_nr : 1, sizeof(*ix->ieot));
			if (!ix->ieot)
				goto drop;
			for (k = 0; k < ix->ieot_nr; k++) {
				ix->ieot[k].offset = gt_get_be32(ix->buf + end + 12 + 8 * k);
				ix->ieot[k].nr = gt_get_be32(ix->buf + end + 16 + 8 * k);
			}
		}
	}
	ix->algo->final(&c, sum);
	if (end != at || memcmp(sum, eoie + 12, rawsz))
		goto drop;
	out->has_eoie = 1;
	ix->entries_end = off;
	/* IEOT blocks must tile the entries in order. */
	for (k = 0; ix->ieot && k < ix->ieot_nr; k++) {
		if (ix->ieot[k].offset < (k ? ix->ieot[k - 1].offset + GT_MIN_ENTRY : GT_INDEX_HEADER) ||
		    ix->ieot[k].offset >= off || (k == 0 && ix->ieot[k].offset != GT_INDEX_HEADER))
			break;
		total += ix->ieot[k].nr;
	}
	if (ix->ieot && (k != ix->ieot_nr || total != ix->entries))
		goto drop;
	if (ix->ieot) {
		out->has_ieot = 1;
		out->ieot_blocks = (int)ix->ieot_nr;
	}
	return;
drop:
	free(ix->ieot);
	ix->ieot = NULL;
	ix->ieot_nr = 0;
}

/*
 * Git skips an extension it does not know only when its name starts with
 * 'A'..'Z' (optional); any other unknown one is required and the index is
 * refused (read_index_extension() in read-cache.c). "link" (split index)
 * and "sdir" (sparse directories) are the required ones Git knows.
 */
static int extension_understood(const unsigned char *sig)
{
	return (sig[0] >= 'A' && sig[0] <= 'Z') ||
	       !memcmp(sig, "link", 4) || !memcmp(sig, "sdir", 4);
}

/* Walk the extensions from `pos` to the trailer, recording their names. */
static int walk_extensions(const struct index_file *ix, size_t pos,
			   struct gt_index_result *out, char *err, size_t errlen)
{
	size_t stop = ix->len - ix->algo->rawsz, sz;

	while (pos < stop) {
		if (stop - pos < GT_EXT_HEADER)
			return gt_error(GT_ECORRUPT, err, errlen,
					"extension header at offset %zu is truncated", pos);
		sz = gt_get_be32(ix->buf + pos + 4);
		if (sz > stop - pos - GT_EXT_HEADER)
			return gt_error(GT_ECORRUPT, err, errlen,
					"extension '%.4s' at offset %zu runs past the end",
					(const char *)ix->buf + pos, pos);
		if (!extension_understood(ix->buf + pos))
			return gt_error(GT_ECORRUPT, err, errlen,
					"index uses the '%.4s' extension, which git does not understand",
					(const char *)ix->buf + pos);
		if (out->extensions < 16)
			memcpy(out->ext_sig[out->extensions], ix->buf + pos, 4);
		out->extensions++;
		pos += GT_EXT_HEADER + sz;
	}
	return GT_OK;
}

/* Split the IEOT blocks into `nr` consecutive groups, one per loader. */
static void plan_loaders(const struct index_file *ix, struct loader *l, int nr,
			 uint32_t per, struct cache_entry **ce)
{
	uint32_t b = 0, k;
	size_t first = 0;
	int t;

	for (t = 0; t < nr; t++) {
		l[t].offset = ix->ieot[b].offset;
		l[t].ce = ce + first;
		l[t].nr = 0;
		for (k = 0; k < per && b < ix->ieot_nr; k++, b++)
			l[t].nr += ix->ieot[b].nr;
		l[t].limit = b < ix->ieot_nr ? ix->ieot[b].offset : ix->entries_end;
		first += l[t].nr;
	}
}

static int load_all(struct index_file *ix, const struct gt_index_opts *opts,
		    const struct gt_run *run, struct cache_entry **ce,
		    struct gt_index_result *out, struct gt_mem_pool *pool,
		    char *err, size_t errlen)
{
	struct loader *l;
	int nr = 1, t, started = 0, status = GT_OK;
	uint32_t per = 0;
	size_t ext_start;

	/* Consecutive groups of `per` blocks; the last group may be short. */
	if (opts->threads > 1 && ix->ieot && ix->ieot_nr > 1) {
		nr = opts->threads < (int)ix->ieot_nr ? opts->threads : (int)ix->ieot_nr;
		per = DIV_ROUND_UP(ix->ieot_nr, (uint32_t)nr);
		nr = (int)DIV_ROUND_UP(ix->ieot_nr, per);
	}
	l = calloc((size_t)nr, sizeof(*l));
	if (!l)
		return gt_error(GT_ENOMEM, err, errlen, "out of memory for loaders");
	for (t = 0; t < nr; t++) {
		l[t].ix = ix;
		l[t].run = run;
		l[t].opts = opts;
		gt_mem_pool_init(&l[t].pool, (size_t)opts->pool_block);
	}
	if (nr == 1) {
		l[0].offset = GT_INDEX_HEADER;
		l[0].limit = ix->entries_end;
		l[0].nr = ix->entries;
		l[0].ce = ce;
		load_entries(&l[0]);
		started = 1;
	} else {
		plan_loaders(ix, l, nr, per, ce);
		for (t = 0; t < nr; t++, started++)
			if (pthread_create(&l[t].tid, NULL, load_entries, &l[t])) {
				status = gt_error(GT_ESYS, err, errlen, "unable to create loader thread");
				break;
			}
		for (t = 0; t < started; t++)
			pthread_join(l[t].tid, NULL);
	}
	out->threads_used = started;
	for (t = 0; t < nr; t++) {
		if (!status && l[t].status) {
			status = l[t].status;
			gt_error(status, err, errlen, "%s", l[t].err);
		}
		out->allocations += l[t].allocations;
		out->peak_bytes += l[t].malloc_bytes;
		out->name_bytes += l[t].name_bytes;
		gt_mem_pool_combine(pool, &l[t].pool);
	}
	out->peak_bytes += pool->pool_bytes;
	out->allocations += pool->blocks;
	ext_start = nr == 1 ? l[0].end : ix->entries_end;
	free(l);
	if (!status)
		status = walk_extensions(ix, ext_start, out, err, errlen);
	return status;
}

/* Something done with the entries while they are loaded (before they are released). */
struct visit {
	int (*fn)(struct cache_entry *const *ce, uint32_t n, struct gt_run *run, void *data,
		  char *err, size_t errlen);
	void *data;
};

static int parse(const unsigned char *buf, size_t len, const struct gt_index_opts *opts,
		 struct gt_ctl *ctl, struct gt_index_result *out, const struct visit *visit,
		 char *err, size_t errlen);

int gt_index_parse(const unsigned char *buf, size_t len,
		   const struct gt_index_opts *opts, struct gt_ctl *ctl,
		   struct gt_index_result *out, char *err, size_t errlen)
{
	return parse(buf, len, opts, ctl, out, NULL, err, errlen);
}

static int parse(const unsigned char *buf, size_t len, const struct gt_index_opts *opts,
		 struct gt_ctl *ctl, struct gt_index_result *out, const struct visit *visit,
		 char *err, size_t errlen)
{
	struct index_file ix = { .buf = buf, .len = len };
	struct gt_mem_pool pool;
	struct cache_entry **ce = NULL;
	struct gt_run run;
	uint64_t t0, need;
	uint32_t i;
	int status;

	if (!opts || !out || (!buf && len))
		return gt_error(GT_EINVAL, err, errlen, "buf, opts and out are required");
	memset(out, 0, sizeof(*out));
	if (opts->alloc != GT_ALLOC_MALLOC && opts->alloc != GT_ALLOC_POOL)
		return gt_error(GT_EINVAL, err, errlen, "unknown allocator %d", opts->alloc);
	ix.algo = gt_hash_algo_by_id(opts->hash_algo);
	if (!ix.algo)
		return gt_error(GT_EINVAL, err, errlen, "unknown object format %d", opts->hash_algo);
	gt_run_start(&run, ctl);
	out->file_bytes = len;
	if ((status = check_header(&ix, err, errlen)))
		return status;
	out->version = ix.version;
	out->entries = ix.entries;
	need = (uint64_t)ix.entries * (sizeof(struct cache_entry) + sizeof(*ce) + 64);
	if (gt_run_budget(&run, need))
		return gt_error(GT_EBUDGET, err, errlen,
				"loading %u entries needs about %llu bytes, over the budget",
				ix.entries, (unsigned long long)need);

	t0 = gt_now_ns();
	if (opts->verify_checksum &&
	    (status = verify_checksum(&ix, &out->skip_hash, err, errlen)))
		return status;
	out->checksum_ns = gt_now_ns() - t0;
	ix.entries_end = len - ix.algo->rawsz;
	find_offset_tables(&ix, out);

	ce = calloc(ix.entries ? ix.entries : 1, sizeof(*ce));
	if (!ce) {
		free(ix.ieot);
		return gt_error(GT_ENOMEM, err, errlen, "out of memory for %u entries", ix.entries);
	}
	gt_mem_pool_init(&pool, (size_t)opts->pool_block);
	t0 = gt_now_ns();
	status = load_all(&ix, opts, &run, ce, out, &pool, err, errlen);
	out->parse_ns = gt_now_ns() - t0;
	out->peak_bytes += (uint64_t)ix.entries * sizeof(*ce);
	if (!status)
		summarise(ce, ix.entries, out);
	if (!status && visit)
		status = visit->fn(ce, ix.entries, &run, visit->data, err, errlen);

	t0 = gt_now_ns();
	if (opts->alloc == GT_ALLOC_MALLOC)
		for (i = 0; i < ix.entries; i++)
			free(ce[i]);
	gt_mem_pool_discard(&pool);
	free(ce);
	out->free_ns = gt_now_ns() - t0;
	free(ix.ieot);
	return status;
}

static int read_file(const char *path, const struct gt_run *run, unsigned char **buf,
		     size_t *len, char *err, size_t errlen)
{
	struct stat st;
	size_t got = 0;
	ssize_t n;
	int fd, status;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gt_error_errno(errno, err, errlen, "unable to open '%s'", path);
	if (fstat(fd, &st)) {
		status = gt_error_errno(errno, err, errlen, "unable to stat '%s'", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		status = gt_error(GT_EINVAL, err, errlen, "'%s' is not a regular file", path);
		goto out;
	}
	if ((status = gt_run_budget(run, (uint64_t)st.st_size))) {
		status = gt_error(status, err, errlen, "'%s' is larger than the byte budget", path);
		goto out;
	}
	*buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!*buf) {
		status = gt_error(GT_ENOMEM, err, errlen, "out of memory reading '%s'", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		n = read(fd, *buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			status = n ? gt_error_errno(errno, err, errlen, "unable to read '%s'", path)
				   : gt_error(GT_ECORRUPT, err, errlen, "'%s' shrank while read", path);
			free(*buf);
			*buf = NULL;
			goto out;
		}
		got += (size_t)n;
	}
	*len = got;
	status = GT_OK;
out:
	close(fd);
	return status;
}

int gt_index_read(const char *path, const struct gt_index_opts *opts,
		  struct gt_ctl *ctl, struct gt_index_result *out,
		  char *err, size_t errlen)
{
	unsigned char *buf = NULL;
	size_t len = 0;
	struct gt_run run;
	uint64_t t0;
	int status;

	if (!path || !opts || !out)
		return gt_error(GT_EINVAL, err, errlen, "path, opts and out are required");
	memset(out, 0, sizeof(*out));
	gt_run_start(&run, ctl);
	t0 = gt_now_ns();
	if ((status = read_file(path, &run, &buf, &len, err, errlen)))
		return status;
	t0 = gt_now_ns() - t0;
	status = gt_index_parse(buf, len, opts, ctl, out, err, errlen);
	out->read_ns = t0;
	free(buf);
	return status;
}

struct stat_sample {
	int dirfd;
	uint32_t sample;
	struct gt_stat_check *out;
};

/* One entry against lstat, as match_stat_data() compares them (all fields counted). */
static void compare_stat(const struct cache_entry *ce, const struct stat *st,
			 struct gt_stat_check *out)
{
	int changed = 0;

	if (ce->mtime_sec != (uint32_t)st->st_mtim.tv_sec)
		out->mtime_sec++, changed = 1;
	if (ce->mtime_nsec != (uint32_t)st->st_mtim.tv_nsec)
		out->mtime_nsec++;
	if (ce->ctime_sec != (uint32_t)st->st_ctim.tv_sec)
		out->ctime_sec++, changed = 1;
	if (ce->ctime_nsec != (uint32_t)st->st_ctim.tv_nsec)
		out->ctime_nsec++;
	if (ce->ino != (uint32_t)st->st_ino)
		out->ino++, changed = 1;
	if (ce->dev != (uint32_t)st->st_dev)
		out->dev++;
	if (ce->uid != (uint32_t)st->st_uid || ce->gid != (uint32_t)st->st_gid)
		out->owner++, changed = 1;
	if (ce->size != (uint32_t)st->st_size)
		out->size++, changed = 1;
	out->changed += changed;
}

static int sample_stat(struct cache_entry *const *ce, uint32_t n, struct gt_run *run,
		       void *data, char *err, size_t errlen)
{
	struct stat_sample *s = data;
	uint32_t step = s->sample && n > s->sample ? n / s->sample : 1, i;
	struct stat st;
	int status;

	for (i = 0; i < n && s->out->sampled + s->out->missing < s->sample; i += step) {
		uint32_t type = ce[i]->mode & S_IFMT;

		if ((type != S_IFREG && type != S_IFLNK) || (ce[i]->flags & CE_SKIP_WORKTREE))
			continue;
		if ((status = gt_run_check(run)))
			return gt_error_run(status, err, errlen, "stat check");
		/* Only what git itself would look at: the entry's own path, no link followed. */
		if (fstatat(s->dirfd, ce[i]->name, &st, AT_SYMLINK_NOFOLLOW) ||
		    (st.st_mode & S_IFMT) != type) {
			s->out->missing++;
			continue;
		}
		s->out->sampled++;
		compare_stat(ce[i], &st, s->out);
	}
	return GT_OK;
}

int gt_index_stat_check(const char *path, const char *base, const struct gt_index_opts *opts,
			uint32_t sample, struct gt_ctl *ctl, struct gt_stat_check *out,
			char *err, size_t errlen)
{
	struct gt_index_result result;
	struct stat_sample s = { .sample = sample, .out = out };
	struct visit visit = { sample_stat, &s };
	unsigned char *buf = NULL;
	struct gt_run run;
	size_t len = 0;
	int status;

	if (!path || !base || !opts || !out)
		return gt_error(GT_EINVAL, err, errlen, "path, base, opts and out are required");
	memset(out, 0, sizeof(*out));
	s.dirfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.dirfd < 0)
		return gt_error_errno(errno, err, errlen, "unable to open '%s'", base);
	gt_run_start(&run, ctl);
	status = read_file(path, &run, &buf, &len, err, errlen);
	if (!status)
		status = parse(buf, len, opts, ctl, &result, &visit, err, errlen);
	free(buf);
	close(s.dirfd);
	return status;
}
