#ifndef GT_HASH_H
#define GT_HASH_H

/*
 * The object formats an index may be written in, like git_hash_algo in
 * Git's hash.h: how long an object name is, and the checksum over the file
 * (SHA-1, or SHA-256 in a repository made with --object-format=sha256).
 */

#include "sha1.h"
#include "sha256.h"

#define GT_MAX_HASH_SZ 32

union gt_hash_ctx {
	struct gt_sha1 sha1;
	struct gt_sha256 sha256;
};

struct gt_hash_algo {
	const char *name;
	size_t rawsz;
	void (*init)(union gt_hash_ctx *c);
	void (*update)(union gt_hash_ctx *c, const void *data, size_t len);
	void (*final)(union gt_hash_ctx *c, unsigned char *out);
};

/* The algorithm for enum gt_hash_id `id`, or NULL for one this engine does not know. */
const struct gt_hash_algo *gt_hash_algo_by_id(int id);

#endif
