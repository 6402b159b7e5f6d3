/* template.h: the MDF template compiled once from a skeleton tree (DESIGN.md 3). A node is
 * one instruction: a kernel (index into the program's kernel table, which is what the
 * client sends to servers in `program`), its parameter, its number of inputs and where its
 * output goes: input `succ_slot` of node `succ`, or out of the graph as the task's result
 * (succ = -1). Immutable after compile; any thread may read it. */
#ifndef LT_TEMPLATE_H
#define LT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>
#include "skel.h"

typedef struct lt_tnode {
  uint32_t kernel;    /* index into lt_template_t.kernels */
  void *param;        /* owned copy; NULL when param_len is 0 */
  size_t param_len;
  uint32_t ninputs;   /* input tokens the instruction waits for */
  uint32_t slot_base; /* first of its input slots in a graph instance */
  int32_t succ;       /* node fed by the output, -1 for the task's result */
  uint32_t succ_slot;
} lt_tnode_t;

typedef struct lt_template {
  char **kernels; /* distinct "module:function" names, in first-use order */
  uint32_t nkernels;
  lt_tnode_t *nodes;
  uint32_t nnodes;
  uint32_t nslots; /* input slots of all nodes */
  uint32_t entry;  /* node that receives the task's input (slot 0) */
} lt_template_t;

/* lt__template_compile compiles `s` (borrowed) into *out. LT_EINVAL for a malformed tree,
 * LT_ENOMEM. Caller frees *out with lt__template_free. */
int lt__template_compile(lt_template_t **out, const lt_skel_t *s);

/* lt__template_free frees a template; accepts NULL. */
void lt__template_free(lt_template_t *t);

#endif
