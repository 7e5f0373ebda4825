#ifndef GT_SHA1_H
#define GT_SHA1_H

/* A plain SHA-1 for index checksums (not for security). */

#include <stddef.h>
#include <stdint.h>

struct gt_sha1 {
	uint32_t h[5];
	uint64_t len;
	unsigned char buf[64];
	size_t used;
};

void gt_sha1_init(struct gt_sha1 *c);
void gt_sha1_update(struct gt_sha1 *c, const void *data, size_t len);
void gt_sha1_final(struct gt_sha1 *c, unsigned char out[20]);

#endif
