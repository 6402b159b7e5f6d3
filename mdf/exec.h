/* exec.h: the table of instruction ops (what each op runs, makes and answers) and running
 * one instruction's kernels (an lt_op_t with its stages) on byte inputs: fused seq stages
 * back to back, a split, a dc step (condition, then divide) or a test (a condition). The one place
 * that knows these semantics: lithium-server's workers and the client's sequential evaluator both
 * call it, and the server's tasks and the client's dispatcher read the table. Any thread; one call
 * per result. */
#ifndef LT_EXEC_H
#define LT_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include "module.h"
#include "msg.h"

typedef struct lt_exec_stage {
  lt_kernel_fn fn;
  const char *name; /* "module:function", for messages */
  lt_bytes_t param;
} lt_exec_stage_t;

#define LT_EXEC_SMALL 2 /* outputs a result holds without allocating (a stage makes one) */

typedef struct lt_exec_result {
  int status; /* LT_OK, LT_EKERNEL (the kernel failed), LT_ENOMEM */
  int answer; /* DCSTEP: 1 base case, 0 divided; TEST: 1 true, 0 false; else -1 */
  uint32_t nout;
  void **out; /* outputs from lt__bufpool_alloc (caller takes them or clears): in out_small
                 up to LT_EXEC_SMALL of them, else allocated; the result is not to be copied */
  size_t *outlen;
  void *out_small[LT_EXEC_SMALL];
  size_t outlen_small[LT_EXEC_SMALL];
  uint32_t in_place; /* outputs made in their input's buffer (lt_call_output_from_input) */
  char errmsg[LT_KERNEL_ERRMSG_MAX + 128];
} lt_exec_result_t;

/* What an op's outputs are: exactly one, whose id is known before it runs, or any number of
 * parts up to LT_MAX_PARTS. */
typedef enum lt_op_outputs { LT_OP_OUT_ONE = 1, LT_OP_OUT_PARTS } lt_op_outputs_t;

/* An op's semantics: runs its stages on inputs (grant: see lt__exec_run_owned) into r. */
typedef void (*lt_op_run_fn)(const lt_exec_stage_t *stages, uint32_t nstages,
                             const lt_bytes_t *inputs, void **grant, uint32_t ninputs,
                             lt_exec_result_t *r);

/* A row of the table of instruction ops (lt_op_t of msg.h): what the runtime may assume of
 * an instruction of that op. The executor, the server's task code, the client's dispatcher
 * and trace read it instead of comparing op values. */
typedef struct lt_op_desc {
  uint32_t op;
  const char *name;
  uint32_t min_stages, max_stages;
  lt_op_outputs_t outputs;
  int answers;      /* its first stage is a condition (lt_call_answer); a true answer ends it */
  int grows;        /* its completion adds instructions to the graph (parts, a base case) */
  int keeps_inputs; /* it leaves its input to what runs next (a dc base case, an if's or a
                       while's branch), so lazy binding does not release inputs with its
                       dispatch */
  int divides;      /* a false answer divides the input into parts that replace it */
  lt_op_run_fn run;
} lt_op_desc_t;

/* lt__op returns the row of op `op`, NULL for a value that names no op. */
const lt_op_desc_t *lt__op(uint32_t op);

/* lt__op_valid tells whether `op` is an op and `nstages` a stage count it runs with. */
int lt__op_valid(uint32_t op, uint32_t nstages);

/* lt__exec_run runs op `op` (LT_OP_*) of `nstages` stages on `inputs` into *r. SEQ: each
 * stage after the first gets the previous stage's only output as its only input, and every
 * stage must make exactly one output. SPLIT: any number of outputs up to LT_MAX_PARTS.
 * DCSTEP: stages[0] must answer; when false stages[1] divides the same inputs. TEST:
 * stages[0] must answer, and its outputs are dropped. Errors are in
 * r->status and r->errmsg, which names the kernel; r needs lt__exec_result_clear in every
 * case. */
void lt__exec_run(uint32_t op, const lt_exec_stage_t *stages, uint32_t nstages,
                  const lt_bytes_t *inputs, uint32_t ninputs, lt_exec_result_t *r);

/* lt__exec_run_owned is lt__exec_run with grants (lt__call_init_owned): grant[i], when not
 * NULL, is inputs[i]'s buffer, the caller's and read by nobody else, which the first stage of
 * a SEQ or a SPLIT may take as an output (lt_call_output_from_input); a taken one is set to
 * NULL, the caller frees those left. A SEQ grants each later stage the previous stage's
 * output. Ops that keep their inputs (DCSTEP, TEST) grant nothing. grant may be NULL. */
void lt__exec_run_owned(uint32_t op, const lt_exec_stage_t *stages, uint32_t nstages,
                        const lt_bytes_t *inputs, void **grant, uint32_t ninputs,
                        lt_exec_result_t *r);

/* lt__exec_result_clear frees outputs still held by r. */
void lt__exec_result_clear(lt_exec_result_t *r);

#endif
