/* instance.c: graph instances: token slots per node, firing, completion. Knows nothing of
 * servers or the wire; the dispatcher decides where fired nodes run. One thread. */
#include <stdlib.h>

#include <lithium/error.h>
#include "instance.h"

int lt__instance_new(lt_instance_t **out, const lt_template_t *t, uint64_t task) {
  *out = NULL;
  lt_instance_t *inst = calloc(1, sizeof *inst);
  if (inst == NULL) return LT_ENOMEM;
  inst->tmpl = t;
  inst->slots = calloc(t->nslots > 0 ? t->nslots : 1, sizeof *inst->slots);
  inst->missing = calloc(t->nnodes > 0 ? t->nnodes : 1, sizeof *inst->missing);
  if (inst->slots == NULL || inst->missing == NULL) {
    lt__instance_free(inst);
    return LT_ENOMEM;
  }
  for (uint32_t i = 0; i < t->nnodes; i++) inst->missing[i] = t->nodes[i].ninputs;
  inst->task = task;
  *out = inst;
  return LT_OK;
}

/* put stores a token into input `slot` of `node` and fires the node when it is complete. */
static int put(lt_instance_t *inst, uint32_t node, uint32_t slot, lt_value_t *v,
               lt_fire_fn fire, void *ud) {
  const lt_tnode_t *n = &inst->tmpl->nodes[node];
  lt_value_t **s = &inst->slots[n->slot_base + slot];
  if (slot >= n->ninputs || *s != NULL || inst->missing[node] == 0) return LT_ESTATE;
  *s = lt__value_ref(v);
  if (--inst->missing[node] == 0) fire(ud, inst, node);
  return LT_OK;
}

int lt__instance_feed(lt_instance_t *inst, lt_value_t *v, lt_fire_fn fire, void *ud) {
  return put(inst, inst->tmpl->entry, 0, v, fire, ud);
}

int lt__instance_complete(lt_instance_t *inst, uint32_t node, lt_value_t *v, lt_fire_fn fire,
                          void *ud) {
  if (node >= inst->tmpl->nnodes || inst->done) return LT_ESTATE;
  const lt_tnode_t *n = &inst->tmpl->nodes[node];
  if (inst->missing[node] != 0 || inst->slots[n->slot_base] == NULL) return LT_ESTATE;
  for (uint32_t i = 0; i < n->ninputs; i++) {
    lt__value_unref(inst->slots[n->slot_base + i]);
    inst->slots[n->slot_base + i] = NULL;
  }
  if (n->succ < 0) {
    inst->result = lt__value_ref(v);
    inst->done = 1;
    return LT_OK;
  }
  return put(inst, (uint32_t)n->succ, n->succ_slot, v, fire, ud);
}

lt_value_t *const *lt__instance_inputs(const lt_instance_t *inst, uint32_t node, uint32_t *n) {
  const lt_tnode_t *tn = &inst->tmpl->nodes[node];
  *n = tn->ninputs;
  return &inst->slots[tn->slot_base];
}

void lt__instance_free(lt_instance_t *inst) {
  if (inst == NULL) return;
  if (inst->slots != NULL)
    for (uint32_t i = 0; i < inst->tmpl->nslots; i++) lt__value_unref(inst->slots[i]);
  lt__value_unref(inst->result);
  free(inst->slots);
  free(inst->missing);
  free(inst);
}
