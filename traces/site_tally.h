/*
 * site_tally.h - live bytes by call site (trace.h, gm_event.site), now and
 * at the last peak: what `gmsim info` and the OOM explanation show as "top
 * call sites".
 *
 * Memory is O(sites + live allocations with a site). Taking the peak is
 * O(sites changed since the last peak), not O(sites): a peak moves at
 * almost every allocation while memory grows, and a trace may name
 * thousands of sites.
 */
#ifndef GM_SITE_TALLY_H
#define GM_SITE_TALLY_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "base/addrmap.h"

typedef struct gm_site_tally {
    size_t n;                  /* sites + 1: index 0 is "unknown"          */
    uint64_t *bytes, *count;   /* live now, by site                        */
    uint64_t *pbytes, *pcount; /* at the last gm_site_tally_peak          */
    uint32_t *dirty;           /* sites changed since then ...             */
    uint8_t *is_dirty;         /* ... and a flag per site                  */
    size_t ndirty;
    gm_addrmap live; /* key(addr) -> site, for allocations with one */
} gm_site_tally;

/* n_sites: rows of /sites (meta n_sites). */
int gm_site_tally_init(gm_site_tally *t, uint64_t n_sites); /* GM_OK / GM_ENOMEM */
void gm_site_tally_free(gm_site_tally *t);
/* addr becomes live with size bytes from site (0: unknown; beyond the table: unknown). */
int gm_site_tally_add(gm_site_tally *t, uint64_t addr, uint64_t size, uint32_t site);
/* addr, live with size bytes, is freed. */
void gm_site_tally_drop(gm_site_tally *t, uint64_t addr, uint64_t size);
/* Remember now as the peak. */
void gm_site_tally_peak(gm_site_tally *t);

typedef struct gm_site_live {
    uint32_t site;
    uint64_t bytes, count;
} gm_site_live;
/* The k sites (site >= 1) holding the most bytes, now (peak = 0) or at the
 * peak, largest first (ties: lower site first); returns how many (<= k). */
size_t gm_site_tally_top(const gm_site_tally *t, int peak, gm_site_live *out, size_t k);

#endif
