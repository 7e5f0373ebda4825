/*
 * Write synthetic index files shaped like Git's t/perf/repos/many-files.sh
 * (seed 003 used 100K, 1M and 2M entries made that way), optionally with
 * the EOIE and IEOT extensions that `index.threads` makes Git write.
 */
#include "internal.h"
#include "index_format.h"
#include "sha1.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OUT_BUF (1024 * 1024)

static const unsigned char empty_blob[GT_HASH_SZ] = {
	0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b,
	0x29, 0xae, 0x77, 0x5a, 0xd8, 0xc2, 0xe4, 0x8c, 0x53, 0x91
};

struct out {
	int fd;
	unsigned char *buf;
	size_t used;
	uint64_t offset;
	struct gt_sha1 sha;
	int failed;		/* errno of the first failed write */
};

static void out_flush(struct out *o)
{
	size_t done = 0;
	ssize_t n;

	while (!o->failed && done < o->used) {
		n = write(o->fd, o->buf + done, o->used - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			o->failed = errno;
		else
			done += (size_t)n;
	}
	o->used = 0;
}

static void out_put(struct out *o, const void *data, size_t len)
{
	const unsigned char *p = data;

	gt_sha1_update(&o->sha, data, len);
	o->offset += len;
	while (len) {
		size_t n = OUT_BUF - o->used < len ? OUT_BUF - o->used : len;
		memcpy(o->buf + o->used, p, n);
		o->used += n;
		p += n;
		len -= n;
		if (o->used == OUT_BUF)
			out_flush(o);
	}
}

static void out_be32(struct out *o, uint32_t v)
{
	unsigned char b[4];

	gt_put_be32(b, v);
	out_put(o, b, 4);
}

/* Git's varint.c encode_varint(). */
static size_t encode_varint(uint64_t value, unsigned char *buf)
{
	unsigned char varint[16];
	unsigned pos = sizeof(varint) - 1;

	varint[pos] = value & 127;
	while (value >>= 7)
		varint[--pos] = 128 | (--value & 127);
	memcpy(buf, varint + pos, sizeof(varint) - pos);
	return sizeof(varint) - pos;
}

struct paths {
	char **v;
	size_t nr, want;
};

/* Every directory holds `files` files; directories nest `depth` deep, `width` wide. */
static int gen_dir(struct paths *p, const struct gt_index_shape *s, const char *prefix, int depth)
{
	char buf[1024];
	int i;

	for (i = 0; i < s->files && p->nr < p->want; i++) {
		snprintf(buf, sizeof(buf), "%sfile%d", prefix, i);
		if (!(p->v[p->nr++] = strdup(buf)))
			return -1;
	}
	for (i = 0; depth > 0 && i < s->width && p->nr < p->want; i++) {
		snprintf(buf, sizeof(buf), "%sdir%d/", prefix, i);
		if (gen_dir(p, s, buf, depth - 1))
			return -1;
	}
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * v4 names are stored as (bytes to strip from the previous name, suffix).
 * At the start of an IEOT block `share` is 0: nothing is shared with the
 * previous name, so the whole of it is stripped, as do_write_index() does.
 */
static void put_entry(struct out *o, uint32_t version, const char *name, const char *prev,
		      int share)
{
	unsigned char fixed[GT_ONDISK_FIXED] = { 0 };
	unsigned char pad[8] = { 0 }, vbuf[16];
	size_t len = strlen(name), common = 0, prevlen;

	gt_put_be32(fixed + 24, 0100644);
	memcpy(fixed + 40, empty_blob, GT_HASH_SZ);
	fixed[60] = (unsigned char)((len < GT_CE_NAMEMASK ? len : GT_CE_NAMEMASK) >> 8);
	fixed[61] = (unsigned char)(len < GT_CE_NAMEMASK ? len : GT_CE_NAMEMASK);
	out_put(o, fixed, sizeof(fixed));
	if (version == 4) {
		prevlen = prev ? strlen(prev) : 0;
		while (share && common < len && common < prevlen && name[common] == prev[common])
			common++;
		out_put(o, vbuf, encode_varint(prevlen - common, vbuf));
		out_put(o, name + common, len - common + 1);
		return;
	}
	out_put(o, name, len);
	out_put(o, pad, gt_ondisk_ce_size(GT_ONDISK_FIXED, len) - GT_ONDISK_FIXED - len);
}

static int check_shape(const struct gt_index_shape *s, uint64_t *total, char *err, size_t errlen)
{
	uint64_t dirs = 1, level = 1;
	int d;

	if (s->version < 2 || s->version > 4)
		return gt_error(GT_EINVAL, err, errlen, "index version must be 2, 3 or 4");
	if (s->depth < 0 || s->depth > 12 || s->width < 1 || s->width > 1000 ||
	    s->files < 1 || s->files > 100000)
		return gt_error(GT_EINVAL, err, errlen, "shape must have depth 0..12, width >= 1, files >= 1");
	for (d = 0; d < s->depth && dirs < UINT32_MAX; d++) {
		level *= (uint64_t)s->width;
		dirs += level;
	}
	*total = dirs * (uint64_t)s->files;
	if (s->entries > *total)
		return gt_error(GT_EINVAL, err, errlen, "shape holds %llu files, fewer than %u",
				(unsigned long long)*total, s->entries);
	if (s->ieot_blocks < 0)
		return gt_error(GT_EINVAL, err, errlen, "ieot_blocks must be >= 0");
	return GT_OK;
}

static void write_index(struct out *o, const struct gt_index_shape *s, char **v, uint32_t nr)
{
	uint32_t blocks = s->ieot_blocks > 1 ? (uint32_t)s->ieot_blocks : 0, b, i, per;
	uint32_t *off = NULL, *cnt = NULL;
	unsigned char sum[GT_HASH_SZ], hdr[GT_EXT_HEADER];
	struct gt_sha1 ext;
	uint64_t entries_end;

	if (blocks > nr)
		blocks = nr > 1 ? nr : 0;
	if (blocks) {
		off = calloc(blocks, sizeof(*off));
		cnt = calloc(blocks, sizeof(*cnt));
		if (!off || !cnt) {
			o->failed = ENOMEM;
			goto out;
		}
	}
	out_put(o, "DIRC", 4);
	out_be32(o, s->version);
	out_be32(o, nr);
	per = blocks ? DIV_ROUND_UP(nr, blocks) : nr;
	for (i = 0, b = 0; i < nr; i++) {
		int block_start = blocks && !(i % per);
		if (block_start) {
			off[b] = (uint32_t)o->offset;
			cnt[b] = nr - i < per ? nr - i : per;
			b++;
		}
		put_entry(o, s->version, v[i], i ? v[i - 1] : NULL, !block_start);
	}
	entries_end = o->offset;
	if (blocks) {
		blocks = b;
		gt_sha1_init(&ext);
		memcpy(hdr, "IEOT", 4);
		gt_put_be32(hdr + 4, 4 + 8 * blocks);
		gt_sha1_update(&ext, hdr, sizeof(hdr));
		out_put(o, hdr, sizeof(hdr));
		out_be32(o, 1);
		for (b = 0; b < blocks; b++) {
			out_be32(o, off[b]);
			out_be32(o, cnt[b]);
		}
		out_put(o, "EOIE", 4);
		out_be32(o, GT_EOIE_SIZE);
		out_be32(o, (uint32_t)entries_end);
		gt_sha1_final(&ext, sum);
		out_put(o, sum, GT_HASH_SZ);
	}
	gt_sha1_final(&o->sha, sum);
	o->offset += GT_HASH_SZ;
	out_flush(o);	/* the trailer is not part of what it hashes */
	memcpy(o->buf, sum, GT_HASH_SZ);
	o->used = GT_HASH_SZ;
	out_flush(o);
out:
	free(off);
	free(cnt);
}

int gt_index_write_synthetic(const char *path, const struct gt_index_shape *shape,
			     struct gt_ctl *ctl, char *err, size_t errlen)
{
	struct paths p = { 0 };
	struct out o = { .fd = -1 };
	struct gt_run run;
	char *tmp = NULL;
	uint64_t total = 0;
	size_t i;
	int status;

	if (!path || !shape)
		return gt_error(GT_EINVAL, err, errlen, "path and shape are required");
	if ((status = check_shape(shape, &total, err, errlen)))
		return status;
	gt_run_start(&run, ctl);
	p.want = shape->entries ? shape->entries : (size_t)(total < UINT32_MAX ? total : UINT32_MAX);
	if (gt_run_budget(&run, (uint64_t)p.want * 128))
		return gt_error(GT_EBUDGET, err, errlen, "%zu entries exceed the byte budget", p.want);
	p.v = calloc(p.want ? p.want : 1, sizeof(*p.v));
	o.buf = malloc(OUT_BUF);
	tmp = malloc(strlen(path) + 16);
	if (!p.v || !o.buf || !tmp || gen_dir(&p, shape, "", shape->depth)) {
		status = gt_error(GT_ENOMEM, err, errlen, "out of memory for %zu paths", p.want);
		goto out;
	}
	if ((status = gt_run_check(&run))) {
		status = gt_error_run(status, err, errlen, "index write");
		goto out;
	}
	qsort(p.v, p.nr, sizeof(*p.v), cmp_path);
	sprintf(tmp, "%s.tmp.XXXXXX", path);
	o.fd = mkstemp(tmp);
	if (o.fd < 0) {
		status = gt_error_errno(errno, err, errlen, "unable to create '%s'", tmp);
		goto out;
	}
	gt_sha1_init(&o.sha);
	write_index(&o, shape, p.v, (uint32_t)p.nr);
	if (!o.failed && fsync(o.fd))
		o.failed = errno;
	if (close(o.fd) && !o.failed)
		o.failed = errno;
	o.fd = -1;
	if (!o.failed && rename(tmp, path))
		o.failed = errno;
	if (o.failed) {
		unlink(tmp);
		status = gt_error_errno(o.failed, err, errlen, "unable to write '%s'", path);
	}
out:
	if (o.fd >= 0) {
		close(o.fd);
		unlink(tmp);
	}
	for (i = 0; i < p.nr; i++)
		free(p.v[i]);
	free(p.v);
	free(o.buf);
	free(tmp);
	return status;
}
