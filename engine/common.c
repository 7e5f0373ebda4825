#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t gt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gt_ctl_init(struct gt_ctl *ctl, uint64_t timeout_ns, uint64_t byte_budget)
{
	memset(ctl, 0, sizeof(*ctl));
	ctl->timeout_ns = timeout_ns;
	ctl->byte_budget = byte_budget;
}

void gt_ctl_cancel(struct gt_ctl *ctl)
{
	if (ctl)
		__atomic_store_n(&ctl->cancel, 1, __ATOMIC_RELEASE);
}

void gt_run_start(struct gt_run *run, struct gt_ctl *ctl)
{
	run->ctl = ctl;
	run->start_ns = gt_now_ns();
	run->deadline_ns = (ctl && ctl->timeout_ns) ? run->start_ns + ctl->timeout_ns : 0;
}

int gt_run_check(const struct gt_run *run)
{
	if (run->ctl && __atomic_load_n(&run->ctl->cancel, __ATOMIC_ACQUIRE))
		return GT_ECANCELED;
	if (run->deadline_ns && gt_now_ns() > run->deadline_ns)
		return GT_ETIMEDOUT;
	return GT_OK;
}

int gt_run_budget(const struct gt_run *run, uint64_t bytes)
{
	if (run->ctl && run->ctl->byte_budget && bytes > run->ctl->byte_budget)
		return GT_EBUDGET;
	return GT_OK;
}

static void vformat(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (!err || !errlen)
		return;
	vsnprintf(err, errlen, fmt, ap);
}

int gt_error(int status, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vformat(err, errlen, fmt, ap);
	va_end(ap);
	return status;
}

int gt_error_errno(int errno_value, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	size_t used;

	va_start(ap, fmt);
	vformat(err, errlen, fmt, ap);
	va_end(ap);
	if (err && errlen) {
		used = strlen(err);
		if (used < errlen)
			snprintf(err + used, errlen - used, ": %s", strerror(errno_value));
	}
	if (errno_value == ENOMEM)
		return GT_ENOMEM;
	return GT_ESYS;
}

int gt_error_run(int status, char *err, size_t errlen, const char *what)
{
	switch (status) {
	case GT_ECANCELED:
		return gt_error(status, err, errlen, "%s cancelled", what);
	case GT_ETIMEDOUT:
		return gt_error(status, err, errlen, "%s exceeded its deadline", what);
	case GT_EBUDGET:
		return gt_error(status, err, errlen, "%s would exceed the byte budget", what);
	default:
		return status;
	}
}

/* Below 4 ns a bucket per value; then bucket 4*(k-1) + s covers [2^k * (4+s)/4, 2^k * (5+s)/4). */
static int hist_bucket(uint64_t ns)
{
	int msb, sub, b;

	if (ns < 4)
		return (int)ns;
	msb = 63 - __builtin_clzll(ns);
	sub = (int)((ns >> (msb - 2)) & 3);
	b = (msb - 1) * 4 + sub;
	return b < GT_HIST_BUCKETS ? b : GT_HIST_BUCKETS - 1;
}

uint64_t gt_hist_lower(int bucket)
{
	int msb, sub;

	if (bucket < 4)
		return bucket < 0 ? 0 : (uint64_t)bucket;
	if (bucket >= GT_HIST_BUCKETS)
		return UINT64_MAX;
	msb = bucket / 4 + 1;
	sub = bucket % 4;
	return ((uint64_t)(4 + sub)) << (msb - 2);
}

void gt_hist_init(struct gt_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

void gt_hist_add(struct gt_hist *h, uint64_t ns)
{
	h->count++;
	h->sum_ns += ns;
	if (ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->bucket[hist_bucket(ns)]++;
}

void gt_hist_merge(struct gt_hist *into, const struct gt_hist *from)
{
	int i;

	if (!from->count)
		return;
	into->count += from->count;
	into->sum_ns += from->sum_ns;
	if (from->min_ns < into->min_ns)
		into->min_ns = from->min_ns;
	if (from->max_ns > into->max_ns)
		into->max_ns = from->max_ns;
	for (i = 0; i < GT_HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
}

const char **gt_split_paths(const char *buf, size_t count, int *status,
			    char *err, size_t errlen)
{
	const char **v;
	size_t i;

	if (!buf && count) {
		*status = gt_error(GT_EINVAL, err, errlen, "path list is NULL");
		return NULL;
	}
	v = calloc(count ? count : 1, sizeof(*v));
	if (!v) {
		*status = gt_error(GT_ENOMEM, err, errlen, "out of memory for %zu paths", count);
		return NULL;
	}
	for (i = 0; i < count; i++) {
		v[i] = buf;
		buf += strlen(buf) + 1;
	}
	*status = GT_OK;
	return v;
}

int gt_abi_version(void)
{
	return GT_ABI_VERSION;
}

size_t gt_sizeof(const char *name)
{
	static const struct {
		const char *name;
		size_t size;
	} table[] = {
		{ "struct gt_ctl", sizeof(struct gt_ctl) },
		{ "struct gt_hist", sizeof(struct gt_hist) },
		{ "struct gt_thread_stat", sizeof(struct gt_thread_stat) },
		{ "struct gt_preload_opts", sizeof(struct gt_preload_opts) },
		{ "struct gt_preload_result", sizeof(struct gt_preload_result) },
		{ "struct gt_checkout_opts", sizeof(struct gt_checkout_opts) },
		{ "struct gt_checkout_result", sizeof(struct gt_checkout_result) },
		{ "struct gt_index_opts", sizeof(struct gt_index_opts) },
		{ "struct gt_index_result", sizeof(struct gt_index_result) },
		{ "struct gt_index_shape", sizeof(struct gt_index_shape) },
		{ "struct gt_smallfile_opts", sizeof(struct gt_smallfile_opts) },
		{ "struct gt_smallfile_result", sizeof(struct gt_smallfile_result) },
		{ "struct gt_latency_result", sizeof(struct gt_latency_result) },
		{ "struct gt_fs_info", sizeof(struct gt_fs_info) },
		{ "struct gt_residency", sizeof(struct gt_residency) },
		{ "struct gt_stat_check", sizeof(struct gt_stat_check) },
	};
	size_t i;

	if (!name)
		return 0;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, name))
			return table[i].size;
	return 0;
}

const char *gt_strstatus(int status)
{
	switch (status) {
	case GT_OK: return "ok";
	case GT_EINVAL: return "invalid argument";
	case GT_ESYS: return "system call failed";
	case GT_ENOMEM: return "out of memory";
	case GT_ECORRUPT: return "corrupt input";
	case GT_ECANCELED: return "cancelled";
	case GT_ETIMEDOUT: return "deadline exceeded";
	case GT_EBUDGET: return "byte budget exceeded";
	}
	return "unknown status";
}
