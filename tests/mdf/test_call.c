/* test_call.c: running kernels through lt__call_t: inputs, parameter, outputs (none, one,
 * several, empty), answers, failures with the kernel's message or "kernel returned N",
 * out-of-memory outputs, and outputs made from inputs (lt_call_output_from_input: in place
 * when granted, else copied, also on a runtime of ABI 1). Kernels come from testk (LT_TEST_MODULES)
 * or are defined here. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium/error.h>

#include "bufpool.h"
#include "call.h"
#include "module.h"

/* Asking malloc for 64 TiB must give NULL, not an ASan (or TSan) report. The sanitizer
 * runtime looks these hooks up dynamically, so they must be visible despite
 * -fvisibility=hidden. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1";
}
__attribute__((visibility("default"))) const char *__tsan_default_options(void);
const char *__tsan_default_options(void) {
  return "allocator_may_return_null=1";
}

static lt_modules_t *mods;

static void setup(void) {
  cr_assert_eq(lt__modules_new(&mods), LT_OK);
  cr_assert_eq(lt__modules_add_dir(mods, LT_TEST_MODULES), LT_OK);
}

static void teardown(void) {
  lt__modules_free(mods);
}

static lt_kernel_fn kernel(const char *name) {
  lt_kernel_fn fn = NULL;
  char err[512];
  cr_assert_eq(lt__modules_resolve(mods, name, &fn, err, sizeof err), LT_OK, "%s", err);
  return fn;
}

static lt_bytes_t bytes(const void *data, size_t len) {
  return (lt_bytes_t){data, len};
}

static lt_bytes_t i64(int64_t *x) {
  return bytes(x, sizeof *x);
}

/* take returns output i as a NUL-terminated string (caller frees). */
static char *take_str(lt__call_t *c, uint32_t i, size_t *len) {
  void *data;
  lt__call_take_output(c, i, &data, len);
  cr_assert_not_null(data);
  char *s = malloc(*len + 1);
  memcpy(s, data, *len);
  s[*len] = '\0';
  lt__bufpool_free(data);
  return s;
}

static int64_t take_i64(lt__call_t *c, uint32_t i) {
  void *data;
  size_t len;
  lt__call_take_output(c, i, &data, &len);
  cr_assert_eq(len, 8);
  int64_t x;
  memcpy(&x, data, 8);
  lt__bufpool_free(data);
  return x;
}

TestSuite(call, .init = setup, .fini = teardown);

Test(call, ops_table) {
  lt__call_t c;
  lt_bytes_t in[2] = {bytes("ab", 2), bytes(NULL, 0)};
  lt__call_init(&c, in, 2, bytes("p", 1));
  lt_call_t *pub = &c.pub;
  cr_assert_eq(pub->ops->abi, LT_KERNEL_ABI);
  cr_assert_eq(lt_call_ninputs(pub), 2);
  size_t len = 99;
  cr_assert_eq(lt_call_input(pub, 0, &len), in[0].data);
  cr_assert_eq(len, 2);
  cr_assert_not_null(lt_call_input(pub, 1, &len), "an empty input is not a missing one");
  cr_assert_eq(len, 0);
  len = 99;
  cr_assert_null(lt_call_input(pub, 2, &len));
  cr_assert_eq(len, 0);
  cr_assert_null(lt_call_input(pub, -1, &len));
  cr_assert_null(lt_call_input(pub, 0x7fffffff, NULL));
  cr_assert_eq(lt_call_param(pub, &len), c.param.data);
  cr_assert_eq(len, 1);
  cr_assert_eq(c.answer, -1);
  cr_assert_eq(c.noutputs, 0);
  cr_assert_str_eq(c.errmsg, "");
  lt__call_clear(&c);
}

Test(call, echo_and_upper) {
  lt_bytes_t in = bytes("Hello, world", 12);
  lt__call_t c;
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:echo")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 1);
  size_t len;
  char *s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "Hello, world");
  free(s);
  lt__call_clear(&c);

  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:upper")), LT_OK, "%s", c.errmsg);
  s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "HELLO, WORLD");
  free(s);
  lt__call_clear(&c);
}

