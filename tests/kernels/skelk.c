/* skelk.c: the kernel module "skelk": kernels for map and divide-and-conquer tests and for
 * the generated-program test. Values are byte strings unless said otherwise; int64 values
 * are 8 bytes little-endian. Every kernel is deterministic and keeps no state.
 *
 *   rev        1 input; output: its bytes reversed.
 *   xor        1 input; param: one byte; output: every byte xor param.
 *   app        1 input; output: input followed by the param bytes.
 *   chunks     split: the input cut into chunks of 3 bytes (param: another size as decimal
 *              text); an empty input makes 0 parts.
 *   halves     split / divide: 2 parts, the first and second half (first gets the shorter).
 *   cat        merge / combine: all inputs concatenated in order (0 inputs: empty output).
 *   small      condition: answers len(input) <= param (decimal text, default 1).
 *   long       condition: answers len(input) > param (decimal text, default 1).
 *   shrink     1 input; output: the input without its first byte (empty stays empty).
 *   cat2       combine of a reduce: the 2 inputs concatenated; fails on any other count,
 *              so a test sees that a reduce combines pairs.
 *   fail_on    1 input; fails with "fail_on: found <byte>" when the input holds the param
 *              byte, else copies it.
 *   fib_cut    condition on int64 n: n < param (decimal text).
 *   fib_div    divide int64 n into n-1 and n-2.
 *   fib_seq    int64 n -> fib(n), computed sequentially.
 *   add        combine: the sum of int64 inputs.
 *   fill       split: int64 n -> 2 parts of n bytes, byte i of part k being
 *              skelk_fill_byte(i, k) (large values made on one server).
 *   csum       1 input; output: int64, the sum of byte i times (i % 13 + 1), so that a
 *              byte out of place changes it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

static int64_t get_i64(const void *p) {
  const unsigned char *b = p;
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = (x << 8) | b[i];
  return (int64_t)x;
}

static void put_i64(void *p, int64_t v) {
  unsigned char *b = p;
  uint64_t x = (uint64_t)v;
  for (int i = 0; i < 8; i++, x >>= 8)
    b[i] = (unsigned char)(x & 0xff);
}

/* param_num reads the decimal parameter, or `dflt` when there is none. */
static long param_num(lt_call_t *call, long dflt) {
  size_t len;
  const char *p = lt_call_param(call, &len);
  if (p == NULL || len == 0 || len > 20) return dflt;
  char buf[21];
  memcpy(buf, p, len);
  buf[len] = '\0';
  return strtol(buf, NULL, 10);
}

static const unsigned char *input1(lt_call_t *call, const char *k, size_t *len) {
  if (lt_call_ninputs(call) != 1) {
    lt_call_fail(call, "%s: expected 1 input, got %d", k, lt_call_ninputs(call));
    return NULL;
  }
  const unsigned char *in = lt_call_input(call, 0, len);
  return in != NULL ? in : (const unsigned char *)"";
}

static int emit(lt_call_t *call, const void *data, size_t len) {
  unsigned char *out = lt_call_output(call, len);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  if (len > 0) memcpy(out, data, len);
  return 0;
}

LT_KERNEL(rev, call) {
  size_t n;
  const unsigned char *in = input1(call, "rev", &n);
  if (in == NULL) return 1;
  unsigned char *out = lt_call_output(call, n);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  for (size_t i = 0; i < n; i++)
    out[i] = in[n - 1 - i];
  return 0;
}

LT_KERNEL(xor, call) {
  size_t n, plen;
  const unsigned char *in = input1(call, "xor", &n);
  const unsigned char *p = lt_call_param(call, &plen);
  if (in == NULL) return 1;
  if (plen != 1) return lt_call_fail(call, "xor: param must be 1 byte, got %zu", plen);
  unsigned char *out = lt_call_output(call, n);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  for (size_t i = 0; i < n; i++)
    out[i] = in[i] ^ p[0];
  return 0;
}

LT_KERNEL(app, call) {
  size_t n, plen;
  const unsigned char *in = input1(call, "app", &n);
  const unsigned char *p = lt_call_param(call, &plen);
  if (in == NULL) return 1;
  unsigned char *out = lt_call_output(call, n + plen);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  if (n) memcpy(out, in, n);
  if (plen) memcpy(out + n, p, plen);
  return 0;
}

LT_KERNEL(chunks, call) {
  size_t n;
  const unsigned char *in = input1(call, "chunks", &n);
  if (in == NULL) return 1;
  long size = param_num(call, 3);
  if (size <= 0) return lt_call_fail(call, "chunks: chunk size must be > 0");
  for (size_t off = 0; off < n; off += (size_t)size) {
    size_t len = n - off < (size_t)size ? n - off : (size_t)size;
    if (emit(call, in + off, len) != 0) return 1;
  }
  return 0;
}

