/* template.h: the MDF template compiled once from a skeleton tree (DESIGN.md 3). The tree
 * becomes blocks; a block is a chain of nodes run one after the other on one token:
 *   SEQ  one instruction running its stages back to back (one stage, or several adjacent seq
 *        stages fused by normal form);
 *   MAP  a split instruction, then the body block on every part, then a merge instruction;
 *   DC   a step instruction (condition, and divide when not a base case), then the base
 *        block on a base case, or the same DC node on every part and a combine instruction;
 *   IF   a test instruction (the condition), then the `block` or the `alt` block;
 *   WHILE a test instruction, then the body block and the same WHILE node again while the
 *        condition answers true.
 * A MAP whose merge is a reduce (`reduce`) combines the parts pairwise, neighbours first,
 * instead of in one merge instruction.
 * farm adds no node (it only says that instances are independent) and pipe concatenates
 * chains. Block 0 is the program. Immutable after compile; any thread may read it. */
#ifndef LT_TEMPLATE_H
#define LT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>
#include "skel.h"

typedef enum lt_tnode_kind {
  LT_TN_SEQ = 1,
  LT_TN_MAP,
  LT_TN_DC,
  LT_TN_IF,
  LT_TN_WHILE
} lt_tnode_kind_t;

typedef struct lt_tstage {
  uint32_t kernel; /* index into lt_template_t.kernels */
  void *param;     /* owned copy; NULL when param_len is 0 */
  size_t param_len;
} lt_tstage_t;

/* Stage roles of MAP, DC, IF and WHILE nodes. */
enum { LT_TS_SPLIT = 0, LT_TS_MERGE = 1 };
enum { LT_TS_COND = 0, LT_TS_DIVIDE = 1, LT_TS_COMBINE = 2 };
enum { LT_TS_TEST = 0 };

typedef struct lt_tnode {
  lt_tnode_kind_t kind;
  lt_skel_kind_t skel; /* the skeleton kind it was compiled from (kind.h), for DOT */
  lt_tstage_t *stages; /* SEQ: >= 1; MAP: split, merge; DC: cond, divide, combine; IF and
                          WHILE: cond */
  uint32_t nstages;
  size_t capstages;
  uint32_t block;   /* MAP, WHILE: the body; DC: the base; IF: the block when true */
  uint32_t alt;     /* IF: the block when false */
  uint32_t nblocks; /* the blocks it runs: SEQ 0, IF 2, others 1 */
  int reduce;       /* MAP: the merge stage combines two parts at a time (a reduce) */
  int32_t next;     /* next node of the chain, -1 at the end of the block */
} lt_tnode_t;

/* A chain under construction: its first and last node, -1 while empty. */
typedef struct lt_tchain {
  int32_t first, last;
} lt_tchain_t;

typedef struct lt_template {
  char **kernels; /* distinct "module:function" names, in first-use order: the program */
  uint32_t nkernels;
  size_t capkernels;
  lt_tnode_t *nodes;
  uint32_t nnodes;
  size_t capnodes;
  uint32_t *blocks; /* first node of each block */
  uint32_t nblocks;
  size_t capblocks;
  int normal_form;       /* adjacent seq stages were fused */
  int32_t combine_block; /* a program that reduces its stream (pipe(..., reduce(m:c))): the
                            block of one seq node combining two results; -1 for others */
  /* The compiler's hooks while it compiles (compile.c), for the kinds' compile functions. */
  int (*flatten)(struct lt_template *t, const lt_skel_t *s, lt_tchain_t *c);
  int (*block)(struct lt_template *t, const lt_skel_t *s, uint32_t *block);
} lt_template_t;

/* lt__template_compile compiles `s` (borrowed) into *out, fusing adjacent seq stages when
 * `normal_form` is set. LT_EINVAL for a malformed tree, LT_ENOMEM. Caller frees *out. */
int lt__template_compile(lt_template_t **out, const lt_skel_t *s, int normal_form);

/* The steps the compile functions of kind.c build a template with; each returns LT_OK or
 * LT_ENOMEM. lt__template_node_add appends an empty node to `c`, its index in *id;
 * lt__template_stage_add appends a stage running `kernel` with a copy of `param` to node
 * `id`. A compile function compiles its children with the template's hooks, `flatten`
 * (append the nodes of a child to a chain) and `block` (compile a child as a new block). */
int lt__template_node_add(lt_template_t *t, lt_tnode_kind_t kind, lt_skel_kind_t skel,
                          lt_tchain_t *c, uint32_t *id);
int lt__template_stage_add(lt_template_t *t, uint32_t id, const char *kernel, const void *param,
                           size_t len);

/* lt__template_chain_length returns the number of nodes of `block`'s chain: for a program
 * without map or dc, the instructions one task costs. */
uint32_t lt__template_chain_length(const lt_template_t *t, uint32_t block);

/* lt__template_recurs tells whether a chain of t may run after itself within one task: t
 * has a DC or WHILE node, a MAP whose merge is a reduce, or reduces its stream. */
int lt__template_recurs(const lt_template_t *t);

/* lt__template_dot writes the template as a Graphviz digraph into a malloc'd string (caller
 * frees); NULL on out of memory. */
char *lt__template_dot(const lt_template_t *t);

/* lt__template_free frees a template; accepts NULL. */
void lt__template_free(lt_template_t *t);

#endif
