/* template.c: the MDF template (template.h) as a structure: blocks, chains, nodes, stages
 * and the kernel list, and the steps it is built with. How a skeleton tree becomes one is
 * compile.c's (and, per kind, kind.c's); this file knows nothing of skeleton kinds,
 * instances or servers. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "template.h"
#include "vec.h"

/* kernel_index returns the index of `name` in t->kernels, adding it when new. */
static int kernel_index(lt_template_t *t, const char *name, uint32_t *idx) {
  for (uint32_t i = 0; i < t->nkernels; i++) {
    if (strcmp(t->kernels[i], name) == 0) {
      *idx = i;
      return LT_OK;
    }
  }
  if (LT_VEC_RESERVE(t->kernels, t->capkernels, t->nkernels + 1) != LT_OK) return LT_ENOMEM;
  if ((t->kernels[t->nkernels] = strdup(name)) == NULL) return LT_ENOMEM;
  *idx = t->nkernels++;
  return LT_OK;
}

int lt__template_stage_add(lt_template_t *t, uint32_t id, const char *kernel, const void *param,
                           size_t len) {
  lt_tnode_t *n = &t->nodes[id];
  lt_tstage_t *s = LT_VEC_PUSH(n->stages, n->nstages, n->capstages);
  if (s == NULL) return LT_ENOMEM;
  if (len > 0) {
    if ((s->param = malloc(len)) == NULL) return LT_ENOMEM;
    memcpy(s->param, param, len);
    s->param_len = len;
  }
  return kernel_index(t, kernel, &s->kernel);
}

int lt__template_node_add(lt_template_t *t, lt_tnode_kind_t kind, lt_skel_kind_t skel,
                          lt_tchain_t *c, uint32_t *id) {
  lt_tnode_t *n = LT_VEC_PUSH(t->nodes, t->nnodes, t->capnodes);
  if (n == NULL) return LT_ENOMEM;
  n->kind = kind;
  n->skel = skel;
  n->next = -1;
  *id = t->nnodes - 1;
  if (c->last >= 0) t->nodes[c->last].next = (int32_t)*id;
  if (c->first < 0) c->first = (int32_t)*id;
  c->last = (int32_t)*id;
  return LT_OK;
}

uint32_t lt__template_chain_length(const lt_template_t *t, uint32_t block) {
  uint32_t n = 0;
  for (int32_t i = (int32_t)t->blocks[block]; i >= 0; i = t->nodes[i].next)
    n++;
  return n;
}

int lt__template_recurs(const lt_template_t *t) {
  if (t->combine_block >= 0) return 1;
  for (uint32_t i = 0; i < t->nnodes; i++) {
    const lt_tnode_t *n = &t->nodes[i];
    if (n->kind == LT_TN_DC || n->kind == LT_TN_WHILE || (n->kind == LT_TN_MAP && n->reduce))
      return 1;
  }
  return 0;
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
