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

#define LT_CALL_SMALL 4 /* outputs a call holds without allocating (a stage makes one) */

typedef struct lt__call {
  lt_call_t pub;            /* must stay first */
  const lt_bytes_t *inputs; /* borrowed */
  void **grant;             /* borrowed, NULL: per input, its buffer when the call may take it */
  uint32_t ninputs;
  uint32_t in_place; /* outputs that took their input's buffer (lt_call_output_from_input) */
  lt_bytes_t param;  /* borrowed */
  uint32_t noutputs;
  uint32_t cap;
  void **out_data; /* owned until taken: out_small, or allocated past LT_CALL_SMALL */
  size_t *out_len;
  void *out_small[LT_CALL_SMALL]; /* a call's first outputs: no allocation for them */
  size_t len_small[LT_CALL_SMALL];
  int answer; /* -1 until lt_call_answer */
  int failed;
  char errmsg[LT_KERNEL_ERRMSG_MAX];
} lt__call_t;

/* lt__call_init prepares a call over borrowed inputs and parameter. */
void lt__call_init(lt__call_t *c, const lt_bytes_t *inputs, uint32_t ninputs, lt_bytes_t param);

/* lt__call_init_owned is lt__call_init with grants: grant[i], when not NULL, is inputs[i]'s
 * data, a buffer of lt__bufpool_alloc that the caller owns and that nobody else reads, which
 * lt_call_output_from_input may take as an output without a copy; it then sets grant[i] to
 * NULL (the buffer is the call's output from then on, freed with the call's outputs if the
 * kernel fails). The caller frees the grants left. grant may be NULL (none). */
void lt__call_init_owned(lt__call_t *c, const lt_bytes_t *inputs, void **grant, uint32_t ninputs,
                         lt_bytes_t param);

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
