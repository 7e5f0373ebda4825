#ifndef GT_MD_BLOCK_H
#define GT_MD_BLOCK_H

/*
 * The Merkle-Damgard buffering SHA-1 and SHA-256 share: input goes to the
 * compression function 64 bytes at a time, a tail waits in `buf`.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef void (*gt_md_block_fn)(uint32_t *h, const unsigned char *block);

static inline void gt_md_update(uint32_t *h, unsigned char buf[64], size_t *used,
				uint64_t *total, const void *data, size_t len, gt_md_block_fn block)
{
	const unsigned char *p = data;

	*total += len;
	if (*used) {
		size_t n = 64 - *used < len ? 64 - *used : len;

		memcpy(buf + *used, p, n);
		*used += n;
		p += n;
		len -= n;
		if (*used < 64)
			return;
		block(h, buf);
		*used = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		block(h, p);
	memcpy(buf, p, len);
	*used = len;
}

/* The padding both append: 0x80, zeros, the message's length in bits (big-endian). */
static inline size_t gt_md_padding(unsigned char pad[72], size_t used, uint64_t total)
{
	uint64_t bits = total * 8;
	size_t n = (used < 56 ? 56 : 120) - used;
	int i;

	memset(pad, 0, 72);
	pad[0] = 0x80;
	for (i = 0; i < 8; i++)
		pad[n + i] = (unsigned char)(bits >> (56 - 8 * i));
	return n + 8;
}

#endif
