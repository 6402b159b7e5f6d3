/* call.h: one kernel invocation: the runtime's lt_call_t behind lithium/kernel.h. Holds
 * borrowed inputs and parameter, collects the outputs the kernel makes, its answer (for
 * condition kernels) and its error message. Used by lithium-server workers and by the
 * client's sequential evaluator. One thread per call. */
#ifndef LT_CALL_H
#define LT_CALL_H

#include <stddef.h>
#include <stdint.h>
#include <lithium/kernel.h>
#include "module.h"
#include "msg.h"

typedef struct lt__call {
  lt_call_t pub;            /* must stay first */
  const lt_bytes_t *inputs; /* borrowed */
  uint32_t ninputs;
  lt_bytes_t param; /* borrowed */
  uint32_t noutputs;
  uint32_t cap;
  void **out_data; /* owned until taken */
  size_t *out_len;
  int answer; /* -1 until lt_call_answer */
  int failed;
  char errmsg[LT_KERNEL_ERRMSG_MAX];
} lt__call_t;

/* lt__call_init prepares a call over borrowed inputs and parameter. */
void lt__call_init(lt__call_t *c, const lt_bytes_t *inputs, uint32_t ninputs, lt_bytes_t param);

/* lt__call_run runs `fn`. LT_OK on success; LT_EKERNEL when the kernel returned non-zero
 * (c->errmsg holds its lt_call_fail message or "kernel returned N"); LT_ENOMEM when an
 * output could not be allocated. */
int lt__call_run(lt__call_t *c, lt_kernel_fn fn);

/* lt__call_take_output moves output `i` to the caller (*data is a buffer of lt__bufpool_alloc:
 * the caller frees it with lt__bufpool_free or hands it to lt__value_pooled; a zero-length
 * output gives a non-NULL *data). */
void lt__call_take_output(lt__call_t *c, uint32_t i, void **data, size_t *len);

/* lt__call_clear frees outputs not taken. */
void lt__call_clear(lt__call_t *c);

#endif
