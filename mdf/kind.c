/* kind.c: the table of skeleton kinds (kind.h) and the compile function of each kind, the
 * one place that says what a seq, farm, pipe, map, dc, reduce, while or if is. Adding a skeleton is
 * a row here, its compile function beside it, its value in skel.h and its builder in skel.c. Reads
 * trees, writes templates through template.h only. Any thread. */
#include <stdio.h>
#include <string.h>

#include <lithium/error.h>
#include "kind.h"

/* compile_seq makes one instruction of the kernel and its parameter, or, under normal form,
 * a further stage of the seq instruction that ends the chain. */
static int compile_seq(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  uint32_t id = (uint32_t)c->last;
  if (!t->normal_form || c->last < 0 || t->nodes[c->last].kind != LT_TN_SEQ) {
    int rc = lt__template_node_add(t, LT_TN_SEQ, s->kind, c, &id);
    if (rc != LT_OK) return rc;
  }
  const lt_skel_kernel_t *k = &s->k[LT_SLOT_KERNEL];
  return lt__template_stage_add(t, id, k->name, k->param, k->param_len);
}

/* compile_children adds no node of its own: its children follow one another in the chain
 * (a farm only says that instances are independent; a pipe concatenates its stages). */
static int compile_children(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  for (size_t i = 0; i < s->nchildren; i++) {
    int rc = t->flatten(t, s->children[i], c);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

/* compile_reduce makes the node that combines two results of a stream reduce: one seq
 * instruction of the combine kernel (a reduce in a map's merge place is compiled by the
 * map, which takes its kernel). */
static int compile_reduce(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  uint32_t id;
  int rc = lt__template_node_add(t, LT_TN_SEQ, s->kind, c, &id);
  const lt_skel_kernel_t *k = &s->k[LT_SLOT_COMBINE];
  return rc == LT_OK ? lt__template_stage_add(t, id, k->name, k->param, k->param_len) : rc;
}

static int compile_with_block(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c,
                              lt_tnode_kind_t kind);

static int compile_map(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_MAP);
}

static int compile_dc(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_DC);
}

static int compile_while(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_WHILE);
}

static int compile_if(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_IF);
}

static const lt_skel_kind_desc_t kinds[] = {
    {.kind = LT_SKEL_SEQ,
     .name = "seq",
     .bare = 1,
     .nargs = 2,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, NULL, 0}, {LT_ARG_PARAM, 0, NULL, 0}},
     .compile = compile_seq},
    {.kind = LT_SKEL_FARM,
     .name = "farm",
     .nargs = 1,
     .args = {{LT_ARG_SKEL, 0, NULL, 0}},
     .compile = compile_children},
    {.kind = LT_SKEL_PIPE,
     .name = "pipe",
     .alias = "pipeline",
     .nargs = 1,
     .args = {{LT_ARG_SKELS, 0, NULL, 0}},
     .compile = compile_children},
    {.kind = LT_SKEL_MAP,
     .name = "map",
     .nargs = 3,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "split", 0},
              {LT_ARG_SKEL, 0, "each part", 0},
              {LT_ARG_KERNEL, LT_SLOT_COMBINE, "merge", LT_SKEL_REDUCE}},
     .compile = compile_map},
    {.kind = LT_SKEL_DC,
     .name = "dc",
     .nargs = 4,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "cond", 0},
              {LT_ARG_KERNEL, LT_SLOT_DIVIDE, "divide", 0},
              {LT_ARG_SKEL, 0, "base case", 0},
              {LT_ARG_KERNEL, LT_SLOT_COMBINE, "combine", 0}},
     .compile = compile_dc},
    {.kind = LT_SKEL_REDUCE,
     .name = "reduce",
     .nargs = 1,
     .args = {{LT_ARG_KERNEL, LT_SLOT_COMBINE, "combine", 0}},
     .only_instead = 1,
     .compile = compile_reduce},
    {.kind = LT_SKEL_WHILE,
     .name = "while",
     .nargs = 2,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "cond", 0}, {LT_ARG_SKEL, 0, "while true", 0}},
     .compile = compile_while},
    {.kind = LT_SKEL_IF,
     .name = "if",
     .nargs = 3,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "cond", 0},
              {LT_ARG_SKEL, 0, "true", 0},
              {LT_ARG_SKEL, 0, "false", 0}},
     .compile = compile_if},
};

#define NKINDS (sizeof kinds / sizeof kinds[0])

/* compile_blocks compiles the kind's child skeletons, in argument order, as blocks of their
 * own: their indices in blocks[] (at most 2), how many in *n. */
