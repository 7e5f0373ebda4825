/*
 * libFuzzer harness for the index parser: every input must come back as
 * GT_OK or a clean error, never a crash, a leak or undefined behaviour.
 * Run it with `make -C engine fuzz-run`; fuzz/seeds holds indexes written
 * by real git (v2, v3, v4, with and without EOIE/IEOT).
 */
#include "gittune.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gt_index_opts opts = { .verify_checksum = 0 };
	struct gt_index_result out;
	struct gt_ctl ctl;
	char err[256];

	/* The checksum would reject almost every mutation: skip it, and try
	 * both allocators and the threaded path on each input, read as SHA-1
	 * and as SHA-256 (an entry's hash, EOIE and the trailer change size). */
	gt_ctl_init(&ctl, 0, 64u << 20);
	opts.threads = size & 1 ? 3 : 1;
	opts.alloc = size & 2 ? GT_ALLOC_POOL : GT_ALLOC_MALLOC;
	opts.pool_block = 4096;
	opts.hash_algo = GT_HASH_SHA1;
	gt_index_parse(data, size, &opts, &ctl, &out, err, sizeof(err));
	opts.hash_algo = GT_HASH_SHA256;
	gt_index_parse(data, size, &opts, &ctl, &out, err, sizeof(err));
	return 0;
}
