/*
 * units.h - sizes and durations: the binary units, parsing what a user types
 * ("24GiB", "150ms") and formatting what gmsim prints ("1.50 GiB", "12.3 ms").
 */
#ifndef GM_UNITS_H
#define GM_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GM_KiB (1024ull)
#define GM_MiB (1024ull * 1024ull)
#define GM_GiB (1024ull * 1024ull * 1024ull)

/*
 * Parse "24GiB", "512MB", "1.5G", "4096", "2 MiB" into bytes. Binary and
 * decimal suffixes follow the usual convention (KiB=1024, KB=1000); a bare
 * K/M/G/T is binary, as in nvidia-smi and PyTorch's docs. Returns GM_OK or
 * GM_EINVAL with a message naming `what`.
 */
int gm_parse_size(const char *s, const char *what, uint64_t *out, gm_err *err);
/* When s uses a decimal unit (KB, MB, GB, TB: powers of ten, as disk
 * makers count), a note for people who meant the binary one, e.g. "24GB =
 * 22.35 GiB (GB is 10^9 bytes); did you mean 24GiB?" (bytes: s parsed).
 * Returns 1 when it wrote one, else 0. */
int gm_size_decimal_note(const char *s, uint64_t bytes, char *buf, size_t len);

/* Parse a duration "5s", "100ms", "250us", "1000ns", "2.5" (seconds) into ns. */
int gm_parse_time(const char *s, const char *what, uint64_t *out_ns, gm_err *err);

/* Parse a number in [lo, hi] ("0.8"). */
int gm_parse_double(const char *s, const char *what, double lo, double hi, double *out,
                    gm_err *err);

/* Format bytes as "1.50 GiB" into buf; returns buf. */
char *gm_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* Format nanoseconds as "1.234 s", "12.3 ms", "45 us". */
char *gm_fmt_ns(uint64_t ns, char *buf, size_t len);

#endif
