#ifndef GT_SHA256_H
#define GT_SHA256_H

/* A plain SHA-256 (FIPS 180-4) for the checksums of SHA-256 repositories' indexes. */

#include <stddef.h>
#include <stdint.h>

struct gt_sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t used;
};

void gt_sha256_init(struct gt_sha256 *c);
void gt_sha256_update(struct gt_sha256 *c, const void *data, size_t len);
void gt_sha256_final(struct gt_sha256 *c, unsigned char out[32]);

#endif
