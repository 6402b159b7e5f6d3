/* call.c: one kernel invocation: the lt_call_ops_t table behind lithium/kernel.h, and
 * running a kernel over borrowed inputs while collecting its outputs, answer and error. An
 * input the caller grants (lt__call_init_owned) may become an output in place
 * (lt_call_output_from_input); any other is copied.
 * A call belongs to one thread (a server worker, or the client's sequential evaluator). */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>

#include "bufpool.h"
#include "call.h"
#include "vec.h"

/* Bits of lt__call_t.failed. */
enum {
  FAILED_KERNEL = 1, /* lt_call_fail was called */
  FAILED_NOMEM = 2   /* lt_call_output could not allocate */
};

/* A zero-length input or parameter may come with a NULL pointer; kernels get this instead,
 * so that NULL always means "no such input". */
static const char empty[1];

static lt__call_t *from_pub(const lt_call_t *c) {
  return (lt__call_t *)c;
}

static int op_ninputs(const lt_call_t *pub) {
  return (int)from_pub(pub)->ninputs;
}

static const void *op_input(const lt_call_t *pub, int i, size_t *len) {
  const lt__call_t *c = from_pub(pub);
  if (i < 0 || (uint32_t)i >= c->ninputs) {
    if (len != NULL) *len = 0;
    return NULL;
  }
  if (len != NULL) *len = c->inputs[i].len;
  return c->inputs[i].data != NULL ? c->inputs[i].data : empty;
}

static const void *op_param(const lt_call_t *pub, size_t *len) {
  const lt__call_t *c = from_pub(pub);
  if (len != NULL) *len = c->param.len;
  return c->param.data != NULL ? c->param.data : empty;
}

/* nomem records that output `len` could not be made; returns NULL. */
static void *nomem(lt__call_t *c, size_t len) {
  if (!(c->failed & FAILED_NOMEM))
    snprintf(c->errmsg, sizeof c->errmsg, "out of memory for output %u (%zu bytes)", c->noutputs,
             len);
  c->failed |= FAILED_NOMEM;
  return NULL;
}

/* small tells whether c's outputs are still in its own arrays. */
static bool small(const lt__call_t *c) {
  return c->out_data == c->out_small;
}

/* room makes room for one more output; false without memory. The first LT_CALL_SMALL are in
 * the call itself; past them both arrays move to the heap, and grow there. */
static bool room(lt__call_t *c) {
  if (c->noutputs < c->cap) return true;
  if (c->cap == 0) {
    c->out_data = c->out_small;
    c->out_len = c->len_small;
    c->cap = LT_CALL_SMALL;
    return true;
  }
  if (c->cap > UINT32_MAX / 2) return false;
  uint32_t cap = c->cap * 2;
  if (small(c)) {
    void **data = malloc(cap * sizeof *data);
    size_t *len = malloc(cap * sizeof *len);
    if (data == NULL || len == NULL) {
      free(data);
      free(len);
      return false;
    }
    memcpy(data, c->out_small, sizeof c->out_small);
    memcpy(len, c->len_small, sizeof c->len_small);
    c->out_data = data;
    c->out_len = len;
    c->cap = cap;
    return true;
  }
  /* Each array is stored as soon as it has grown, so a failure of the second leaves
   * consistent (merely larger) storage behind. */
  if (LT_VEC_RESIZE(c->out_data, c->cap, cap) != LT_OK ||
      LT_VEC_RESIZE(c->out_len, c->cap, cap) != LT_OK)
    return false;
  c->cap = cap;
  return true;
}

/* push adds buffer p (of lt__bufpool_alloc, taken) as the next output, of len bytes. */
static void push(lt__call_t *c, void *p, size_t len) {
  c->out_data[c->noutputs] = p;
  c->out_len[c->noutputs] = len;
  c->noutputs++;
}

