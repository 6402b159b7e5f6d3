/* kind.c: the table of skeleton kinds (kind.h) and the compile function of each kind, the
 * one place that says what a seq, farm, pipe, map or dc is. Adding a skeleton is a row here,
 * its compile function beside it, its value in skel.h and its builder in skel.c. Reads
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
  return lt__template_stage_add(t, id, s->kernel, s->param, s->param_len);
}

/* compile_children adds no node of its own: its children follow one another in the chain
 * (a farm only says that instances are independent; a pipe concatenates its stages). */
static int compile_children(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  for (size_t i = 0; i < s->nchildren; i++) {
    int rc = lt__template_flatten(t, s->children[i], c);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

static int compile_with_block(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c,
                              lt_tnode_kind_t kind);

static int compile_map(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_MAP);
}

static int compile_dc(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c) {
  return compile_with_block(t, s, c, LT_TN_DC);
}

static const lt_skel_kind_desc_t kinds[] = {
    {.kind = LT_SKEL_SEQ,
     .name = "seq",
     .bare = 1,
     .nargs = 2,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, NULL}, {LT_ARG_PARAM, 0, NULL}},
     .compile = compile_seq},
    {.kind = LT_SKEL_FARM,
     .name = "farm",
     .nargs = 1,
     .args = {{LT_ARG_SKEL, 0, NULL}},
     .compile = compile_children},
    {.kind = LT_SKEL_PIPE,
     .name = "pipe",
     .alias = "pipeline",
     .nargs = 1,
     .args = {{LT_ARG_SKELS, 0, NULL}},
     .compile = compile_children},
    {.kind = LT_SKEL_MAP,
     .name = "map",
     .nargs = 3,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "split"},
              {LT_ARG_SKEL, 0, NULL},
              {LT_ARG_KERNEL, LT_SLOT_COMBINE, "merge"}},
     .dot_block = "each part",
     .compile = compile_map},
    {.kind = LT_SKEL_DC,
     .name = "dc",
     .nargs = 4,
     .args = {{LT_ARG_KERNEL, LT_SLOT_KERNEL, "cond"},
              {LT_ARG_KERNEL, LT_SLOT_DIVIDE, "divide"},
              {LT_ARG_SKEL, 0, NULL},
              {LT_ARG_KERNEL, LT_SLOT_COMBINE, "combine"}},
     .dot_block = "base case",
     .compile = compile_dc},
};

#define NKINDS (sizeof kinds / sizeof kinds[0])

/* compile_with_block compiles the one child as a block of its own, then adds a node of
 * `kind` whose stages are the kind's kernels in argument order (template.h: LT_TS_*). */
static int compile_with_block(lt_template_t *t, const lt_skel_t *s, lt_tchain_t *c,
                              lt_tnode_kind_t kind) {
  uint32_t block, id;
  int rc = lt__template_block(t, s->children[0], &block);
  if (rc == LT_OK) rc = lt__template_node_add(t, kind, s->kind, c, &id);
  if (rc != LT_OK) return rc;
  t->nodes[id].block = block;
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  for (uint32_t i = 0; i < d->nargs && rc == LT_OK; i++)
    if (d->args[i].kind == LT_ARG_KERNEL)
      rc = lt__template_stage_add(t, id, lt__skel_slot_get(s, d->args[i].slot), NULL, 0);
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
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < NKINDS && used < size; i++) {
    const char *sep = i == 0 ? "" : i + 1 == NKINDS ? " or " : ", ";
    int n = snprintf(out + used, size - used, "%s%s", sep, kinds[i].name);
    if (n < 0) return;
    used += (size_t)n;
  }
}

int lt__skel_kind_variadic(const lt_skel_kind_desc_t *d) {
  for (uint32_t i = 0; i < d->nargs; i++)
    if (d->args[i].kind == LT_ARG_SKELS) return 1;
  return 0;
}

size_t lt__skel_kind_nchildren(const lt_skel_kind_desc_t *d) {
  size_t n = 0;
  for (uint32_t i = 0; i < d->nargs; i++)
    n += d->args[i].kind == LT_ARG_SKEL;
  return n;
}

char **lt__skel_slot(lt_skel_t *s, lt_skel_slot_t slot) {
  switch (slot) {
  case LT_SLOT_KERNEL:
    return &s->kernel;
  case LT_SLOT_DIVIDE:
    return &s->divide;
  case LT_SLOT_COMBINE:
    return &s->combine;
  }
  return NULL;
}

const char *lt__skel_slot_get(const lt_skel_t *s, lt_skel_slot_t slot) {
  return *lt__skel_slot((lt_skel_t *)s, slot);
}
