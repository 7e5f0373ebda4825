/* The hash algorithms behind hash.h's table. */
#include "gittune.h"
#include "hash.h"

static void sha1_init(union gt_hash_ctx *c) { gt_sha1_init(&c->sha1); }
static void sha1_update(union gt_hash_ctx *c, const void *d, size_t n) { gt_sha1_update(&c->sha1, d, n); }
static void sha1_final(union gt_hash_ctx *c, unsigned char *out) { gt_sha1_final(&c->sha1, out); }
static void sha256_init(union gt_hash_ctx *c) { gt_sha256_init(&c->sha256); }
static void sha256_update(union gt_hash_ctx *c, const void *d, size_t n) { gt_sha256_update(&c->sha256, d, n); }
static void sha256_final(union gt_hash_ctx *c, unsigned char *out) { gt_sha256_final(&c->sha256, out); }

static const struct gt_hash_algo algos[] = {
	[GT_HASH_SHA1] = { "sha1", 20, sha1_init, sha1_update, sha1_final },
	[GT_HASH_SHA256] = { "sha256", 32, sha256_init, sha256_update, sha256_final },
};

const struct gt_hash_algo *gt_hash_algo_by_id(int id)
{
	if (id < 0 || (size_t)id >= sizeof(algos) / sizeof(algos[0]))
		return NULL;
	return &algos[id];
}
