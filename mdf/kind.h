/* kind.h: the table of skeleton kinds, one row per kind (seq, farm, pipe, map, dc): its
 * keyword and alias, its arguments in expression order (kernel names in which slot, an
 * optional parameter, one child skeleton or a variadic list), its DOT roles and how it
 * compiles. The parser, the printer, DOT, tree validation and the template compiler read
 * it instead of switching on the kind. Immutable; any thread. */
#ifndef LT_KIND_H
#define LT_KIND_H

#include <stddef.h>
#include <stdint.h>
#include "skel.h"
#include "template.h"

/* What an argument of a skeleton expression is. */
typedef enum lt_skel_arg_kind {
  LT_ARG_KERNEL = 1, /* a kernel name "module:function", held in the node's `slot` */
  LT_ARG_PARAM,      /* optional: `, "bytes"`, the node's parameter */
  LT_ARG_SKEL,       /* one child skeleton: the next of the node's children */
  LT_ARG_SKELS       /* one or more child skeletons: all the children (the last argument) */
} lt_skel_arg_kind_t;

/* The field of struct lt_skel holding a kernel name. */
typedef enum lt_skel_slot { LT_SLOT_KERNEL = 0, LT_SLOT_DIVIDE, LT_SLOT_COMBINE } lt_skel_slot_t;

typedef struct lt_skel_arg {
  lt_skel_arg_kind_t kind;
  lt_skel_slot_t slot; /* LT_ARG_KERNEL */
  const char *role; /* LT_ARG_KERNEL: its name in DOT labels, NULL when the kind's name says it */
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
  const char *dot_block;                /* DOT label of the edge to its child block, or NULL */
  lt_skel_compile_fn compile;
};

/* lt__skel_kind returns the row of `kind`, NULL for a value that names no kind. */
const lt_skel_kind_desc_t *lt__skel_kind(lt_skel_kind_t kind);

/* lt__skel_kind_by_name returns the row whose keyword or alias is the `n` bytes at `word`,
 * NULL when none is. */
const lt_skel_kind_desc_t *lt__skel_kind_by_name(const char *word, size_t n);

/* lt__skel_kind_bare returns the row of the kind a bare kernel name stands for. */
const lt_skel_kind_desc_t *lt__skel_kind_bare(void);

/* lt__skel_kind_list writes the keywords of every kind into `out` (of `size` bytes) as
 * "seq, farm, pipe, map or dc", for messages. */
void lt__skel_kind_list(char *out, size_t size);

/* lt__skel_kind_variadic tells whether the kind takes a list of children; when it does not,
 * lt__skel_kind_nchildren is how many it takes. */
int lt__skel_kind_variadic(const lt_skel_kind_desc_t *d);
size_t lt__skel_kind_nchildren(const lt_skel_kind_desc_t *d);

/* lt__skel_slot returns the field of `s` that kernel slot `slot` names (borrowed). */
char **lt__skel_slot(lt_skel_t *s, lt_skel_slot_t slot);
const char *lt__skel_slot_get(const lt_skel_t *s, lt_skel_slot_t slot);

#endif
