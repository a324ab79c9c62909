/* The kernel table that the cross test generates (table.c) for its driver (driver.c). */
#ifndef GJ_CROSS_TABLE_H
#define GJ_CROSS_TABLE_H

#include <stdint.h>

/* data, indices, scales, zero points, output */
#define GJ_MAX_BUFFERS 5

/* An entry point, cast back to its own type before the call. */
typedef void (*gj_entry)(void);

struct gj_kernel {
    gj_entry entry;
    /* 3 (a gather: data, indices, output) or 5 (a quantized gather). */
    int buffers;
    /* Each buffer's size in bytes, as the kernel's header #defines it. */
    uint64_t bytes[GJ_MAX_BUFFERS];
};

extern const struct gj_kernel gj_kernels[];
extern const uint64_t gj_kernel_count;

#endif
