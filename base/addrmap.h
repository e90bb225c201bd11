/*
 * addrmap.h - open-addressing hash map from a 64-bit key (a recorded device
 * address) to a 64-bit value or pointer. Used on the hot path of every
 * simulation: one lookup per event, linear probing, power-of-two capacity,
 * backward-shift deletion (no tombstones, so long runs do not degrade).
 * Key 0 is reserved as "empty"; callers map addr 0 through gm_addrmap_key().
 */
#ifndef GM_ADDRMAP_H
#define GM_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gm_addrmap_slot {
    uint64_t key; /* 0 = empty */
    uint64_t val;
} gm_addrmap_slot;

typedef struct gm_addrmap {
    gm_addrmap_slot *slots;
    size_t mask;  /* capacity - 1 */
    size_t count; /* live entries */
} gm_addrmap;

/* Keys must be non-zero; this maps an address (any but UINT64_MAX, which no
 * device hands out) to a non-zero key. */
static inline uint64_t gm_addrmap_key(uint64_t addr)
{
    return addr + 1;
}

int gm_addrmap_init(gm_addrmap *m, size_t initial_capacity); /* GM_OK / GM_ENOMEM */
void gm_addrmap_free(gm_addrmap *m);
void gm_addrmap_clear(gm_addrmap *m);

static inline size_t gm_addrmap_hash(uint64_t key)
{
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 32;
    return (size_t)key;
}

/* Value pointer for key, or NULL. */
static inline uint64_t *gm_addrmap_get(const gm_addrmap *m, uint64_t key)
{
    size_t i = gm_addrmap_hash(key) & m->mask;
    for (;;) {
        gm_addrmap_slot *s = &m->slots[i];
        if (s->key == key) return &s->val;
        if (s->key == 0) return NULL;
        i = (i + 1) & m->mask;
    }
}

/* Insert key (must not be present). Returns GM_OK, or GM_ENOMEM when growing fails. */
int gm_addrmap_put(gm_addrmap *m, uint64_t key, uint64_t val);
/* Remove key; returns 1 and stores its value in *val (if val) when present, else 0. */
int gm_addrmap_del(gm_addrmap *m, uint64_t key, uint64_t *val);

/* Iterate: for (size_t i = 0; i <= m->mask; i++) if (m->slots[i].key) ... */

#endif