Test(call, int_kernels) {
  int64_t x = 41, neg = -7, big = INT64_C(1) << 40;
  lt_bytes_t in = i64(&x);
  lt__call_t c;
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:inc")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(take_i64(&c, 0), 42);
  lt__call_clear(&c);

  in = i64(&neg);
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:dbl")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(take_i64(&c, 0), -14);
  lt__call_clear(&c);

  in = i64(&big);
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:neg_fails")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(take_i64(&c, 0), big);
  lt__call_clear(&c);
}

Test(call, kernel_failure_messages) {
  struct {
    const char *kernel;
    lt_bytes_t in;
    uint32_t nin;
    const char *want;
  } cases[] = {
      {"testk:inc", bytes("abc", 3), 1, "inc: expected 8 bytes, got 3"},
      {"testk:inc", bytes("abc", 3), 0, "inc: expected 1 input, got 0"},
      {"testk:dbl", bytes("123456789", 9), 1, "dbl: expected 8 bytes, got 9"},
      {"testk:neg_fails", bytes("\xfb\xff\xff\xff\xff\xff\xff\xff", 8), 1, "negative input -5"},
      {"testk:fail", bytes("x", 1), 1, "fail: asked to fail"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lt__call_t c;
    lt__call_init(&c, &cases[i].in, cases[i].nin, bytes(NULL, 0));
    cr_assert_eq(lt__call_run(&c, kernel(cases[i].kernel)), LT_EKERNEL, "%s", cases[i].kernel);
    cr_assert_str_eq(c.errmsg, cases[i].want);
    cr_assert_eq(c.noutputs, 0);
    lt__call_clear(&c);
  }
}

Test(call, concat_inputs) {
  lt_bytes_t in[4] = {bytes("ab", 2), bytes("", 0), bytes("cde", 3), bytes("f", 1)};
  lt__call_t c;
  lt__call_init(&c, in, 4, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:concat")), LT_OK, "%s", c.errmsg);
  size_t len;
  char *s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "abcdef");
  free(s);
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:concat")), LT_OK, "%s", c.errmsg);
  void *data;
  lt__call_take_output(&c, 0, &data, &len);
  cr_assert_eq(len, 0);
  cr_assert_not_null(data);
  lt__bufpool_free(data);
  lt__call_clear(&c);
}

Test(call, param) {
  lt__call_t c;
  lt_bytes_t in = bytes("ignored", 7);
  lt__call_init(&c, &in, 1, bytes("the param", 9));
  cr_assert_eq(lt__call_run(&c, kernel("testk:param")), LT_OK, "%s", c.errmsg);
  size_t len;
  char *s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "the param");
  free(s);
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:param")), LT_OK, "%s", c.errmsg);
  void *data;
  lt__call_take_output(&c, 0, &data, &len);
  cr_assert_eq(len, 0);
  cr_assert_not_null(data, "a zero-length output still has a pointer");
  lt__bufpool_free(data);
  lt__call_clear(&c);
}

Test(call, sleep_and_spin) {
  lt__call_t c;
  lt_bytes_t in = bytes("z", 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  lt__call_init(&c, &in, 1, bytes("30", 2));
  cr_assert_eq(lt__call_run(&c, kernel("testk:sleep")), LT_OK, "%s", c.errmsg);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  cr_assert_geq(ms, 29.0, "slept %.1f ms", ms);
  size_t len;
  char *s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "z");
  free(s);
  lt__call_clear(&c);

  lt__call_init(&c, &in, 1, bytes("100000", 6));
  cr_assert_eq(lt__call_run(&c, kernel("testk:spin")), LT_OK, "%s", c.errmsg);
  s = take_str(&c, 0, &len);
  cr_assert_str_eq(s, "z");
  free(s);
  lt__call_clear(&c);

  static const char *const bad[] = {"", "abc", "-5", "12x", " 5", NULL};
  for (const char *const *p = bad; *p != NULL; p++) {
    lt__call_init(&c, &in, 1, bytes(*p, strlen(*p)));
    cr_assert_eq(lt__call_run(&c, kernel("testk:sleep")), LT_EKERNEL, "param '%s'", *p);
    cr_assert(strstr(c.errmsg, "sleep: parameter") != NULL, "%s", c.errmsg);
    lt__call_clear(&c);
  }
}

