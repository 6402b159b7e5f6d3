/* freelist.h: objects of one size kept for reuse instead of being freed (STYLE 27): a hot
 * path that makes and drops an object per task takes it from here, zeroed as calloc would,
 * and gives it back. At most `max` are kept; the rest are freed. Under AddressSanitizer
 * (__SANITIZE_ADDRESS__) nothing is kept, every object is calloc'd and freed, so that a use
 * after its end is still seen. One thread per list (its owner's). */
#ifndef LT_FREELIST_H
#define LT_FREELIST_H

#include <stddef.h>

typedef struct lt_freelist {
  void *head;  /* kept objects, each starting with the next one's address */
  size_t size; /* of an object (at least a pointer's) */
  size_t n;    /* kept */
  size_t max;  /* kept at most */
} lt_freelist_t;

/* LT_FREELIST_INIT(size, max) is a list of objects of `size` bytes keeping at most `max`. */
#define LT_FREELIST_INIT(sz, mx) ((lt_freelist_t){.head = NULL, .size = (sz), .n = 0, .max = (mx)})

/* lt__freelist_get returns a zeroed object (kept, or new); NULL when out of memory. */
void *lt__freelist_get(lt_freelist_t *fl);

/* lt__freelist_put gives object p (from lt__freelist_get) back; accepts NULL. */
void lt__freelist_put(lt_freelist_t *fl, void *p);

/* lt__freelist_clear frees every kept object. */
void lt__freelist_clear(lt_freelist_t *fl);

#endif
