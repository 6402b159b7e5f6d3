/* msort.c: the `msort` kernel module, merge sort of int64 arrays by divide and conquer.
 * A task is a little-endian uint64 cut-off followed by the values (little-endian int64); a
 * task of at most cut-off values is sorted sequentially. A result is the sorted values alone.
 * The cut-off travels in the task because condition kernels take no parameter. Kernels run
 * on a server worker thread (or the client's, in local mode) and touch nothing but their own
 * call.
 *
 *   dc(msort:small, msort:halves, msort:sort, msort:merge) */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#include "bytes.h"

#define HEADER 8 /* the cut-off */
#define VALUE  8

typedef struct task {
  uint64_t cutoff;
  size_t count;
  const unsigned char *values; /* count little-endian int64, borrowed */
} task_t;

/* read_task reads and checks the single task input, or fails the call. */
static int read_task(lt_call_t *call, task_t *t) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "expects 1 input, got %d", k);
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (p == NULL || len < HEADER || (len - HEADER) % VALUE != 0)
    return lt_call_fail(
        call, "a task is a uint64 cut-off and int64 values (8 + 8k bytes), got %zu bytes", len);
  t->cutoff = ex_get_u64(p);
  if (t->cutoff == 0) return lt_call_fail(call, "the cut-off must be >= 1");
  t->count = (len - HEADER) / VALUE;
  t->values = p + HEADER;
  return 0;
}

/* small: the condition; a task of at most cut-off values is a base case. */
LT_KERNEL(small, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  return lt_call_answer(call, t.count <= t.cutoff);
}

/* emit_part makes one part: the cut-off and `count` values from `values`. */
static int emit_part(lt_call_t *call, uint64_t cutoff, const unsigned char *values, size_t count) {
  unsigned char *out = lt_call_output(call, HEADER + count * VALUE);
  if (out == NULL) return lt_call_fail(call, "out of memory for %zu values", count);
  ex_put_u64(out, cutoff);
  memcpy(out + HEADER, values, count * VALUE);
  return 0;
}

/* halves: the divide; the first half (the shorter one) and the second half. */
LT_KERNEL(halves, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  if (t.count < 2) return lt_call_fail(call, "%zu values cannot be halved", t.count);
  size_t first = t.count / 2;
  rc = emit_part(call, t.cutoff, t.values, first);
  return rc != 0 ? rc : emit_part(call, t.cutoff, t.values + first * VALUE, t.count - first);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* sort: the base case, the values sorted sequentially (qsort). */
LT_KERNEL(sort, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  int64_t *v = malloc(t.count ? t.count * sizeof *v : 1);
  unsigned char *out = lt_call_output(call, t.count * VALUE);
  if (v == NULL || (out == NULL && t.count > 0)) {
    free(v);
    return lt_call_fail(call, "out of memory for %zu values", t.count);
  }
  for (size_t i = 0; i < t.count; i++)
    v[i] = ex_get_i64(t.values + i * VALUE);
  qsort(v, t.count, sizeof *v, cmp_i64);
  for (size_t i = 0; i < t.count; i++)
    ex_put_i64(out + i * VALUE, v[i]);
  free(v);
  return 0;
}

/* read_sorted reads input `i` of msort:merge, which must be a sorted int64 array. */
static int read_sorted(lt_call_t *call, int i, const unsigned char **p, size_t *count) {
  size_t len = 0;
  *p = lt_call_input(call, i, &len);
  if (len % VALUE != 0)
    return lt_call_fail(call, "input %d has %zu bytes, not a multiple of %d", i, len, VALUE);
  *count = len / VALUE;
  for (size_t j = 1; j < *count; j++)
    if (ex_get_i64(*p + (j - 1) * VALUE) > ex_get_i64(*p + j * VALUE))
      return lt_call_fail(call, "input %d is not sorted at index %zu", i, j);
  return 0;
}

/* merge: the combine; the two sorted halves merged into one sorted array. */
LT_KERNEL(merge, call) {
  int k = lt_call_ninputs(call);
  if (k != 2) return lt_call_fail(call, "expects 2 inputs, got %d", k);
  const unsigned char *a, *b;
  size_t na, nb;
  int rc = read_sorted(call, 0, &a, &na);
  if (rc == 0) rc = read_sorted(call, 1, &b, &nb);
  if (rc != 0) return rc;
  unsigned char *out = lt_call_output(call, (na + nb) * VALUE);
  if (out == NULL && na + nb > 0)
    return lt_call_fail(call, "out of memory for %zu values", na + nb);
  size_t i = 0, j = 0, o = 0;
  while (i < na && j < nb) {
    /* Taking from the first half on ties keeps the merge stable. */
    if (ex_get_i64(b + j * VALUE) < ex_get_i64(a + i * VALUE))
      memcpy(out + VALUE * o++, b + VALUE * j++, VALUE);
    else
      memcpy(out + VALUE * o++, a + VALUE * i++, VALUE);
  }
  if (i < na) {
    memcpy(out + VALUE * o, a + VALUE * i, (na - i) * VALUE);
  } else if (j < nb) {
    memcpy(out + VALUE * o, b + VALUE * j, (nb - j) * VALUE);
  }
  return 0;
}
