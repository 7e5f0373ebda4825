#ifndef GT_INTERNAL_H
#define GT_INTERNAL_H

/* Helpers shared by the engine's kernels; not part of the public API. */

#include "gittune.h"

#include <stdarg.h>
#include <stdint.h>

#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/* How often (in operations) a hot loop looks at its gt_ctl. */
#define GT_CHECK_EVERY 64

uint64_t gt_now_ns(void);

/*
 * A running call's view of its gt_ctl: the absolute deadline is fixed at
 * the start so every thread of the call agrees on it.
 */
struct gt_run {
	struct gt_ctl *ctl;	/* may be NULL */
	uint64_t start_ns;
	uint64_t deadline_ns;	/* 0 = none */
};

void gt_run_start(struct gt_run *run, struct gt_ctl *ctl);
/* GT_OK, GT_ECANCELED or GT_ETIMEDOUT. */
int gt_run_check(const struct gt_run *run);
/* GT_EBUDGET when `bytes` exceeds the byte budget. */
int gt_run_budget(const struct gt_run *run, uint64_t bytes);

/* Format a message into err (if any) and return `status`. */
int gt_error(int status, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Same, appending ": strerror(errno_value)". */
int gt_error_errno(int errno_value, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The message a ctl status gets ("cancelled", "deadline exceeded"). */
int gt_error_run(int status, char *err, size_t errlen, const char *what);

void gt_hist_init(struct gt_hist *h);
void gt_hist_add(struct gt_hist *h, uint64_t ns);
void gt_hist_merge(struct gt_hist *into, const struct gt_hist *from);

/*
 * Split `count` NUL-terminated strings laid end to end into an array of
 * pointers into `buf`. Returns NULL with *status set on error.
 */
const char **gt_split_paths(const char *buf, size_t count, int *status,
			    char *err, size_t errlen);

/* Count an errno value into a GT_ERRNO_SLOTS array (the last slot takes the rest). */
static inline void gt_count_errno(uint64_t *slots, int e)
{
	slots[(e >= 0 && e < GT_ERRNO_SLOTS) ? e : GT_ERRNO_SLOTS - 1]++;
}

#endif /* GT_INTERNAL_H */
