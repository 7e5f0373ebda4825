#ifndef GT_INDEX_FORMAT_H
#define GT_INDEX_FORMAT_H

/*
 * On-disk constants of Git's index (gitformat-index(5)). GT_HASH_SZ is
 * SHA-1's, what the synthetic writer uses; a reader takes the size of the
 * repository's object format from hash.h (entries and EOIE hold a raw hash).
 */

#include <stddef.h>
#include <stdint.h>

#define GT_HASH_SZ 20
#define GT_INDEX_HEADER 12		/* "DIRC", version, entry count */
#define GT_ONDISK_FIXED (40 + GT_HASH_SZ + 2)	/* stat data, oid, flags */
#define GT_CE_NAMEMASK 0x0fff
#define GT_CE_EXTENDED 0x4000
/* The bits of the second flags word Git knows: CE_INTENT_TO_ADD | CE_SKIP_WORKTREE. */
#define GT_CE_EXTENDED_FLAGS ((1u << 29) | (1u << 30))
#define GT_EOIE_SIZE (4 + GT_HASH_SZ)
#define GT_EXT_HEADER 8
/* The smallest entry of any version and format: 62 fixed bytes (SHA-1) + two for the name. */
#define GT_MIN_ENTRY 64

static inline uint32_t gt_get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint16_t gt_get_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void gt_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* v2/v3 entries are NUL-padded to a multiple of eight bytes. */
/* stat data (40 bytes), the object name, the flags: an entry's fixed part. */
static inline size_t gt_ondisk_fixed(size_t rawsz)
{
	return 40 + rawsz + 2;
}

static inline size_t gt_ondisk_ce_size(size_t fixed, size_t namelen)
{
	return (fixed + namelen + 8) & ~(size_t)7;
}

#endif
