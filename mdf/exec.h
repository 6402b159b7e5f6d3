/* exec.h: running one instruction's kernels (an lt_op_t with its stages) on byte inputs:
 * fused seq stages back to back, a split, or a dc step (condition, then divide). The one
 * place that knows these semantics: lithium-server's workers and the client's sequential
 * evaluator both call it. Any thread; one call per result. */
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

typedef struct lt_exec_result {
  int status; /* LT_OK, LT_EKERNEL (the kernel failed), LT_ENOMEM */
  int answer; /* DCSTEP: 1 base case, 0 divided; else -1 */
  uint32_t nout;
  void **out; /* malloc'd outputs (caller takes them or clears) */
  size_t *outlen;
  char errmsg[LT_KERNEL_ERRMSG_MAX + 128];
} lt_exec_result_t;

/* lt__exec_run runs op `op` (LT_OP_*) of `nstages` stages on `inputs` into *r. SEQ: each
 * stage after the first gets the previous stage's only output as its only input, and every
 * stage must make exactly one output. SPLIT: any number of outputs up to LT_MAX_PARTS.
 * DCSTEP: stages[0] must answer; when false stages[1] divides the same inputs. Errors are in
 * r->status and r->errmsg, which names the kernel; r needs lt__exec_result_clear in every
 * case. */
void lt__exec_run(uint32_t op, const lt_exec_stage_t *stages, uint32_t nstages,
                  const lt_bytes_t *inputs, uint32_t ninputs, lt_exec_result_t *r);

/* lt__exec_result_clear frees outputs still held by r. */
void lt__exec_result_clear(lt_exec_result_t *r);

#endif
