/* kind.h: the table of skeleton kinds, one row per kind (seq, farm, pipe, map, dc, reduce,
 * while, if): its keyword and alias, its arguments in expression order (kernel names in
 * which slot, an optional parameter, one child skeleton or a variadic list), its DOT roles
 * and how it compiles. The parser, the printer, DOT, tree validation and the template compiler read
 * it instead of switching on the kind. Immutable; any thread. */
#ifndef LT_KIND_H
#define LT_KIND_H

#include <stddef.h>
#include <stdint.h>
#include "skel.h"
#include "template.h"

/* What an argument of a skeleton expression is. */
typedef enum lt_skel_arg_kind {
  LT_ARG_KERNEL = 1, /* a kernel name "module:function" with an optional parameter
                        `"bytes"` after it, held in the node's `slot`; or, when the argument
                        has an `instead` kind, a skeleton of that kind held as a child */
  LT_ARG_PARAM,      /* optional: `, "bytes"`, the parameter of the KERNEL slot */
  LT_ARG_SKEL,       /* one child skeleton: the next of the node's children */
  LT_ARG_SKELS       /* one or more child skeletons: all the children (the last argument) */
} lt_skel_arg_kind_t;

typedef struct lt_skel_arg {
  lt_skel_arg_kind_t kind;
  lt_skel_slot_t slot;    /* LT_ARG_KERNEL */
  const char *role;       /* KERNEL: its name in DOT labels, NULL when the kind's name says it;
                             SKEL: the label of the edge to its block */
  lt_skel_kind_t instead; /* KERNEL: a kind that may stand in its place (a map's merge may be
                             a reduce), 0 for none */
} lt_skel_arg_t;

/* LT_SKEL_MAX_ARGS bounds the arguments of one kind's expression. */
#define LT_SKEL_MAX_ARGS 4

typedef struct lt_skel_kind_desc lt_skel_kind_desc_t;

/* A compile function appends the template nodes of `s` to `chain` (template.h). */
typedef int (*lt_skel_compile_fn)(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *chain);

struct lt_skel_kind_desc {
  lt_skel_kind_t kind;
  const char *name;  /* the keyword, as parsed and printed */
  const char *alias; /* another keyword the parser accepts, or NULL */
  int bare;          /* a bare kernel name is this kind, printed so when it has no parameter */
  uint32_t nargs;
  lt_skel_arg_t args[LT_SKEL_MAX_ARGS]; /* in expression order */
  int only_instead;                     /* valid only in place of another kind's kernel */
  lt_skel_compile_fn compile;
};

/* lt__skel_kind returns the row of `kind`, NULL for a value that names no kind. */
const lt_skel_kind_desc_t *lt__skel_kind(lt_skel_kind_t kind);

/* lt__skel_kind_by_name returns the row whose keyword or alias is the `n` bytes at `word`,
 * NULL when none is. */
const lt_skel_kind_desc_t *lt__skel_kind_by_name(const char *word, size_t n);

/* lt__skel_kind_bare returns the row of the kind a bare kernel name stands for. */
const lt_skel_kind_desc_t *lt__skel_kind_bare(void);

/* lt__skel_kind_list writes the keywords of every kind that stands for a skeleton into
 * `out` (of `size` bytes) as "seq, farm, pipe, map, dc, while or if", for messages. */
void lt__skel_kind_list(char *out, size_t size);

/* lt__skel_kind_variadic tells whether the kind takes a list of children; when it does not,
 * lt__skel_nchildren is how many node `s` of that kind must have (its skeleton arguments
 * and the skeletons standing in place of kernels). */
int lt__skel_kind_variadic(const lt_skel_kind_desc_t *d);
size_t lt__skel_nchildren(const lt_skel_kind_desc_t *d, const lt_skel_t *s);

/* lt__skel_slot returns kernel slot `slot` of `s` (borrowed). */
lt_skel_kernel_t *lt__skel_slot(lt_skel_t *s, lt_skel_slot_t slot);
const lt_skel_kernel_t *lt__skel_slot_get(const lt_skel_t *s, lt_skel_slot_t slot);

/* lt__skel_arg_kernel returns the kernel that kernel argument `a` of `s` names: its slot,
 * or, when a skeleton of the `instead` kind stands there (child `*child`, which is then
 * counted), that skeleton's one kernel; *instead tells which. */
const lt_skel_kernel_t *lt__skel_arg_kernel(const lt_skel_t *s, const lt_skel_arg_t *a,
                                            size_t *child, int *instead);

/* lt__skel_arg_instead tells whether a skeleton of the `instead` kind stands in place of
 * kernel argument `a` of `s`: the slot is empty. */
int lt__skel_arg_instead(const lt_skel_t *s, const lt_skel_arg_t *a);

#endif
