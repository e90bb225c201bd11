/*
 * hash.h - a streaming 64-bit hash (non-cryptographic, stable across
 * platforms): trace hashes in every result.
 */
#ifndef GM_HASH_H
#define GM_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct gm_hash {
    uint64_t h;
} gm_hash;
void gm_hash_init(gm_hash *h);
/* One round of a multiply-xorshift mix per word: fast and order-sensitive
 * (inline: the engine hashes every event; sim/engine.c also does it with
 * vector instructions, the same round with these constants). */
#define GM_HASH_MUL 0xbf58476d1ce4e5b9ull
#define GM_HASH_SHIFT 31
#define GM_HASH_ADD 0x94d049bb133111ebull
static inline void gm_hash_u64(gm_hash *h, uint64_t v)
{
    uint64_t x = (h->h ^ v) * GM_HASH_MUL;
    h->h = (x ^ (x >> GM_HASH_SHIFT)) + GM_HASH_ADD;
}
void gm_hash_bytes(gm_hash *h, const void *p, size_t n);
static inline uint64_t gm_hash_final(const gm_hash *h)
{
    uint64_t x = h->h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

#endif
