/* exec.c: the table of instruction ops and the semantics of each over its stages (exec.h),
 * on top of lt__call_t. Knows nothing of where the inputs came from or where outputs go. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "bufpool.h"
#include "call.h"
#include "exec.h"

/* has_prefix tells whether a kernel's message starts with its own name ("m:f: ..."): the
 * runtime names the kernel once, not again in front of a kernel that named itself. */
static bool has_prefix(const char *msg, const char *name) {
  size_t n = strlen(name);
  return n > 0 && strncmp(msg, name, n) == 0 && msg[n] == ':';
}

/* out_arrays gives r room for n outputs: its own arrays up to LT_EXEC_SMALL, else allocated
 * ones; LT_ENOMEM (r without arrays) without memory. */
static int out_arrays(lt_exec_result_t *r, uint32_t n) {
  if (n <= LT_EXEC_SMALL) {
    r->out = r->out_small;
    r->outlen = r->outlen_small;
    return LT_OK;
  }
  r->out = calloc(n, sizeof *r->out);
  r->outlen = calloc(n, sizeof *r->outlen);
  if (r->out != NULL && r->outlen != NULL) return LT_OK;
  free(r->out);
  free(r->outlen);
  r->out = NULL;
  r->outlen = NULL;
  return LT_ENOMEM;
}

/* out_free lets go of r's output arrays (not the outputs). */
static void out_free(lt_exec_result_t *r) {
  if (r->out != r->out_small) {
    free(r->out);
    free(r->outlen);
  }
  r->out = NULL;
  r->outlen = NULL;
}

/* call_stage runs one kernel; on success moves its outputs into r. */
static int call_stage(const lt_exec_stage_t *st, const lt_bytes_t *inputs, void **grant,
                      uint32_t ninputs, lt_exec_result_t *r, int *answer) {
  lt__call_t c;
  lt__call_init_owned(&c, inputs, grant, ninputs, st->param);
  int rc = lt__call_run(&c, st->fn);
  r->in_place += c.in_place;
  if (rc != LT_OK) {
    r->status = rc;
    const char *why = c.errmsg[0] != '\0' ? c.errmsg : lt_strerror(rc);
    if (has_prefix(why, st->name))
      snprintf(r->errmsg, sizeof r->errmsg, "%s", why);
    else
      snprintf(r->errmsg, sizeof r->errmsg, "%s: %s", st->name, why);
    lt__call_clear(&c);
    return rc;
  }
  if (answer != NULL) *answer = c.answer;
  if (c.noutputs > LT_MAX_PARTS) {
    r->status = LT_EKERNEL;
    snprintf(r->errmsg, sizeof r->errmsg, "%s: made %u outputs, at most %u allowed", st->name,
             c.noutputs, LT_MAX_PARTS);
    lt__call_clear(&c);
    return r->status;
  }
  if (out_arrays(r, c.noutputs) != LT_OK) {
    r->status = LT_ENOMEM;
    snprintf(r->errmsg, sizeof r->errmsg, "%s: out of memory", st->name);
    lt__call_clear(&c);
    return r->status;
  }
  for (uint32_t i = 0; i < c.noutputs; i++)
    lt__call_take_output(&c, i, &r->out[i], &r->outlen[i]);
  r->nout = c.noutputs;
  lt__call_clear(&c);
  return LT_OK;
}

static int expect_one(const lt_exec_stage_t *st, lt_exec_result_t *r) {
  if (r->nout == 1) return LT_OK;
  r->status = LT_EKERNEL;
  snprintf(r->errmsg, sizeof r->errmsg, "%s: made %u outputs, a stage must make exactly 1",
           st->name, r->nout);
  return r->status;
}

static void run_seq(const lt_exec_stage_t *stages, uint32_t nstages, const lt_bytes_t *inputs,
                    void **grant, uint32_t ninputs, lt_exec_result_t *r) {
  for (uint32_t s = 0; s < nstages; s++) {
    if (s == 0) {
      if (call_stage(&stages[0], inputs, grant, ninputs, r, NULL) != LT_OK) return;
    } else {
      /* The previous stage's output is this stage's only input, and nobody else's: the stage
       * may write over it. */
      void *prev[1] = {r->out[0]};
      lt_bytes_t in = {prev[0], r->outlen[0]};
      out_free(r);
      r->nout = 0;
      int rc = call_stage(&stages[s], &in, prev, 1, r, NULL);
      lt__bufpool_free(prev[0]); /* NULL when the stage took it */
      if (rc != LT_OK) return;
    }
    if (expect_one(&stages[s], r) != LT_OK) return;
  }
}

