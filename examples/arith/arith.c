/* examples/arith/arith.c: the `arith` kernel module, integer kernels for examples, tests and
 * benchmarks. Every token is one little-endian int64 (8 bytes); overflow and bad sizes fail
 * the call with a message instead of wrapping. Kernels run on a server worker thread (or the
 * client's, in local mode) and touch nothing but their own call. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

#define TOKEN_SIZE 8

/* Decimal parameters are copied into a bounded buffer to be NUL-terminated. */
#define PARAM_MAX 32

static int64_t load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = TOKEN_SIZE - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return (int64_t)v;
}

static void store_le64(unsigned char *p, int64_t value) {
  uint64_t v = (uint64_t)value;
  for (int i = 0; i < TOKEN_SIZE; i++) {
    p[i] = (unsigned char)(v & 0xff);
    v >>= 8;
  }
}

/* read_one reads the single int64 input into *x, or fails the call. The runtime prefixes
 * failure messages with the kernel's name. */
static int read_one(lt_call_t *call, int64_t *x) {
  int n = lt_call_ninputs(call);
  if (n != 1) return lt_call_fail(call, "expects 1 input, got %d", n);
  size_t len = 0;
  const unsigned char *p = lt_call_input(call, 0, &len);
  if (p == NULL || len != TOKEN_SIZE)
    return lt_call_fail(call, "input must be %d bytes (little-endian int64), got %zu", TOKEN_SIZE,
                        len);
  *x = load_le64(p);
  return 0;
}

/* write_one makes the single int64 output. */
static int write_one(lt_call_t *call, int64_t value) {
  unsigned char *out = lt_call_output(call, TOKEN_SIZE);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  store_le64(out, value);
  return 0;
}

/* square: x -> x * x. */
LT_KERNEL(square, call) {
  int64_t x, r;
  int rc = read_one(call, &x);
  if (rc != 0) return rc;
  if (__builtin_mul_overflow(x, x, &r))
    return lt_call_fail(call, "%" PRId64 " squared overflows int64", x);
  return write_one(call, r);
}

/* inc: x -> x + 1. */
LT_KERNEL(inc, call) {
  int64_t x, r;
  int rc = read_one(call, &x);
  if (rc != 0) return rc;
  if (__builtin_add_overflow(x, (int64_t)1, &r))
    return lt_call_fail(call, "%" PRId64 " + 1 overflows int64", x);
  return write_one(call, r);
}

/* add: x -> x + k, where the parameter (lt_seq_with) is k in decimal text, e.g. "-12". */
LT_KERNEL(add, call) {
  int64_t x, r;
  int rc = read_one(call, &x);
  if (rc != 0) return rc;
  size_t plen = 0;
  const char *param = lt_call_param(call, &plen);
  if (param == NULL || plen == 0)
    return lt_call_fail(call, "needs a decimal parameter (lt_seq_with)");
  if (plen >= PARAM_MAX) return lt_call_fail(call, "parameter too long (%zu bytes)", plen);
  char text[PARAM_MAX];
  memcpy(text, param, plen);
  text[plen] = '\0';
  char *end = NULL;
  errno = 0;
  long long k = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || strlen(text) != plen)
    return lt_call_fail(call, "parameter is not a decimal int64: \"%s\"", text);
  if (__builtin_add_overflow(x, (int64_t)k, &r))
    return lt_call_fail(call, "%" PRId64 " + %lld overflows int64", x, k);
  return write_one(call, r);
}

/* collatz: x -> the number of Collatz steps from x down to 1 (x >= 1). A small CPU-bound
 * kernel whose cost varies with x. */
LT_KERNEL(collatz, call) {
  int64_t x;
  int rc = read_one(call, &x);
  if (rc != 0) return rc;
  if (x < 1) return lt_call_fail(call, "input must be >= 1, got %" PRId64, x);
  uint64_t v = (uint64_t)x;
  int64_t steps = 0;
  while (v != 1) {
    if (v % 2 == 0) {
      v /= 2;
    } else {
      if (v > (UINT64_MAX - 1) / 3)
        return lt_call_fail(call, "sequence from %" PRId64 " overflows", x);
      v = 3 * v + 1;
    }
    steps++;
  }
  return write_one(call, steps);
}
