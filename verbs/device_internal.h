/* What the device backend's files share and nothing else sees: how a
 * failure is told, and the facts of a device every object built on it
 * asks. The functions are hidden: they stay out of the dynamic symbol
 * table, as static functions are, and keep their names in the binary's
 * symbol table. */
#ifndef SQSCOPE_DEVICE_INTERNAL_H
#define SQSCOPE_DEVICE_INTERNAL_H

#include "device.h"

#define SQD_HIDDEN __attribute__((visibility("hidden")))

static inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* fail fills err with what was being done, the errno and a detail. */
SQD_HIDDEN void fail(struct sqd_err *err, int errnum, const char *op,
		     const char *detail_fmt, ...);
SQD_HIDDEN int ret_errno(int ret);
SQD_HIDDEN void destroyed(struct sqd_err *err, int ret, const char *what);
/* alloc_buf: len bytes, zeroed, page-aligned; NULL without memory. */
SQD_HIDDEN void *alloc_buf(size_t len);
SQD_HIDDEN int cqx_mode(struct sqd_device *d);
/* cq_size: want entries, or the device's max_cqe when that is less. */
SQD_HIDDEN int cq_size(struct sqd_device *d, uint64_t want);

#endif
