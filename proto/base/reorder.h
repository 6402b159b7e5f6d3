/* reorder.h: a reorder buffer: items that arrive out of order, each with its position in a
 * sequence, given back in sequence order. A ring of slots indexed by position modulo its
 * size, grown (doubling) to hold every position from the first one not yet taken to the
 * furthest one ahead, and never shrunk: a stream whose reader keeps up allocates nothing per
 * item (a hash table keyed by position allocates its table whenever it fills from empty). A
 * caller that must not fail later reserves a position's slot when it hands the position
 * out. One thread at a time (the caller's lock). */
#ifndef LT_REORDER_H
#define LT_REORDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_reorder_slot {
  uint64_t pos;
  void *item; /* NULL: empty */
} lt_reorder_slot_t;

typedef struct lt_reorder {
  lt_reorder_slot_t *slots;
  size_t cap; /* a power of two, or 0 before the first position */
  size_t n;   /* items held */
} lt_reorder_t;

#define LT_REORDER_INIT ((lt_reorder_t){NULL, 0, 0})

/* lt__reorder_reserve grows the ring to hold position `pos` while `next` is the first
 * position not yet taken: a later lt__reorder_put of it cannot fail. Positions below `next`
 * are never held. Returns 0, or -1 out of memory (nothing changed). */
int lt__reorder_reserve(lt_reorder_t *r, uint64_t pos, uint64_t next);

/* lt__reorder_put holds `item` (not NULL) at position `pos` (>= next, the first position not
 * yet taken), growing the ring if needed. Returns 0; -1 (not held) out of memory, for a
 * position below `next`, or for one already held. */
int lt__reorder_put(lt_reorder_t *r, uint64_t pos, uint64_t next, void *item);

/* lt__reorder_take removes and returns the item at position `pos`, or NULL when none is
 * held there. */
void *lt__reorder_take(lt_reorder_t *r, uint64_t pos);

/* lt__reorder_pop removes and returns any item held, NULL when empty (to drain it). */
void *lt__reorder_pop(lt_reorder_t *r);

/* lt__reorder_free frees the ring (not the items: drain them first). */
void lt__reorder_free(lt_reorder_t *r);

#endif
