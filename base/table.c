/* table.c - see table.h. */
#include "table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int gm_table_room(void **v, size_t *cap, size_t i, size_t elem)
{
    if (i < *cap) return GM_OK;
    size_t n = *cap ? 2 * *cap : 1024;
    while (n <= i)
        n *= 2;
    if (n > SIZE_MAX / elem) return GM_ENOMEM;
    unsigned char *p = realloc(*v, n * elem);
    if (!p) return GM_ENOMEM;
    memset(p + *cap * elem, 0, (n - *cap) * elem);
    *v = p;
    *cap = n;
    return GM_OK;
}
