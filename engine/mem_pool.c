#include "mem_pool.h"

#include <stdalign.h>
#include <stdlib.h>

#define POOL_ALIGN alignof(max_align_t)

struct gt_mp_block {
	struct gt_mp_block *next;
	char *next_free;
	char *end;
	alignas(max_align_t) char space[];
};

void gt_mem_pool_init(struct gt_mem_pool *pool, size_t block_size)
{
	pool->head = NULL;
	pool->block_size = block_size ? block_size : 1024 * 1024 - sizeof(struct gt_mp_block);
	pool->pool_bytes = 0;
	pool->blocks = 0;
}

static struct gt_mp_block *new_block(struct gt_mem_pool *pool, size_t size,
				     struct gt_mp_block *insert_after)
{
	struct gt_mp_block *b = malloc(sizeof(*b) + size);

	if (!b)
		return NULL;
	b->next_free = b->space;
	b->end = b->space + size;
	pool->pool_bytes += sizeof(*b) + size;
	pool->blocks++;
	if (insert_after) {
		b->next = insert_after->next;
		insert_after->next = b;
	} else {
		b->next = pool->head;
		pool->head = b;
	}
	return b;
}

void *gt_mem_pool_alloc(struct gt_mem_pool *pool, size_t len)
{
	struct gt_mp_block *b = pool->head;
	void *r;

	len = (len + POOL_ALIGN - 1) & ~(POOL_ALIGN - 1);
	if (!b || (size_t)(b->end - b->next_free) < len) {
		/* Large requests get their own block behind the current one. */
		if (len >= pool->block_size / 2) {
			b = new_block(pool, len, pool->head);
			if (!b)
				return NULL;
			b->next_free = b->end;
			return b->space;
		}
		b = new_block(pool, pool->block_size, NULL);
		if (!b)
			return NULL;
	}
	r = b->next_free;
	b->next_free += len;
	return r;
}

void gt_mem_pool_combine(struct gt_mem_pool *into, struct gt_mem_pool *from)
{
	struct gt_mp_block **tail = &into->head;

	while (*tail)
		tail = &(*tail)->next;
	*tail = from->head;
	into->pool_bytes += from->pool_bytes;
	into->blocks += from->blocks;
	from->head = NULL;
	from->pool_bytes = 0;
	from->blocks = 0;
}

void gt_mem_pool_discard(struct gt_mem_pool *pool)
{
	struct gt_mp_block *b = pool->head, *next;

	for (; b; b = next) {
		next = b->next;
		free(b);
	}
	pool->head = NULL;
	pool->pool_bytes = 0;
	pool->blocks = 0;
}