LT_KERNEL(halves, call) {
  size_t n;
  const unsigned char *in = input1(call, "halves", &n);
  if (in == NULL) return 1;
  if (emit(call, in, n / 2) != 0) return 1;
  return emit(call, in + n / 2, n - n / 2);
}

LT_KERNEL(cat, call) {
  int k = lt_call_ninputs(call);
  size_t total = 0;
  for (int i = 0; i < k; i++) {
    size_t len;
    lt_call_input(call, i, &len);
    total += len;
  }
  unsigned char *out = lt_call_output(call, total);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  for (int i = 0; i < k; i++) {
    size_t len;
    const void *in = lt_call_input(call, i, &len);
    if (len) memcpy(out, in, len);
    out += len;
  }
  return 0;
}

LT_KERNEL(small, call) {
  size_t n;
  if (input1(call, "small", &n) == NULL) return 1;
  return lt_call_answer(call, n <= (size_t)param_num(call, 1));
}

LT_KERNEL(long, call) {
  size_t n;
  if (input1(call, "long", &n) == NULL) return 1;
  return lt_call_answer(call, n > (size_t)param_num(call, 1));
}

LT_KERNEL(shrink, call) {
  size_t n;
  const unsigned char *in = input1(call, "shrink", &n);
  if (in == NULL) return 1;
  return emit(call, in + (n > 0), n - (n > 0));
}

LT_KERNEL(cat2, call) {
  if (lt_call_ninputs(call) != 2)
    return lt_call_fail(call, "cat2: got %d inputs, expected 2", lt_call_ninputs(call));
  return lt_kernel_cat(call);
}

LT_KERNEL(fail_on, call) {
  size_t n, plen;
  const unsigned char *in = input1(call, "fail_on", &n);
  const unsigned char *p = lt_call_param(call, &plen);
  if (in == NULL) return 1;
  if (plen == 1 && memchr(in, p[0], n) != NULL)
    return lt_call_fail(call, "fail_on: found %c", p[0]);
  return emit(call, in, n);
}

static const void *int_input(lt_call_t *call, const char *k) {
  size_t len;
  const void *in = input1(call, k, &len);
  if (in == NULL) return NULL;
  if (len != 8) {
    lt_call_fail(call, "%s: expected 8 bytes, got %zu", k, len);
    return NULL;
  }
  return in;
}

LT_KERNEL(fib_cut, call) {
  const void *in = int_input(call, "fib_cut");
  if (in == NULL) return 1;
  return lt_call_answer(call, get_i64(in) < param_num(call, 2));
}

LT_KERNEL(fib_div, call) {
  const void *in = int_input(call, "fib_div");
  if (in == NULL) return 1;
  int64_t n = get_i64(in);
  unsigned char b[8];
  put_i64(b, n - 1);
  if (emit(call, b, 8) != 0) return 1;
  put_i64(b, n - 2);
  return emit(call, b, 8);
}

static int64_t fib(int64_t n) {
  return n < 2 ? (n < 0 ? 0 : n) : fib(n - 1) + fib(n - 2);
}

LT_KERNEL(fib_seq, call) {
  const void *in = int_input(call, "fib_seq");
  if (in == NULL) return 1;
  unsigned char b[8];
  put_i64(b, fib(get_i64(in)));
  return emit(call, b, 8);
}

LT_KERNEL(add, call) {
  int64_t sum = 0;
  for (int i = 0; i < lt_call_ninputs(call); i++) {
    size_t len;
    const void *in = lt_call_input(call, i, &len);
    if (len != 8) return lt_call_fail(call, "add: input %d has %zu bytes, expected 8", i, len);
    sum += get_i64(in);
  }
  unsigned char b[8];
  put_i64(b, sum);
  return emit(call, b, 8);
}

/* The bytes of fill's parts: tests compute the same. */
static unsigned char skelk_fill_byte(uint64_t i, int part) {
  return (unsigned char)(i % 251 + (uint64_t)part);
}

LT_KERNEL(fill, call) {
  const void *in = int_input(call, "fill");
  if (in == NULL) return 1;
  int64_t n = get_i64(in);
  if (n < 0) return lt_call_fail(call, "fill: negative size %lld", (long long)n);
  for (int k = 0; k < 2; k++) {
    unsigned char *out = lt_call_output(call, (size_t)n);
    if (out == NULL && n > 0) return lt_call_fail(call, "fill: out of memory");
    for (uint64_t i = 0; i < (uint64_t)n; i++)
      out[i] = skelk_fill_byte(i, k);
  }
  return 0;
}

LT_KERNEL(csum, call) {
  size_t n;
  const unsigned char *in = input1(call, "csum", &n);
  if (in == NULL) return 1;
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (uint64_t)in[i] * (i % 13 + 1);
  unsigned char b[8];
  put_i64(b, (int64_t)sum);
  return emit(call, b, 8);
}
