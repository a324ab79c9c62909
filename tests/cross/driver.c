/* The cross test's driver (tests/cross/main.rs): runs ahead-of-time kernels on the target
 * machine (natively or under qemu-user) on inputs the Rust test wrote, and writes what each
 * call did for the test to compare with the reference interpreter.
 *
 * Linked with a generated table.c (the `gj_kernels` table: each kernel's entry point, buffer
 * count and the buffer sizes its header #defines) and the objects themselves.
 *
 * Usage: driver INPUTS OUTPUTS
 *
 * Every integer in both files is a little-endian uint64 (the test only runs little-endian
 * targets, so the driver reads and writes them natively); byte strings are padded to a
 * multiple of 8.
 *
 * INPUTS:  "GJXIN001", case count, then per case: kernel (index in gj_kernels), misalignment
 *          (one byte per buffer: its offset 0..7 from a 16-aligned address), null mask (bit i:
 *          pass NULL for buffer i), the size of each buffer (the table's count, output last),
 *          then the bytes of each input buffer (all but the output).
 * OUTPUTS: "GJXOUT01", case count, then per case: kernel, status (as returned), bad position,
 *          flags (FLAG_*), output size, output bytes.
 *
 * Each buffer sits between two guard regions of GUARD bytes filled with a pattern; the
 * output starts filled with SENTINEL and *bad_position with BAD_POSITION_UNSET. After the
 * call the guards of every buffer and the contents of every input buffer are compared with
 * what they were. A crash in a kernel is reported on stderr with the case number, and the
 * records of the cases before it are already in OUTPUTS. */

#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "table.h"

#define GUARD 64
#define SENTINEL 0xA5
#define BAD_POSITION_UNSET UINT64_C(0xDEADBEEFDEADBEEF)

/* Flags of an output record. */
#define FLAG_GUARD_BEFORE_OUTPUT 1u  /* a byte before the output changed */
#define FLAG_GUARD_AFTER_OUTPUT 2u   /* a byte after the output changed */
#define FLAG_INPUT_CHANGED 4u        /* an input buffer or one of its guards changed */
#define FLAG_SIZE_MISMATCH 8u        /* the sizes differ from the header's (not called) */

typedef int32_t (*gather_fn)(const void *, const void *, void *, uint64_t *);
typedef int32_t (*quantized_fn)(const void *, const void *, const void *, const void *, void *,
                                uint64_t *);

static volatile sig_atomic_t current_case = -1;

static void die(const char *what) {
    fprintf(stderr, "driver: %s\n", what);
    exit(2);
}

/* Reports the case a kernel crashed in, with async-signal-safe calls only. */
static void on_crash(int sig) {
    char message[96];
    char digits[24];
    int n = 0;
    long value = (long)current_case;
    const char *prefix = "driver: signal in case ";
    size_t len = strlen(prefix);
    memcpy(message, prefix, len);
    if (value < 0) {
        message[len++] = '-';
        value = 1;
    }
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (n > 0) {
        message[len++] = digits[--n];
    }
    message[len++] = '\n';
    (void)!write(2, message, len);
    _exit(128 + sig);
}

static uint64_t read_u64(const unsigned char **at, const unsigned char *end) {
    uint64_t value;
    if ((size_t)(end - *at) < 8) {
        die("inputs file truncated");
    }
    memcpy(&value, *at, 8);
    *at += 8;
    return value;
}

static void write_u64(FILE *out, uint64_t value) {
    if (fwrite(&value, 8, 1, out) != 1) {
        die("cannot write outputs");
    }
}

