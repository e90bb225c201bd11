/* counters.h - libFuzzer's coverage counters of this binary (counters.c). */
#ifndef GM_FUZZ_COUNTERS_H
#define GM_FUZZ_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

/* The first counter, *n of them; NULL and 0 in a binary without them. */
uint8_t *fuzz_counters(size_t *n);

#endif
