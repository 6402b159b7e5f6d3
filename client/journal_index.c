/* journal_index.c: the sorted index of a journal's records (journal_index.h). A plain array
 * grown by doubling (realloc moves large blocks by remapping pages, not by copying), sorted
 * by heapsort, which needs no scratch memory: qsort may allocate a copy of the whole array,
 * twice the index at the peak. Knows nothing of files. */
#include "journal_index.h"

#include <stdlib.h>

#include <lithium/error.h>

int lt__jidx_add(lt_jidx_t *x, uint64_t key, uint64_t off) {
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 1024;
    lt_jidx_entry_t *v = realloc(x->v, cap * sizeof *v);
    if (v == NULL) return LT_ENOMEM;
    x->v = v;
    x->cap = cap;
  }
  x->v[x->n++] = (lt_jidx_entry_t){key, off};
  return LT_OK;
}

static int less(const lt_jidx_entry_t *a, const lt_jidx_entry_t *b) {
  return a->key < b->key || (a->key == b->key && a->off < b->off);
}

/* sift_down restores the max-heap below position `i` of v[0..n). */
static void sift_down(lt_jidx_entry_t *v, size_t i, size_t n) {
  for (;;) {
    size_t big = i, l = 2 * i + 1, r = l + 1;
    if (l < n && less(&v[big], &v[l])) big = l;
    if (r < n && less(&v[big], &v[r])) big = r;
    if (big == i) return;
    lt_jidx_entry_t t = v[i];
    v[i] = v[big];
    v[big] = t;
    i = big;
  }
}

void lt__jidx_seal(lt_jidx_t *x) {
  size_t n = x->n;
  for (size_t i = n / 2; i-- > 0;)
    sift_down(x->v, i, n);
  for (size_t end = n; end > 1; end--) {
    lt_jidx_entry_t t = x->v[0];
    x->v[0] = x->v[end - 1];
    x->v[end - 1] = t;
    sift_down(x->v, 0, end - 1);
  }
  if (n > 0 && n < x->cap) {
    lt_jidx_entry_t *v = realloc(x->v, n * sizeof *v);
    if (v != NULL) {
      x->v = v;
      x->cap = n;
    }
  }
}

size_t lt__jidx_first(const lt_jidx_t *x, uint64_t key) {
  size_t lo = 0, hi = x->n; /* the first entry with key >= `key` is in [lo, hi] */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (x->v[mid].key < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < x->n && x->v[lo].key == key ? lo : x->n;
}

void lt__jidx_clear(lt_jidx_t *x) {
  free(x->v);
  x->v = NULL;
  x->n = x->cap = 0;
}
