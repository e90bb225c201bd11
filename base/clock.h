/* clock.h - the time results record, and wall time measured. */
#ifndef GM_CLOCK_H
#define GM_CLOCK_H

#include <stddef.h>

/* UTC time as ISO-8601 "2026-11-30T05:35:08Z". */
void gm_utc_now(char *buf, size_t len);

/* Seconds on the monotonic clock, for measuring wall time. */
double gm_monotonic_s(void);

#endif