Test(call, arity) {
  lt__call_t c;
  lt_bytes_t in = bytes("xy", 2);
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:two")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 2);
  size_t len;
  for (uint32_t i = 0; i < 2; i++) {
    char *s = take_str(&c, i, &len);
    cr_assert_str_eq(s, "xy");
    free(s);
  }
  lt__call_clear(&c);

  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:none")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 0);
  lt__call_clear(&c);

  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:noop")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 1);
  void *data;
  lt__call_take_output(&c, 0, &data, &len);
  cr_assert_eq(len, 0);
  cr_assert_not_null(data);
  lt__bufpool_free(data);
  lt__call_clear(&c);
}

Test(call, answer) {
  int64_t pos = 3, zero = 0;
  lt_bytes_t in = i64(&pos);
  lt__call_t c;
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:positive")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.answer, 1);
  cr_assert_eq(c.noutputs, 0);
  lt__call_clear(&c);
  in = i64(&zero);
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:positive")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.answer, 0);
  lt__call_clear(&c);
}

/* Kernels defined here, called directly: the runtime's side of the contract. */

static int returns_seven(lt_call_t *call) {
  lt_call_output(call, 4);
  return 7;
}

static int fails_but_returns_zero(lt_call_t *call) {
  lt_call_fail(call, "first %d", 1);
  lt_call_fail(call, "second");
  return 0;
}

static int many_outputs(lt_call_t *call) {
  for (int i = 0; i < 1000; i++) {
    unsigned char *p = lt_call_output(call, (size_t)i);
    if (p == NULL) return lt_call_fail(call, "out of memory");
    memset(p, i & 0xff, (size_t)i);
  }
  return 0;
}

static int huge_output(lt_call_t *call) {
  lt_call_output(call, 1);
  if (lt_call_output(call, SIZE_MAX) != NULL) return lt_call_fail(call, "got SIZE_MAX bytes?");
  return 0; /* ignores the failure: the runtime must still report it */
}

static int huge_output_fails(lt_call_t *call) {
  if (lt_call_output(call, SIZE_MAX) == NULL) return lt_call_fail(call, "no memory for it");
  return 0;
}

/* Large enough that any malloc fails, small enough that malloc is asked. */
static int output_64tib(lt_call_t *call) {
  if (lt_call_output(call, (size_t)1 << 46) == NULL) return lt_call_fail(call, "no 64 TiB");
  return 0;
}

static int long_message(lt_call_t *call) {
  char msg[2000];
  memset(msg, 'a', sizeof msg - 1);
  msg[sizeof msg - 1] = '\0';
  return lt_call_fail(call, "%s", msg);
}

Test(call, kernel_returned_n) {
  lt__call_t c;
  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, returns_seven), LT_EKERNEL);
  cr_assert_str_eq(c.errmsg, "kernel returned 7");
  cr_assert_eq(c.noutputs, 0, "a failed call's outputs are dropped");
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, fails_but_returns_zero), LT_EKERNEL);
  cr_assert_str_eq(c.errmsg, "first 1", "the first message wins");
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, long_message), LT_EKERNEL);
  cr_assert_eq(strlen(c.errmsg), LT_KERNEL_ERRMSG_MAX - 1);
  lt__call_clear(&c);
}

Test(call, many_outputs) {
  lt__call_t c;
  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, many_outputs), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 1000);
  for (uint32_t i = 0; i < 1000; i += 37) {
    void *data;
    size_t len;
    lt__call_take_output(&c, i, &data, &len);
    cr_assert_eq(len, i);
    cr_assert_not_null(data);
    for (size_t k = 0; k < len; k++)
      cr_assert_eq(((unsigned char *)data)[k], i & 0xff);
    lt__bufpool_free(data);
  }
  lt__call_clear(&c); /* frees the outputs not taken */
}

Test(call, output_out_of_memory) {
  lt__call_t c;
  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, huge_output), LT_ENOMEM);
  cr_assert(strstr(c.errmsg, "out of memory") != NULL, "%s", c.errmsg);
  cr_assert_eq(c.noutputs, 0);
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, huge_output_fails), LT_ENOMEM);
  cr_assert_str_eq(c.errmsg, "no memory for it");
  lt__call_clear(&c);

  lt__call_init(&c, NULL, 0, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, output_64tib), LT_ENOMEM);
  cr_assert_str_eq(c.errmsg, "no 64 TiB");
  lt__call_clear(&c);
}