static uint64_t padded(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* The guard pattern: differs from SENTINEL and from byte to byte. */
static unsigned char guard_byte(size_t i) { return (unsigned char)(0x3C ^ (i * 37)); }

/* A buffer of `size` bytes at offset `misalign` from a 16-aligned address inside an
 * allocation with at least GUARD bytes of pattern on either side. */
struct guarded {
    unsigned char *base;
    unsigned char *start;
    size_t size;
};

static struct guarded guarded_new(size_t size, unsigned misalign) {
    struct guarded g;
    size_t total = size + 2 * GUARD + 32;
    g.base = malloc(total);
    if (g.base == NULL) {
        die("out of memory");
    }
    g.start = g.base + GUARD + ((16 - (uintptr_t)(g.base + GUARD) % 16) % 16) + misalign;
    g.size = size;
    for (size_t i = 0; i < total; i++) {
        g.base[i] = guard_byte(i);
    }
    return g;
}

/* Whether the bytes before (which = 0) or after (which = 1) the buffer still hold the
 * pattern, over the whole rest of the allocation. */
static int guard_intact(const struct guarded *g, int which) {
    size_t total = g->size + 2 * GUARD + 32;
    size_t from = which == 0 ? 0 : (size_t)(g->start - g->base) + g->size;
    size_t to = which == 0 ? (size_t)(g->start - g->base) : total;
    for (size_t i = from; i < to; i++) {
        if (g->base[i] != guard_byte(i)) {
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        die("usage: driver INPUTS OUTPUTS");
    }
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGILL, on_crash);
    signal(SIGFPE, on_crash);

    FILE *in = fopen(argv[1], "rb");
    if (in == NULL) {
        die("cannot open inputs");
    }
    if (fseek(in, 0, SEEK_END) != 0) {
        die("cannot seek inputs");
    }
    long file_size = ftell(in);
    if (file_size < 0 || fseek(in, 0, SEEK_SET) != 0) {
        die("cannot size inputs");
    }
    unsigned char *file = malloc((size_t)file_size + 1);
    if (file == NULL || fread(file, 1, (size_t)file_size, in) != (size_t)file_size) {
        die("cannot read inputs");
    }
    fclose(in);
    const unsigned char *at = file;
    const unsigned char *end = file + file_size;
    if (file_size < 8 || memcmp(at, "GJXIN001", 8) != 0) {
        die("not an inputs file");
    }
    at += 8;
    uint64_t cases = read_u64(&at, end);

    FILE *out = fopen(argv[2], "wb");
    if (out == NULL) {
        die("cannot open outputs");
    }
    if (fwrite("GJXOUT01", 8, 1, out) != 1) {
        die("cannot write outputs");
    }
    write_u64(out, cases);
    fflush(out);

    for (uint64_t c = 0; c < cases; c++) {
        uint64_t k = read_u64(&at, end);
        if (k >= gj_kernel_count) {
            die("kernel number out of range");
        }
        const struct gj_kernel *kernel = &gj_kernels[k];
        uint64_t misalign = read_u64(&at, end);
        uint64_t nulls = read_u64(&at, end);
        uint64_t sizes[GJ_MAX_BUFFERS];
        uint64_t flags = 0;
        int count = kernel->buffers;
        for (int i = 0; i < count; i++) {
            sizes[i] = read_u64(&at, end);
            if (sizes[i] != kernel->bytes[i]) {
                flags |= FLAG_SIZE_MISMATCH;
            }
        }
        struct guarded buffers[GJ_MAX_BUFFERS];
        const unsigned char *contents[GJ_MAX_BUFFERS];
        void *pointers[GJ_MAX_BUFFERS];
        for (int i = 0; i < count; i++) {
            buffers[i] = guarded_new((size_t)sizes[i], (unsigned)((misalign >> (8 * i)) & 7));
            if (i < count - 1) {
                if ((uint64_t)(end - at) < padded(sizes[i])) {
                    die("inputs file truncated");
                }
                contents[i] = at;
                memcpy(buffers[i].start, at, (size_t)sizes[i]);
                at += padded(sizes[i]);
            } else {
                contents[i] = NULL;
                memset(buffers[i].start, SENTINEL, (size_t)sizes[i]);
            }
            pointers[i] = (nulls >> i) & 1 ? NULL : buffers[i].start;
        }

        uint64_t bad_position = BAD_POSITION_UNSET;
        int32_t status = -1;
        if (flags == 0) {
            current_case = (sig_atomic_t)c;
            if (count == 3) {
                gather_fn f = (gather_fn)kernel->entry;
                status = f(pointers[0], pointers[1], pointers[2], &bad_position);
            } else if (count == 5) {
                quantized_fn f = (quantized_fn)kernel->entry;
                status =
                    f(pointers[0], pointers[1], pointers[2], pointers[3], pointers[4], &bad_position);
            } else {
                die("a kernel with neither 3 nor 5 buffers");
            }
            current_case = -1;
        }

        struct guarded *output = &buffers[count - 1];
        if (!guard_intact(output, 0)) {
            flags |= FLAG_GUARD_BEFORE_OUTPUT;
        }
        if (!guard_intact(output, 1)) {
            flags |= FLAG_GUARD_AFTER_OUTPUT;
        }
        for (int i = 0; i < count - 1; i++) {
            if (!guard_intact(&buffers[i], 0) || !guard_intact(&buffers[i], 1) ||
                memcmp(buffers[i].start, contents[i], (size_t)sizes[i]) != 0) {
                flags |= FLAG_INPUT_CHANGED;
            }
        }

        write_u64(out, k);
        write_u64(out, (uint64_t)(int64_t)status);
        write_u64(out, bad_position);
        write_u64(out, flags);
        write_u64(out, output->size);
        if (output->size > 0 && fwrite(output->start, 1, output->size, out) != output->size) {
            die("cannot write outputs");
        }
        static const unsigned char zeros[8];
        size_t pad = (size_t)(padded(output->size) - output->size);
        if (pad > 0 && fwrite(zeros, 1, pad, out) != pad) {
            die("cannot write outputs");
        }
        /* Flushed per case, so that a crash later leaves this record whole. */
        fflush(out);
        for (int i = 0; i < count; i++) {
            free(buffers[i].base);
        }
    }
    if (at != end) {
        die("trailing bytes in the inputs file");
    }
    if (fclose(out) != 0) {
        die("cannot write outputs");
    }
    free(file);
    return 0;
}
