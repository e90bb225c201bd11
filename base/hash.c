/* hash.c - see hash.h. */
#include "hash.h"

#include <string.h>

void gm_hash_init(gm_hash *h)
{
    h->h = 0x9e3779b97f4a7c15ull;
}

void gm_hash_bytes(gm_hash *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        gm_hash_u64(h, v);
        b += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, b, n);
    gm_hash_u64(h, tail ^ ((uint64_t)n << 56));
}
