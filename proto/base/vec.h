/* vec.h: the growable array. Its pointer, length and capacity stay plain fields of the owner
 * (git's ALLOC_GROW), named as the owner likes, so readers index `p[i]` and arrays that grow
 * together may share one length or one capacity. The macros take the type from the pointer
 * and evaluate their arguments more than once: pass plain lvalues. Room first made is zeroed;
 * clearing is setting the length to 0, which keeps the memory for reuse. The caller locks. */
#ifndef LT_VEC_H
#define LT_VEC_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* lt__vec_reserve makes the array whose pointer is at `pptr` (elements of `elem` bytes, `*cap`
 * of them allocated) hold at least `need`, doubling the capacity from 8 and zeroing the new
 * room. LT_OK, or LT_ENOMEM when the size overflows or memory runs out, the array and `*cap`
 * then unchanged. */
int lt__vec_reserve(void *pptr, size_t *cap, size_t need, size_t elem);

/* lt__vec_resize makes the array at `pptr` (`old` elements of `elem` bytes allocated) hold
 * exactly `n`, zeroing the elements past `old`; n = 0 frees it and leaves NULL. LT_OK, or
 * LT_ENOMEM when the size overflows or memory runs out, the array then unchanged. */
int lt__vec_resize(void *pptr, size_t old, size_t n, size_t elem);

/* LT_VEC_RESERVE makes the array `ptr` with capacity `cap` (a size_t) hold `need` elements:
 * LT_VEC_RESERVE(b->items, b->cap, b->n + 1). Evaluates to LT_OK or LT_ENOMEM. */
#define LT_VEC_RESERVE(ptr, cap, need) lt__vec_reserve(&(ptr), &(cap), (need), sizeof *(ptr))

/* LT_VEC_PUSH appends a zeroed element to the array (ptr, len, cap) and evaluates to a
 * pointer to it (its index is then len - 1), or to NULL when out of memory. */
#define LT_VEC_PUSH(ptr, len, cap)                                                                 \
  (LT_VEC_RESERVE(ptr, cap, (size_t)(len) + 1) == 0                                                \
       ? (memset(&(ptr)[len], 0, sizeof *(ptr)), &(ptr)[(len)++])                                  \
       : NULL)

/* LT_VEC_RESIZE sets arrays that share one capacity: each is resized from the old capacity
 * `old` to `n` before the shared capacity is stored. Evaluates to LT_OK or LT_ENOMEM. */
#define LT_VEC_RESIZE(ptr, old, n) lt__vec_resize(&(ptr), (old), (n), sizeof *(ptr))

/* LT_VEC_FREE frees the array (ptr, len, cap) and leaves it empty. */
#define LT_VEC_FREE(ptr, len, cap)                                                                 \
  do {                                                                                             \
    free(ptr);                                                                                     \
    (ptr) = NULL;                                                                                  \
    (len) = 0;                                                                                     \
    (cap) = 0;                                                                                     \
  } while (0)

#endif
