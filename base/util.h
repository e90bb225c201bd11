/*
 * util.h - small helpers shared by every part of gmsim: the error record that
 * travels up to main(), size parsing/formatting, and a streaming 64-bit hash.
 *
 * Errors: library functions never print and never exit. They return GM_OK (0)
 * or a negative GM_E* code and fill a gm_err whose message names the input
 * and, where one exists, the fix. Only main() prints it.
 */
#ifndef GM_UTIL_H
#define GM_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define GM_OK 0
#define GM_EINVAL (-1) /* bad input (file content, option value)      */
#define GM_EIO (-2)    /* cannot read/write a file                      */
#define GM_ENOMEM (-3) /* host malloc failed                            */
#define GM_EOOM (-4)   /* simulated/real device out of memory           */
#define GM_EUSAGE (-5) /* command-line misuse (exit code 2)             */

#define GM_KiB (1024ull)
#define GM_MiB (1024ull * 1024ull)
#define GM_GiB (1024ull * 1024ull * 1024ull)

/* Error record: a single human-readable message. */
typedef struct gm_err {
    int code;
    char msg[1024];
} gm_err;

/* Format msg into err (printf-style) and return code. */
int gm_errf(gm_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Parse "24GiB", "512MB", "1.5G", "4096", "2 MiB" into bytes. Binary and
 * decimal suffixes follow the usual convention (KiB=1024, KB=1000); a bare
 * K/M/G/T is binary, as in nvidia-smi and PyTorch's docs. Returns GM_OK or
 * GM_EINVAL with a message naming `what`.
 */
int gm_parse_size(const char *s, const char *what, uint64_t *out, gm_err *err);

/* Parse a duration "5s", "100ms", "250us", "1000ns", "2.5" (seconds) into ns. */
int gm_parse_time(const char *s, const char *what, uint64_t *out_ns, gm_err *err);

/* Parse a number in [lo, hi] ("0.8"). */
int gm_parse_double(const char *s, const char *what, double lo, double hi, double *out,
                    gm_err *err);

/* Format bytes as "1.50 GiB" into buf; returns buf. */
char *gm_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* Format nanoseconds as "1.234 s", "12.3 ms", "45 us". */
char *gm_fmt_ns(uint64_t ns, char *buf, size_t len);

/* Streaming hash (64-bit, non-cryptographic, stable across platforms). */
typedef struct gm_hash {
    uint64_t h;
} gm_hash;
void gm_hash_init(gm_hash *h);
void gm_hash_u64(gm_hash *h, uint64_t v);
void gm_hash_bytes(gm_hash *h, const void *p, size_t n);
static inline uint64_t gm_hash_final(const gm_hash *h)
{
    uint64_t x = h->h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* UTC time as ISO-8601 "2026-11-30T05:35:08Z". */
void gm_utc_now(char *buf, size_t len);

/* Version string of gmsim. */
#define GM_VERSION "0.1.0"

#endif
