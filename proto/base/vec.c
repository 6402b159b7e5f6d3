/* vec.c: the growable array (see vec.h): the size arithmetic, checked before it multiplies,
 * and the one realloc. The array's pointer is read and written through memcpy, so any object
 * pointer type can be passed by address. Knows nothing of what the elements are. */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>

#define FIRST_CAP 8

/* grown returns the capacity that holds `need`: `cap` doubled (from FIRST_CAP) until it does,
 * or `need` itself when doubling would overflow. */
static size_t grown(size_t cap, size_t need) {
  size_t n = cap > 0 ? cap : FIRST_CAP;
  while (n < need)
    n = n <= SIZE_MAX / 2 ? n * 2 : need;
  return n;
}

int lt__vec_resize(void *pptr, size_t old, size_t n, size_t elem) {
  void *p;
  memcpy(&p, pptr, sizeof p);
  if (n == 0) {
    free(p);
    p = NULL;
    memcpy(pptr, &p, sizeof p);
    return LT_OK;
  }
  /* No object can be larger than PTRDIFF_MAX; refuse without asking realloc. */
  if (elem == 0 || n > (size_t)PTRDIFF_MAX / elem) return LT_ENOMEM;
  void *q = realloc(p, n * elem);
  if (q == NULL) return LT_ENOMEM;
  if (n > old) memset((char *)q + old * elem, 0, (n - old) * elem);
  memcpy(pptr, &q, sizeof q);
  return LT_OK;
}

int lt__vec_reserve(void *pptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return LT_OK;
  size_t n = grown(*cap, need);
  int rc = lt__vec_resize(pptr, *cap, n, elem);
  if (rc == LT_OK) *cap = n;
  return rc;
}
