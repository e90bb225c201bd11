/* clock.h - wall-clock time as results record it. */
#ifndef GM_CLOCK_H
#define GM_CLOCK_H

#include <stddef.h>

/* UTC time as ISO-8601 "2026-11-30T05:35:08Z". */
void gm_utc_now(char *buf, size_t len);

#endif
