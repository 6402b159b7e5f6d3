/* reorder.c: a reorder buffer (reorder.h): a ring of slots by position modulo its size. Every
 * held position lies in [next, next + cap), so each has a slot of its own. */
#include <stdlib.h>

#include "reorder.h"

#define REORDER_FIRST 64 /* slots of a new ring: a reader that keeps up needs a few */

int lt__reorder_reserve(lt_reorder_t *r, uint64_t pos, uint64_t next) {
  if (pos < next) return -1;
  if (pos - next < r->cap) return 0;
  size_t cap = r->cap > 0 ? r->cap : REORDER_FIRST;
  while (pos - next >= cap) {
    if (cap > SIZE_MAX / 2 / sizeof *r->slots) return -1;
    cap *= 2;
  }
  lt_reorder_slot_t *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return -1;
  for (size_t i = 0; i < r->cap; i++)
    if (r->slots[i].item != NULL) slots[r->slots[i].pos & (cap - 1)] = r->slots[i];
  free(r->slots);
  r->slots = slots;
  r->cap = cap;
  return 0;
}

int lt__reorder_put(lt_reorder_t *r, uint64_t pos, uint64_t next, void *item) {
  if (item == NULL || lt__reorder_reserve(r, pos, next) != 0) return -1;
  lt_reorder_slot_t *sl = &r->slots[pos & (r->cap - 1)];
  if (sl->item != NULL) return -1; /* held already, or one below `next` never taken */
  *sl = (lt_reorder_slot_t){pos, item};
  r->n++;
  return 0;
}

void *lt__reorder_take(lt_reorder_t *r, uint64_t pos) {
  if (r->n == 0) return NULL;
  lt_reorder_slot_t *sl = &r->slots[pos & (r->cap - 1)];
  if (sl->item == NULL || sl->pos != pos) return NULL;
  void *item = sl->item;
  sl->item = NULL;
  r->n--;
  return item;
}

void *lt__reorder_pop(lt_reorder_t *r) {
  for (size_t i = 0; i < r->cap && r->n > 0; i++)
    if (r->slots[i].item != NULL) return lt__reorder_take(r, r->slots[i].pos);
  return NULL;
}

void lt__reorder_free(lt_reorder_t *r) {
  free(r->slots);
  *r = LT_REORDER_INIT;
}
