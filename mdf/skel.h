/* skel.h: the skeleton tree behind lithium/skel.h. A node is seq (a kernel), farm (one
 * worker), pipe (stages in order), map (split, body, merge or a reduce), dc (cond, divide,
 * base, combine), reduce (combine; only as a map's merge), while (cond, body) or if (cond,
 * then, else); every kernel name may carry a parameter. Trees are immutable once built; the
 * compiler (template.c) reads them. Any thread. */
#ifndef LT_SKEL_INTERNAL_H
#define LT_SKEL_INTERNAL_H

#include <stddef.h>
#include <lithium/skel.h>

/* The kinds of node; each has its row in the kinds table (kind.c), which says what its
 * fields hold. */
typedef enum lt_skel_kind {
  LT_SKEL_SEQ = 1,
  LT_SKEL_FARM,
  LT_SKEL_PIPE,
  LT_SKEL_MAP,
  LT_SKEL_DC,
  LT_SKEL_REDUCE,
  LT_SKEL_WHILE,
  LT_SKEL_IF
} lt_skel_kind_t;

/* The kernel slots of a node (which kernel of its kind each holds is the kinds table's). */
typedef enum lt_skel_slot { LT_SLOT_KERNEL = 0, LT_SLOT_DIVIDE, LT_SLOT_COMBINE } lt_skel_slot_t;
#define LT_SKEL_SLOTS 3

/* A kernel name of a node and its parameter (an owned copy, NULL when len is 0). */
typedef struct lt_skel_kernel {
  char *name; /* "module:function"; NULL for a slot the kind leaves empty */
  void *param;
  size_t param_len;
} lt_skel_kernel_t;

struct lt_skel {
  lt_skel_kind_t kind;
  lt_skel_kernel_t k[LT_SKEL_SLOTS]; /* KERNEL: seq's kernel, map's split, a condition;
                                        DIVIDE: dc's divide; COMBINE: map's merge, combine */
  size_t nchildren; /* FARM, DC, WHILE: 1; MAP: 1, or 2 with a reduce; IF: 2; PIPE: >= 1 */
  lt_skel_t **children;
};

/* lt__skel_valid tells whether `s` is a well-formed tree (right child counts, valid kernel
 * names, a reduce only where a kind's argument allows one or as the last stage of the
 * program's pipe), so that a tree built by hand or by the parser can be rejected before
 * use. */
int lt__skel_valid(const lt_skel_t *s);

/* lt__skel_reduces tells whether `s` is a program whose last stage reduces the stream: a
 * pipe whose last stage is a reduce (its results are combined into one). */
int lt__skel_reduces(const lt_skel_t *s);

/* lt__skel_param_set gives kernel slot `k` a copy of `len` bytes at `param`, replacing what
 * it had. LT_OK, LT_ENOMEM. */
int lt__skel_param_set(lt_skel_kernel_t *k, const void *param, size_t len);

#endif
