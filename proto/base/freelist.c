/* freelist.c: objects of one size kept for reuse (freelist.h). One thread per list. */
#include "freelist.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define LT_FREELIST_KEEP 0 /* every object its own allocation: ASan sees every misuse */
#else
#define LT_FREELIST_KEEP 1
#endif

void *lt__freelist_get(lt_freelist_t *fl) {
  void *p = fl->head;
  if (p == NULL) return calloc(1, fl->size);
  memcpy(&fl->head, p, sizeof fl->head);
  fl->n--;
  memset(p, 0, fl->size);
  return p;
}

void lt__freelist_put(lt_freelist_t *fl, void *p) {
  if (p == NULL) return;
  if (!LT_FREELIST_KEEP || fl->n >= fl->max || fl->size < sizeof fl->head) {
    free(p);
    return;
  }
  memcpy(p, &fl->head, sizeof fl->head);
  fl->head = p;
  fl->n++;
}

void lt__freelist_clear(lt_freelist_t *fl) {
  while (fl->head != NULL) {
    void *p = fl->head;
    memcpy(&fl->head, p, sizeof fl->head);
    free(p);
  }
  fl->n = 0;
}
