/* skel.h: the skeleton tree behind lithium/skel.h. A node is seq (a kernel and its
 * parameter), farm (one worker), pipe (stages in order), map (split, body, merge) or dc
 * (cond, divide, base, combine). Trees are immutable once built;
 * the compiler (template.c) reads them. Any thread. */
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
  LT_SKEL_DC
} lt_skel_kind_t;

struct lt_skel {
  lt_skel_kind_t kind;
  char *kernel;  /* SEQ: the kernel; MAP: split; DC: cond ("module:function") */
  char *divide;  /* DC: divide */
  char *combine; /* MAP: merge; DC: combine */
  void *param;   /* SEQ: owned copy, NULL when len is 0 */
  size_t param_len;
  size_t nchildren; /* FARM, MAP (body), DC (base): 1; PIPE: >= 1 */
  lt_skel_t **children;
};

/* lt__skel_valid tells whether `s` is a well-formed tree (right child counts, valid kernel
 * names), so that a tree built by hand or by the parser can be rejected before use. */
int lt__skel_valid(const lt_skel_t *s);

#endif