static int compile_blocks(lt_template_t *t, const lt_skel_t *s, uint32_t *blocks, uint32_t *n) {
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  size_t child = 0;
  *n = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind == LT_ARG_KERNEL && lt__skel_arg_instead(s, &d->args[i])) child++;
    if (d->args[i].kind != LT_ARG_SKEL) continue;
    if (*n == 2) return LT_EINVAL;
    int rc = t->block(t, s->children[child++], &blocks[(*n)++]);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

/* compile_with_block compiles the child skeletons as blocks of their own, then adds a node
 * of `kind` whose stages are the kind's kernels in argument order (template.h: LT_TS_*). */
static int compile_with_block(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c,
                              lt_tnode_kind_t kind) {
  uint32_t blocks[2] = {0, 0}, nblocks, id;
  int rc = compile_blocks(t, s, blocks, &nblocks);
  if (rc == LT_OK) rc = lt__template_node_add(t, kind, s->kind, c, &id);
  if (rc != LT_OK) return rc;
  t->nodes[id].block = blocks[0];
  t->nodes[id].alt = blocks[1];
  t->nodes[id].nblocks = nblocks;
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  size_t child = 0;
  for (uint32_t i = 0; i < d->nargs && rc == LT_OK; i++) {
    if (d->args[i].kind == LT_ARG_SKEL) child++;
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    int instead = 0;
    const lt_skel_kernel_t *k = lt__skel_arg_kernel(s, &d->args[i], &child, &instead);
    t->nodes[id].reduce |= instead;
    rc = lt__template_stage_add(t, id, k->name, k->param, k->param_len);
  }
  return rc;
}

const lt_skel_kind_desc_t *lt__skel_kind(lt_skel_kind_t kind) {
  for (size_t i = 0; i < NKINDS; i++)
    if (kinds[i].kind == kind) return &kinds[i];
  return NULL;
}

static int word_is(const char *word, size_t n, const char *name) {
  return name != NULL && strlen(name) == n && memcmp(word, name, n) == 0;
}

const lt_skel_kind_desc_t *lt__skel_kind_by_name(const char *word, size_t n) {
  for (size_t i = 0; i < NKINDS; i++)
    if (word_is(word, n, kinds[i].name) || word_is(word, n, kinds[i].alias)) return &kinds[i];
  return NULL;
}

const lt_skel_kind_desc_t *lt__skel_kind_bare(void) {
  for (size_t i = 0; i < NKINDS; i++)
    if (kinds[i].bare) return &kinds[i];
  return NULL;
}

void lt__skel_kind_list(char *out, size_t size) {
  size_t used = 0, listed = 0, total = 0;
  out[0] = '\0';
  for (size_t i = 0; i < NKINDS; i++)
    total += !kinds[i].only_instead;
  for (size_t i = 0; i < NKINDS && used < size; i++) {
    if (kinds[i].only_instead) continue;
    const char *sep = listed == 0 ? "" : listed + 1 == total ? " or " : ", ";
    int n = snprintf(out + used, size - used, "%s%s", sep, kinds[i].name);
    if (n < 0) return;
    used += (size_t)n;
    listed++;
  }
}

int lt__skel_kind_variadic(const lt_skel_kind_desc_t *d) {
  for (uint32_t i = 0; i < d->nargs; i++)
    if (d->args[i].kind == LT_ARG_SKELS) return 1;
  return 0;
}

size_t lt__skel_nchildren(const lt_skel_kind_desc_t *d, const lt_skel_t *s) {
  size_t n = 0;
  for (uint32_t i = 0; i < d->nargs; i++)
    n += d->args[i].kind == LT_ARG_SKEL ||
         (d->args[i].kind == LT_ARG_KERNEL && lt__skel_arg_instead(s, &d->args[i]));
  return n;
}

lt_skel_kernel_t *lt__skel_slot(lt_skel_t *s, lt_skel_slot_t slot) {
  return slot < LT_SKEL_SLOTS ? &s->k[slot] : NULL;
}

const lt_skel_kernel_t *lt__skel_slot_get(const lt_skel_t *s, lt_skel_slot_t slot) {
  return lt__skel_slot((lt_skel_t *)s, slot);
}

int lt__skel_arg_instead(const lt_skel_t *s, const lt_skel_arg_t *a) {
  return a->instead != 0 && lt__skel_slot_get(s, a->slot)->name == NULL;
}

const lt_skel_kernel_t *lt__skel_arg_kernel(const lt_skel_t *s, const lt_skel_arg_t *a,
                                            size_t *child, int *instead) {
  *instead = lt__skel_arg_instead(s, a);
  if (!*instead) return lt__skel_slot_get(s, a->slot);
  const lt_skel_t *sub = s->children[(*child)++];
  const lt_skel_kind_desc_t *d = lt__skel_kind(sub->kind);
  return lt__skel_slot_get(sub, d->args[0].slot);
}
