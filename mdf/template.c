/* template.c: the compiler from skeleton trees to MDF templates (template.h). Flattens
 * pipes and farms into chains, makes a block for every map body and dc base, fuses adjacent
 * seq stages under normal form. Knows nothing of instances or servers. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "template.h"

/* kernel_index returns the index of `name` in t->kernels, adding it when new. */
static int kernel_index(lt_template_t *t, const char *name, uint32_t *idx) {
  for (uint32_t i = 0; i < t->nkernels; i++) {
    if (strcmp(t->kernels[i], name) == 0) {
      *idx = i;
      return LT_OK;
    }
  }
  char **k = realloc(t->kernels, (t->nkernels + 1) * sizeof *k);
  if (k == NULL) return LT_ENOMEM;
  t->kernels = k;
  if ((k[t->nkernels] = strdup(name)) == NULL) return LT_ENOMEM;
  *idx = t->nkernels++;
  return LT_OK;
}

static int add_stage(lt_template_t *t, lt_tnode_t *n, const char *kernel, const void *param,
                     size_t len) {
  lt_tstage_t *st = realloc(n->stages, (n->nstages + 1) * sizeof *st);
  if (st == NULL) return LT_ENOMEM;
  n->stages = st;
  lt_tstage_t *s = &st[n->nstages];
  memset(s, 0, sizeof *s);
  n->nstages++;
  if (len > 0) {
    if ((s->param = malloc(len)) == NULL) return LT_ENOMEM;
    memcpy(s->param, param, len);
    s->param_len = len;
  }
  return kernel_index(t, kernel, &s->kernel);
}

/* new_node appends an empty node of `kind` and returns its index in *id. */
static int new_node(lt_template_t *t, lt_tnode_kind_t kind, uint32_t *id) {
  lt_tnode_t *n = realloc(t->nodes, (t->nnodes + 1) * sizeof *n);
  if (n == NULL) return LT_ENOMEM;
  t->nodes = n;
  memset(&n[t->nnodes], 0, sizeof *n);
  n[t->nnodes].kind = kind;
  n[t->nnodes].next = -1;
  *id = t->nnodes++;
  return LT_OK;
}

/* A chain under construction: its first and last node, -1 while empty. */
typedef struct chain {
  int32_t first, last;
} chain_t;

static int compile_block(lt_template_t *t, const lt_skel_t *s, uint32_t *block);

static void link(lt_template_t *t, chain_t *c, uint32_t id) {
  if (c->last >= 0) t->nodes[c->last].next = (int32_t)id;
  if (c->first < 0) c->first = (int32_t)id;
  c->last = (int32_t)id;
}

static int flatten(lt_template_t *t, const lt_skel_t *s, chain_t *c) {
  uint32_t id;
  int rc;
  switch (s->kind) {
  case LT_SKEL_SEQ:
    if (t->normal_form && c->last >= 0 && t->nodes[c->last].kind == LT_TN_SEQ)
      return add_stage(t, &t->nodes[c->last], s->kernel, s->param, s->param_len);
    if ((rc = new_node(t, LT_TN_SEQ, &id)) != LT_OK) return rc;
    link(t, c, id);
    return add_stage(t, &t->nodes[id], s->kernel, s->param, s->param_len);
  case LT_SKEL_FARM:
    return flatten(t, s->children[0], c);
  case LT_SKEL_PIPE:
    for (size_t i = 0; i < s->nchildren; i++)
      if ((rc = flatten(t, s->children[i], c)) != LT_OK) return rc;
    return LT_OK;
  case LT_SKEL_MAP:
  case LT_SKEL_DC: {
    uint32_t block;
    if ((rc = compile_block(t, s->children[0], &block)) != LT_OK) return rc;
    if ((rc = new_node(t, s->kind == LT_SKEL_MAP ? LT_TN_MAP : LT_TN_DC, &id)) != LT_OK) return rc;
    link(t, c, id);
    t->nodes[id].block = block;
    if ((rc = add_stage(t, &t->nodes[id], s->kernel, NULL, 0)) != LT_OK) return rc;
    if (s->kind == LT_SKEL_DC && (rc = add_stage(t, &t->nodes[id], s->divide, NULL, 0)) != LT_OK)
      return rc;
    return add_stage(t, &t->nodes[id], s->combine, NULL, 0);
  }
  }
  return LT_EINVAL;
}

static int compile_block(lt_template_t *t, const lt_skel_t *s, uint32_t *block) {
  uint32_t *b = realloc(t->blocks, (t->nblocks + 1) * sizeof *b);
  if (b == NULL) return LT_ENOMEM;
  t->blocks = b;
  *block = t->nblocks++;
  chain_t c = {-1, -1};
  int rc = flatten(t, s, &c);
  if (rc != LT_OK) return rc;
  t->blocks[*block] = (uint32_t)c.first;
  return LT_OK;
}

int lt__template_compile(lt_template_t **out, const lt_skel_t *s, int normal_form) {
  *out = NULL;
  if (!lt__skel_valid(s)) return LT_EINVAL;
  lt_template_t *t = calloc(1, sizeof *t);
  if (t == NULL) return LT_ENOMEM;
  t->normal_form = normal_form;
  uint32_t root;
  int rc = compile_block(t, s, &root);
  if (rc != LT_OK) {
    lt__template_free(t);
    return rc;
  }
  *out = t;
  return LT_OK;
}

uint32_t lt__template_chain_length(const lt_template_t *t, uint32_t block) {
  uint32_t n = 0;
  for (int32_t i = (int32_t)t->blocks[block]; i >= 0; i = t->nodes[i].next)
    n++;
  return n;
}

void lt__template_free(lt_template_t *t) {
  if (t == NULL) return;
  for (uint32_t i = 0; i < t->nnodes; i++) {
    for (uint32_t k = 0; k < t->nodes[i].nstages; k++)
      free(t->nodes[i].stages[k].param);
    free(t->nodes[i].stages);
  }
  for (uint32_t i = 0; i < t->nkernels; i++)
    free(t->kernels[i]);
  free(t->nodes);
  free(t->kernels);
  free(t->blocks);
  free(t);
}
