/*
 * ballast.h - making a smaller card out of a bigger one.
 *
 * To replay at --capacity C on a GPU with more memory, gmreplay holds
 * "ballast" (plain cuMemAlloc blocks nobody uses) so that the driver itself
 * runs out where a card of C bytes would. On such a card, with n tenants of
 * O bytes of context each, allocations can take C - n*O bytes: the simulator's
 * rule (sim/device_model.c). So the ballast must leave exactly that free:
 *
 *     target_free = C - n*O
 *     ballast     = free_now - target_free
 *
 * where free_now is cuMemGetInfo's free memory once gmreplay's own context
 * exists (its overhead is already out of free_now). With the default O = the
 * measured context overhead U and n = 1 this is total - C: a 141 GB card made
 * into a 24 GiB one holds total - 24 GiB.
 *
 * Driver memory comes in granules g (2 MiB): an allocation fits when
 * used + size <= free, used and size multiples of g. The simulator lets
 * floor(target_free / g) granules in; the real card lets floor(free / g) in.
 * Ballast is itself a multiple of g, so it is sized to make those two equal:
 *
 *     ballast = (floor(free_now / g) - floor(target_free / g)) * g
 *
 * It is taken in chunks of at most max_chunk bytes, re-reading free memory
 * after each (the driver's own bookkeeping for a block may cost a little
 * more than the block), until the next chunk would be zero. Nothing here
 * calls the driver: these are the numbers, tested on their own.
 */
#ifndef GM_REPLAY_BALLAST_H
#define GM_REPLAY_BALLAST_H

#include <inttypes.h>
#include <stdint.h>

#include "base/units.h"

#define GM_BALLAST_MAX_CHUNK (4ull * GM_GiB)

/* The free memory the replay must start with: C - n*O. GM_EINVAL with a
 * message when the card cannot be emulated (contexts alone do not fit, or the
 * GPU has less free memory than the emulated card would). */
static inline int gm_ballast_target(uint64_t capacity, uint64_t n_tenants, uint64_t overhead,
                                    uint64_t free_now, uint64_t total, uint64_t *target_free,
                                    gm_err *err)
{
    if (capacity > total)
        return gm_errf(err, GM_EINVAL,
                       "--capacity %" PRIu64 " bytes is more than this GPU has (%" PRIu64
                       "); a replay can only emulate a smaller card",
                       capacity, total);
    if (n_tenants && overhead > capacity / n_tenants)
        return gm_errf(err, GM_EINVAL,
                       "%" PRIu64 " tenant(s) of %" PRIu64 " bytes of context overhead do not "
                       "fit in --capacity %" PRIu64 "; give a larger --capacity or a smaller "
                       "--overhead",
                       n_tenants, overhead, capacity);
    uint64_t target = capacity - n_tenants * overhead;
    if (target > free_now)
        return gm_errf(err, GM_EINVAL,
                       "emulating --capacity %" PRIu64 " with %" PRIu64 " tenant(s) of %" PRIu64
                       " bytes overhead needs %" PRIu64 " bytes free, but the GPU has %" PRIu64
                       " free after its own context (%" PRIu64 " bytes in use: another "
                       "process, or a context larger than --overhead); give a smaller "
                       "--capacity or a larger --overhead",
                       capacity, n_tenants, overhead, target, free_now, total - free_now);
    *target_free = target;
    return GM_OK;
}

/* The next ballast chunk to allocate when `free_now` bytes are free: 0 when
 * the ballast is complete. It never leaves fewer whole granules free than
 * target_free holds (floor(target_free / g)). */
static inline uint64_t gm_ballast_next_chunk(uint64_t free_now, uint64_t target_free,
                                             uint64_t granule, uint64_t max_chunk)
{
    if (granule == 0 || free_now / granule <= target_free / granule) return 0;
    uint64_t need = (free_now / granule - target_free / granule) * granule;
    uint64_t cap = max_chunk / granule * granule;
    return need < cap || cap == 0 ? need : cap;
}

#endif