static void *op_output(lt_call_t *pub, size_t len) {
  lt__call_t *c = from_pub(pub);
  /* No object can be larger than PTRDIFF_MAX; refuse without asking malloc. */
  if (len > PTRDIFF_MAX || !room(c)) return nomem(c, len);
  /* From the pool: an output of a size seen before reuses pages already faulted in. */
  void *p = lt__bufpool_alloc(len);
  if (p == NULL) return nomem(c, len);
  push(c, p, len);
  return p;
}

static void *op_output_from_input(lt_call_t *pub, int i, size_t len) {
  lt__call_t *c = from_pub(pub);
  if (i < 0 || (uint32_t)i >= c->ninputs) return NULL;
  void *own = c->grant != NULL ? c->grant[i] : NULL;
  if (own != NULL && len <= lt__bufpool_capacity(own)) {
    if (len > PTRDIFF_MAX || !room(c)) return nomem(c, len);
    /* The input's buffer becomes the output: the grant is used up, and the caller, seeing
     * it NULL, knows the buffer is the output's now. */
    c->grant[i] = NULL;
    c->in_place++;
    push(c, own, len);
    return own;
  }
  lt_bytes_t in = c->inputs[i];
  void *out = op_output(pub, len);
  if (out != NULL && in.len > 0) memcpy(out, in.data, in.len < len ? in.len : len);
  return out;
}

static int op_answer(lt_call_t *pub, int truth) {
  from_pub(pub)->answer = truth != 0;
  return 0;
}

static int op_fail(lt_call_t *pub, const char *msg) {
  lt__call_t *c = from_pub(pub);
  /* The first message wins: it names the cause, later ones its consequences. An
   * out-of-memory note is replaced by the kernel's own words. */
  if (!(c->failed & FAILED_KERNEL))
    snprintf(c->errmsg, sizeof c->errmsg, "%s", msg != NULL ? msg : "");
  c->failed |= FAILED_KERNEL;
  return 1;
}

static const lt_call_ops_t ops = {
    .abi = LT_KERNEL_ABI,
    .ninputs = op_ninputs,
    .input = op_input,
    .param = op_param,
    .output = op_output,
    .answer = op_answer,
    .fail = op_fail,
    .output_from_input = op_output_from_input,
};

void lt__call_init(lt__call_t *c, const lt_bytes_t *inputs, uint32_t ninputs, lt_bytes_t param) {
  lt__call_init_owned(c, inputs, NULL, ninputs, param);
}

void lt__call_init_owned(lt__call_t *c, const lt_bytes_t *inputs, void **grant, uint32_t ninputs,
                         lt_bytes_t param) {
  memset(c, 0, sizeof *c);
  c->grant = grant;
  c->pub.ops = &ops;
  c->inputs = inputs;
  c->ninputs = ninputs;
  c->param = param;
  c->answer = -1;
}

int lt__call_run(lt__call_t *c, lt_kernel_fn fn) {
  int ret = fn(&c->pub);
  if (ret == 0 && c->failed == 0) return LT_OK;
  /* A failed call has no outputs: drop what the kernel made before failing. */
  lt__call_clear(c);
  if (c->failed & FAILED_NOMEM) return LT_ENOMEM;
  if (!(c->failed & FAILED_KERNEL))
    snprintf(c->errmsg, sizeof c->errmsg, "kernel returned %d", ret);
  return LT_EKERNEL;
}

void lt__call_take_output(lt__call_t *c, uint32_t i, void **data, size_t *len) {
  assert(i < c->noutputs && c->out_data[i] != NULL);
  *data = c->out_data[i];
  *len = c->out_len[i];
  c->out_data[i] = NULL;
}

void lt__call_clear(lt__call_t *c) {
  for (uint32_t i = 0; i < c->noutputs; i++)
    lt__bufpool_free(c->out_data[i]);
  if (!small(c)) {
    free(c->out_data);
    free(c->out_len);
  }
  c->out_data = NULL;
  c->out_len = NULL;
  c->noutputs = 0;
  c->cap = 0;
}
