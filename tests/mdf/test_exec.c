/* test_exec.c: the error text of a failing instruction names its kernel once, whether or
 * not the kernel named itself ("m:f: ..."), in the server and in the sequential evaluator
 * alike (both run lt__exec_run); fused seq stages write over the previous stage's output. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <lithium/error.h>
#include <lithium/kernel.h>

#include "exec.h"

static int fail_named(lt_call_t *call) {
  return lt_call_fail(call, "filters:blur: bad image");
}

static int fail_plain(lt_call_t *call) {
  return lt_call_fail(call, "bad image");
}

static int fail_similar(lt_call_t *call) {
  return lt_call_fail(call, "filters:blurry: bad image");
}

static int ok_one(lt_call_t *call) {
  return lt_call_output(call, 1) != NULL ? 0 : lt_call_fail(call, "out of memory");
}

/* run runs `first` then `second` as fused seq stages and returns the error text. */
static void run(lt_kernel_fn first, lt_kernel_fn second, char *msg, size_t len) {
  lt_exec_stage_t st[2] = {{first, "filters:first", {NULL, 0}},
                           {second, "filters:blur", {NULL, 0}}};
  lt_bytes_t in = {"x", 1};
  lt_exec_result_t r;
  lt__exec_run(LT_OP_SEQ, st, 2, &in, 1, &r);
  cr_assert_eq(r.status, LT_EKERNEL);
  snprintf(msg, len, "%s", r.errmsg);
  lt__exec_result_clear(&r);
}

Test(exec, kernel_named_once) {
  char msg[LT_KERNEL_ERRMSG_MAX + 128];
  run(ok_one, fail_named, msg, sizeof msg);
  cr_assert_str_eq(msg, "filters:blur: bad image", "a kernel that names itself: once");
  run(ok_one, fail_plain, msg, sizeof msg);
  cr_assert_str_eq(msg, "filters:blur: bad image", "the runtime adds the name");
  run(ok_one, fail_similar, msg, sizeof msg);
  cr_assert_str_eq(msg, "filters:blur: filters:blurry: bad image", "another name is not ours");
}

/* A fused stage writes in place over the previous stage's output (nobody else's); the first
 * stage's input is written over only when granted. */
static int add_one_in_place(lt_call_t *call) {
  size_t len = 0;
  const void *in = lt_call_input(call, 0, &len);
  unsigned char *out = lt_call_output_from_input(call, 0, len);
  if (out == NULL) return lt_call_fail(call, "no output");
  out[0] = (unsigned char)(out[0] + ((const void *)out == in ? 10 : 1));
  return 0;
}

Test(exec, seq_stages_in_place) {
  lt_exec_stage_t st[3] = {{add_one_in_place, "t:a", {NULL, 0}},
                           {add_one_in_place, "t:b", {NULL, 0}},
                           {add_one_in_place, "t:c", {NULL, 0}}};
  unsigned char x = 0;
  lt_bytes_t in = {&x, 1};
  lt_exec_result_t r;
  lt__exec_run(LT_OP_SEQ, st, 3, &in, 1, &r);
  cr_assert_eq(r.status, LT_OK, "%s", r.errmsg);
  cr_assert_eq(r.in_place, 2, "stages b and c write over what a and b made");
  cr_assert_eq(((unsigned char *)r.out[0])[0], 1 + 10 + 10);
  cr_assert_eq(x, 0, "the first stage's input was not granted: copied");
  lt__exec_result_clear(&r);
}
