/* fibo.c: the `fibo` kernel module, Fibonacci numbers by divide and conquer with a
 * sequential cut-off. A task is 16 bytes, two little-endian int64: n (0..92, so fib(n) fits
 * an int64) and the cut-off (a task with n < cut-off is solved sequentially); a result is
 * fib(n) as one little-endian int64. Kernels run on a server worker thread (or the client's,
 * in local mode) and touch nothing but their own call.
 *
 *   dc(fibo:small, fibo:divide, fibo:seq, fibo:add) */
#include <inttypes.h>
#include <stdint.h>

#include <lithium/kernel.h>

#include "bytes.h"

#define TASK_SIZE   16
#define RESULT_SIZE 8
#define MAX_N       92 /* fib(92) is the largest Fibonacci number in an int64 */
#define MAX_SEQ_N   45 /* the naive recursion makes about 2 * fib(n) calls */

typedef struct task {
  int64_t n, cutoff;
} task_t;

/* read_task reads and checks the single task input, or fails the call. */
static int read_task(lt_call_t *call, task_t *t) {
  int k = lt_call_ninputs(call);
  if (k != 1) return lt_call_fail(call, "expects 1 input, got %d", k);
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (p == NULL || len != TASK_SIZE)
    return lt_call_fail(call, "a task is %d bytes (int64 n, int64 cut-off, little-endian), got %zu",
                        TASK_SIZE, len);
  t->n = ex_get_i64(p);
  t->cutoff = ex_get_i64(p + 8);
  if (t->n < 0 || t->n > MAX_N)
    return lt_call_fail(call, "n must be in 0..%d, got %" PRId64, MAX_N, t->n);
  if (t->cutoff < 0) return lt_call_fail(call, "the cut-off must be >= 0, got %" PRId64, t->cutoff);
  return 0;
}

/* emit_task makes one output task (n, cutoff). */
static int emit_task(lt_call_t *call, int64_t n, int64_t cutoff) {
  unsigned char *out = lt_call_output(call, TASK_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  ex_put_i64(out, n);
  ex_put_i64(out + 8, cutoff);
  return 0;
}

/* small: the condition; a task is a base case when n < cut-off (or n < 2, which cannot be
 * divided). */
LT_KERNEL(small, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  return lt_call_answer(call, t.n < t.cutoff || t.n < 2);
}

/* divide: (n, c) -> (n - 1, c), (n - 2, c). */
LT_KERNEL(divide, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  if (t.n < 2) return lt_call_fail(call, "n = %" PRId64 " cannot be divided", t.n);
  rc = emit_task(call, t.n - 1, t.cutoff);
  return rc != 0 ? rc : emit_task(call, t.n - 2, t.cutoff);
}

static int64_t fib(int64_t n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

/* seq: the base case, fib(n) by the naive recursion (the work the dc spreads). */
LT_KERNEL(seq, call) {
  task_t t;
  int rc = read_task(call, &t);
  if (rc != 0) return rc;
  if (t.n > MAX_SEQ_N)
    return lt_call_fail(call,
                        "n = %" PRId64 " is too big for the sequential recursion "
                        "(at most %d); use a cut-off <= %d",
                        t.n, MAX_SEQ_N, MAX_SEQ_N + 1);
  unsigned char *out = lt_call_output(call, RESULT_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  ex_put_i64(out, fib(t.n));
  return 0;
}

/* add: the combine, fib(n - 1) + fib(n - 2) from the two parts' results. */
LT_KERNEL(add, call) {
  int k = lt_call_ninputs(call);
  if (k != 2) return lt_call_fail(call, "expects 2 inputs, got %d", k);
  int64_t sum = 0;
  for (int i = 0; i < k; i++) {
    size_t len = 0;
    const unsigned char *p = lt_call_input(call, i, &len);
    if (p == NULL || len != RESULT_SIZE)
      return lt_call_fail(call, "input %d must be %d bytes (int64), got %zu", i, RESULT_SIZE, len);
    int64_t x = ex_get_i64(p);
    if (x < 0) return lt_call_fail(call, "input %d is negative: %" PRId64, i, x);
    if (__builtin_add_overflow(sum, x, &sum)) return lt_call_fail(call, "the sum overflows int64");
  }
  unsigned char *out = lt_call_output(call, RESULT_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  ex_put_i64(out, sum);
  return 0;
}