static void run_split(const lt_exec_stage_t *stages, uint32_t nstages, const lt_bytes_t *inputs,
                      void **grant, uint32_t ninputs, lt_exec_result_t *r) {
  (void)nstages;
  call_stage(&stages[0], inputs, grant, ninputs, r, NULL);
}

/* run_test runs the condition of stages[0] into r->answer (1 or 0); LT_EKERNEL when it gave
 * none. A condition's outputs mean nothing and are dropped. */
static void run_test(const lt_exec_stage_t *stages, uint32_t nstages, const lt_bytes_t *inputs,
                     void **grant, uint32_t ninputs, lt_exec_result_t *r) {
  (void)nstages;
  (void)grant; /* its input goes on to what runs next: never written over */
  int answer = -1;
  if (call_stage(&stages[0], inputs, NULL, ninputs, r, &answer) != LT_OK) return;
  lt__exec_result_clear(r);
  if (answer < 0) {
    r->status = LT_EKERNEL;
    snprintf(r->errmsg, sizeof r->errmsg, "%s: condition kernel gave no answer (lt_call_answer)",
             stages[0].name);
    return;
  }
  r->answer = answer ? 1 : 0;
}

static void run_dcstep(const lt_exec_stage_t *stages, uint32_t nstages, const lt_bytes_t *inputs,
                       void **grant, uint32_t ninputs, lt_exec_result_t *r) {
  (void)grant; /* a base case's input goes on to the leaf: never written over */
  run_test(stages, nstages, inputs, NULL, ninputs, r);
  if (r->status != LT_OK || r->answer == 1) return;
  call_stage(&stages[1], inputs, NULL, ninputs, r, NULL);
}

/* The ops, indexed by their lt_op_t value. */
static const lt_op_desc_t ops[] = {
    [LT_OP_SEQ] = {.op = LT_OP_SEQ,
                   .name = "seq",
                   .min_stages = 1,
                   .max_stages = UINT32_MAX,
                   .outputs = LT_OP_OUT_ONE,
                   .run = run_seq},
    [LT_OP_SPLIT] = {.op = LT_OP_SPLIT,
                     .name = "split",
                     .min_stages = 1,
                     .max_stages = 1,
                     .outputs = LT_OP_OUT_PARTS,
                     .grows = 1,
                     .run = run_split},
    [LT_OP_DCSTEP] = {.op = LT_OP_DCSTEP,
                      .name = "dcstep",
                      .min_stages = 2,
                      .max_stages = 2,
                      .outputs = LT_OP_OUT_PARTS,
                      .answers = 1,
                      .grows = 1,
                      .keeps_inputs = 1,
                      .divides = 1,
                      .run = run_dcstep},
    [LT_OP_TEST] = {.op = LT_OP_TEST,
                    .name = "test",
                    .min_stages = 1,
                    .max_stages = 1,
                    .outputs = LT_OP_OUT_PARTS,
                    .answers = 1,
                    .grows = 1,
                    .keeps_inputs = 1,
                    .run = run_test},
};

const lt_op_desc_t *lt__op(uint32_t op) {
  return op < sizeof ops / sizeof ops[0] && ops[op].run != NULL ? &ops[op] : NULL;
}

int lt__op_valid(uint32_t op, uint32_t nstages) {
  const lt_op_desc_t *d = lt__op(op);
  return d != NULL && nstages >= d->min_stages && nstages <= d->max_stages;
}

void lt__exec_run(uint32_t op, const lt_exec_stage_t *stages, uint32_t nstages,
                  const lt_bytes_t *inputs, uint32_t ninputs, lt_exec_result_t *r) {
  lt__exec_run_owned(op, stages, nstages, inputs, NULL, ninputs, r);
}

void lt__exec_run_owned(uint32_t op, const lt_exec_stage_t *stages, uint32_t nstages,
                        const lt_bytes_t *inputs, void **grant, uint32_t ninputs,
                        lt_exec_result_t *r) {
  memset(r, 0, sizeof *r);
  r->answer = -1;
  if (!lt__op_valid(op, nstages)) {
    r->status = LT_EINVAL;
    snprintf(r->errmsg, sizeof r->errmsg, "malformed instruction: op %u with %u stages", op,
             nstages);
    return;
  }
  lt__op(op)->run(stages, nstages, inputs, grant, ninputs, r);
  if (r->status != LT_OK) lt__exec_result_clear(r);
}

void lt__exec_result_clear(lt_exec_result_t *r) {
  for (uint32_t i = 0; i < r->nout; i++)
    lt__bufpool_free(r->out[i]);
  out_free(r);
  r->nout = 0;
}
