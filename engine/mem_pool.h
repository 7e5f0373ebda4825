#ifndef GT_MEM_POOL_H
#define GT_MEM_POOL_H

/*
 * A bump allocator in the manner of Git's mem-pool.h: memory comes from
 * blocks of `block_size`; a request of at least half a block gets a block
 * of its own; everything is freed at once by gt_mem_pool_discard().
 */

#include <stddef.h>
#include <stdint.h>

struct gt_mp_block;

struct gt_mem_pool {
	struct gt_mp_block *head;
	size_t block_size;
	uint64_t pool_bytes;	/* bytes held in blocks */
	uint64_t blocks;
};

void gt_mem_pool_init(struct gt_mem_pool *pool, size_t block_size);
/* NULL when out of memory; aligned for any entry type. */
void *gt_mem_pool_alloc(struct gt_mem_pool *pool, size_t len);
/* Move every block of `from` into `into` (Git's mem_pool_combine). */
void gt_mem_pool_combine(struct gt_mem_pool *into, struct gt_mem_pool *from);
void gt_mem_pool_discard(struct gt_mem_pool *pool);

#endif
