/* dot.c: a template as a Graphviz digraph (`lithium graph`). One cluster per block, one box
 * per node labelled with its kind and kernels, solid edges along a chain, dashed edges from
 * a map, dc, while or if node to the blocks it runs, labelled with their roles. Reads the template
 * only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kind.h"
#include "strbuf.h"
#include "template.h"

static const char *kname(const lt_template_t *t, const lt_tnode_t *n, uint32_t i) {
  return t->kernels[n->stages[i].kernel];
}

/* stage_role returns the DOT role of stage `i` of node `n` of kind `d`: the role of its
 * i-th kernel argument, or the name of the kind standing in its place (reduce), NULL for an
 * unnamed one (a seq's stages, fused or not). */
static const char *stage_role(const lt_skel_kind_desc_t *d, const lt_tnode_t *n, uint32_t i) {
  for (uint32_t a = 0; a < d->nargs; a++) {
    const lt_skel_arg_t *arg = &d->args[a];
    if (arg->kind != LT_ARG_KERNEL || i-- != 0) continue;
    return arg->instead != 0 && n->reduce ? lt__skel_kind(arg->instead)->name : arg->role;
  }
  return NULL;
}

/* block_role returns the label of the edge to the `i`-th block of a node of kind `d`: the
 * role of its i-th skeleton argument. */
static const char *block_role(const lt_skel_kind_desc_t *d, uint32_t i) {
  for (uint32_t a = 0; a < d->nargs; a++)
    if (d->args[a].kind == LT_ARG_SKEL && i-- == 0) return d->args[a].role;
  return "block";
}

/* emit_node writes a box labelled with the node's kind and its stages: "role kernel" a line
 * each, or unnamed stages on one line separated by " ; ". */
static void emit_node(lt_strbuf_t *o, const lt_template_t *t, uint32_t id) {
  const lt_tnode_t *n = &t->nodes[id];
  const lt_skel_kind_desc_t *d = lt__skel_kind(n->skel);
  lt__strbuf_printf(o, "    n%u [label=\"%s", id, d->name);
  for (uint32_t i = 0; i < n->nstages; i++) {
    const char *role = stage_role(d, n, i);
    const char *param = n->stages[i].param_len ? " (param)" : "";
    if (role != NULL)
      lt__strbuf_printf(o, "\\n%s %s%s", role, kname(t, n, i), param);
    else
      lt__strbuf_printf(o, "%s%s%s", i ? " ; " : "\\n", kname(t, n, i), param);
  }
  lt__strbuf_printf(o, "\"];\n");
}

char *lt__template_dot(const lt_template_t *t) {
  lt_strbuf_t o = {0};
  lt__strbuf_printf(&o, "digraph lithium {\n  node [shape=box, fontname=\"monospace\"];\n");
  lt__strbuf_printf(&o, "  input [shape=oval]; result [shape=oval];\n");
  for (uint32_t b = 0; b < t->nblocks; b++) {
    lt__strbuf_printf(&o, "  subgraph cluster_b%u {\n    label=\"%s\";\n", b,
                      b == 0                           ? "program"
                      : (int32_t)b == t->combine_block ? "stream reduce"
                                                       : "block");
    for (int32_t i = (int32_t)t->blocks[b]; i >= 0; i = t->nodes[i].next)
      emit_node(&o, t, (uint32_t)i);
    lt__strbuf_printf(&o, "  }\n");
  }
  lt__strbuf_printf(&o, "  input -> n%u;\n", t->blocks[0]);
  for (uint32_t i = 0; i < t->nnodes; i++) {
    const lt_tnode_t *n = &t->nodes[i];
    if (n->next >= 0) lt__strbuf_printf(&o, "  n%u -> n%d;\n", i, n->next);
    const lt_skel_kind_desc_t *d = lt__skel_kind(n->skel);
    uint32_t blocks[] = {n->block, n->alt};
    for (uint32_t k = 0; k < n->nblocks; k++)
      lt__strbuf_printf(&o, "  n%u -> n%u [style=dashed, label=\"%s\"];\n", i, t->blocks[blocks[k]],
                        block_role(d, k));
  }
  int32_t last = (int32_t)t->blocks[0];
  while (t->nodes[last].next >= 0)
    last = t->nodes[last].next;
  if (t->combine_block >= 0) { /* every task's result goes to the stream's reduce */
    uint32_t c = t->blocks[t->combine_block];
    lt__strbuf_printf(&o, "  n%d -> n%u [label=\"every result, two at a time\"];\n", last, c);
    last = (int32_t)c;
  }
  lt__strbuf_printf(&o, "  n%d -> result;\n}\n", last);
  return lt__strbuf_take(&o);
}
