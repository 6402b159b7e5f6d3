/* compile.c: the compiler from skeleton trees to MDF templates (lt__template_compile in
 * template.h). It walks the tree through the table of skeleton kinds: each kind's compile
 * function (kind.c) builds its nodes with template.c's steps and compiles its children
 * through the two hooks this file installs in the template (flatten, block), so that
 * kind.c never calls back into the compiler. Knows nothing of instances or servers. */
#include <stdlib.h>

#include <lithium/error.h>
#include "kind.h"
#include "template.h"
#include "vec.h"

/* flatten appends the nodes of `s` to chain `c`: its kind's compile function. */
static int flatten(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  return d != NULL ? d->compile(t, s, c) : LT_EINVAL;
}

/* block compiles `s` as a new block of its own, its index in *block. */
static int block(lt_template_t *t, const lt_skel_t *s, uint32_t *block) {
  if (LT_VEC_PUSH(t->blocks, t->nblocks, t->capblocks) == NULL) return LT_ENOMEM;
  *block = t->nblocks - 1;
  lt_tchain_t c = {-1, -1};
  int rc = flatten(t, s, &c);
  if (rc != LT_OK) return rc;
  t->blocks[*block] = (uint32_t)c.first;
  return LT_OK;
}

/* compile_program compiles `s` as block 0; a program that reduces its stream gets its
 * stages before the reduce as block 0 and the reduce's combine as a block of its own. */
static int compile_program(lt_template_t *t, const lt_skel_t *s) {
  uint32_t root, combine;
  if (!lt__skel_reduces(s)) return block(t, s, &root);
  lt_skel_t stages = *s; /* the same pipe without its last stage (borrowed children) */
  stages.nchildren--;
  int rc = block(t, &stages, &root);
  if (rc == LT_OK) rc = block(t, s->children[s->nchildren - 1], &combine);
  if (rc == LT_OK) t->combine_block = (int32_t)combine;
  return rc;
}

int lt__template_compile(lt_template_t **out, const lt_skel_t *s, int normal_form) {
  *out = NULL;
  if (!lt__skel_valid(s)) return LT_EINVAL;
  lt_template_t *t = calloc(1, sizeof *t);
  if (t == NULL) return LT_ENOMEM;
  t->normal_form = normal_form;
  t->combine_block = -1;
  t->flatten = flatten;
  t->block = block;
  int rc = compile_program(t, s);
  if (rc != LT_OK) {
    lt__template_free(t);
    return rc;
  }
  *out = t;
  return LT_OK;
}
