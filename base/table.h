/*
 * table.h - a zero-filled table indexed by small integers (live slots,
 * allocation ids), grown on demand.
 */
#ifndef GM_TABLE_H
#define GM_TABLE_H

#include <stddef.h>

/* Room in *v (*cap elements of elem bytes, zero-filled) for index i: the
 * capacity doubles from 1024 until it holds i, the new elements zero.
 * GM_OK, or GM_ENOMEM with *v and *cap as they were. */
int gm_table_room(void **v, size_t *cap, size_t i, size_t elem);

#endif