/* The mark testk:inplace adds when its output is its input's own buffer. */
#define INPLACE_MARK 1000000

/* lt_call_output_from_input: a granted input becomes the output without a copy (the grant
 * is used up); an input not granted, or granted with too little room, is copied. */
Test(call, output_from_input) {
  int64_t *own = lt__bufpool_alloc(8);
  *own = 41;
  lt_bytes_t in = i64(own);
  void *grant[1] = {own};
  lt__call_t c;
  lt__call_init_owned(&c, &in, grant, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:inplace")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.in_place, 1);
  cr_assert_null(grant[0], "the grant is used up");
  void *data;
  size_t len;
  lt__call_take_output(&c, 0, &data, &len);
  cr_assert_eq(data, own, "the output is the input's buffer");
  cr_assert_eq(*(int64_t *)data, 41 + INPLACE_MARK);
  lt__bufpool_free(data);
  lt__call_clear(&c);

  int64_t x = 41;
  in = i64(&x);
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, kernel("testk:inplace")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(c.in_place, 0);
  cr_assert_eq(take_i64(&c, 0), 42, "not granted: a copy");
  cr_assert_eq(x, 41, "the input is untouched");
  lt__call_clear(&c);
}

/* A kernel that takes its granted input and fails: the buffer goes with the call's outputs,
 * once, and the grant says it is not the caller's any more. */
static int take_then_fail(lt_call_t *call) {
  if (lt_call_output_from_input(call, 0, 8) == NULL) return lt_call_fail(call, "no output");
  return lt_call_fail(call, "failed after taking its input");
}

/* Asking for more than the granted buffer holds copies into a fresh output. */
static int grow(lt_call_t *call) {
  size_t len = 0;
  const void *in = lt_call_input(call, 0, &len);
  unsigned char *out = lt_call_output_from_input(call, 0, len * 2);
  if (out == NULL) return lt_call_fail(call, "no output");
  if ((const void *)out == in || memcmp(out, in, len) != 0) return lt_call_fail(call, "bad copy");
  memset(out + len, 0, len);
  return 0;
}

Test(call, output_from_input_edges) {
  int64_t *own = lt__bufpool_alloc(8);
  *own = 7;
  lt_bytes_t in = i64(own);
  void *grant[1] = {own};
  lt__call_t c;
  lt__call_init_owned(&c, &in, grant, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, take_then_fail), LT_EKERNEL);
  cr_assert_null(grant[0], "freed with the failed call's outputs");
  lt__call_clear(&c);

  own = lt__bufpool_alloc(8);
  *own = 7;
  in = i64(own);
  grant[0] = own;
  lt__call_init_owned(&c, &in, grant, 1, bytes(NULL, 0));
  cr_assert_eq(lt__call_run(&c, grow), LT_OK, "%s", c.errmsg);
  cr_assert_eq(grant[0], own, "too small: not taken, still the caller's");
  size_t len = 0;
  char *s = take_str(&c, 0, &len);
  cr_assert_eq(len, 16);
  free(s);
  lt__call_clear(&c);
  lt__bufpool_free(own);

  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  cr_assert_null(c.pub.ops->output_from_input(&c.pub, 1, 8), "input 1 is out of range");
  lt__call_clear(&c);
}

/* A kernel built against this header on a runtime of ABI 1 (no output_from_input) gets a
 * fresh output with its input copied in. */
Test(call, output_from_input_on_abi_1) {
  int64_t x = 41;
  lt_bytes_t in = i64(&x);
  lt__call_t c;
  lt__call_init(&c, &in, 1, bytes(NULL, 0));
  lt_call_ops_t old = *c.pub.ops;
  old.abi = 1;
  old.output_from_input = NULL;
  c.pub.ops = &old;
  cr_assert_eq(lt__call_run(&c, kernel("testk:inplace")), LT_OK, "%s", c.errmsg);
  cr_assert_eq(take_i64(&c, 0), 42);
  lt__call_clear(&c);
}
