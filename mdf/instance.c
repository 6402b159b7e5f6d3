/* instance.c: graph instances as trees of frames (instance.h). Knows nothing of servers or
 * the wire; the caller decides where each fired instruction runs. One thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "instance.h"

typedef enum phase {
  PH_RUN = 1, /* the node's own instruction (seq, split, dc step) is out */
  PH_GATHER,  /* waiting for the children of a map or a divided dc */
  PH_FINAL,   /* the merge/combine is out */
  PH_BASE     /* waiting for the base block of a dc base case */
} phase_t;

struct lt_frame {
  lt_instance_t *inst;
  lt_frame_t *parent; /* NULL for the root: its token is the task's result */
  uint32_t slot;      /* index in the parent's parts */
  int32_t node;
  int single; /* a dc part: finishes after its own node instead of following the chain */
  phase_t phase;
  lt_token_t token; /* input of the node; the block's result once finished */
  lt_token_t *parts;
  uint32_t nparts;
  uint32_t missing;
  lt_frame_t *prev, *next; /* inst->live */
};

/* token_set copies `src` into `t` (taking a value reference), dropping what t held. */
static void token_set(lt_token_t *t, const lt_token_t *src) {
  lt_value_t *old = t->value;
  *t = *src;
  if (t->value != NULL) lt__value_ref(t->value);
  lt__value_unref(old);
}

static void token_clear(lt_token_t *t) {
  lt__value_unref(t->value);
  memset(t, 0, sizeof *t);
  t->holder = -1;
}

static void parts_drop(lt_frame_t *f) {
  for (uint32_t i = 0; i < f->nparts; i++)
    lt__value_unref(f->parts[i].value);
  free(f->parts);
  f->parts = NULL;
  f->nparts = f->missing = 0;
}

static void frame_free(lt_frame_t *f) {
  lt_instance_t *inst = f->inst;
  if (f->prev != NULL)
    f->prev->next = f->next;
  else
    inst->live = f->next;
  if (f->next != NULL) f->next->prev = f->prev;
  lt__value_unref(f->token.value);
  parts_drop(f);
  free(f);
}

static lt_frame_t *frame_new(lt_instance_t *inst, lt_frame_t *parent, uint32_t slot, int32_t node,
                             int single, const lt_token_t *tok) {
  lt_frame_t *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  f->inst = inst;
  f->parent = parent;
  f->slot = slot;
  f->node = node;
  f->single = single;
  f->phase = PH_RUN;
  f->token.holder = -1;
  token_set(&f->token, tok);
  f->next = inst->live;
  if (inst->live != NULL) inst->live->prev = f;
  inst->live = f;
  inst->frames++;
  return f;
}

int lt__instance_new(lt_instance_t **out, const lt_template_t *t, uint64_t task) {
  lt_instance_t *inst = calloc(1, sizeof *inst);
  *out = inst;
  if (inst == NULL) return LT_ENOMEM;
  inst->tmpl = t;
  inst->task = task;
  return LT_OK;
}

int lt__instance_feed(lt_instance_t *inst, lt_value_t *v, lt_fire_fn fire, void *ud) {
  if (inst->live != NULL || inst->done) return LT_ESTATE;
  lt_token_t tok = {.value = v, .holder = -1, .size = v->len};
  lt_frame_t *f = frame_new(inst, NULL, 0, (int32_t)inst->tmpl->blocks[0], 0, &tok);
  if (f == NULL) return LT_ENOMEM;
  fire(ud, inst, f);
  return LT_OK;
}

void lt__frame_fire_info(const lt_frame_t *f, lt_fire_t *out) {
  const lt_tnode_t *n = &f->inst->tmpl->nodes[f->node];
  if (f->phase == PH_FINAL) {
    out->op = LT_OP_SEQ;
    out->stages = &n->stages[n->kind == LT_TN_MAP ? LT_TS_MERGE : LT_TS_COMBINE];
    out->nstages = 1;
    out->inputs = f->parts;
    out->ninputs = f->nparts;
    return;
  }
  out->inputs = &f->token;
  out->ninputs = 1;
  out->stages = n->stages;
  switch (n->kind) {
  case LT_TN_SEQ:
    out->op = LT_OP_SEQ;
    out->nstages = n->nstages;
    break;
  case LT_TN_MAP:
    out->op = LT_OP_SPLIT;
    out->nstages = 1;
    break;
  case LT_TN_DC:
    out->op = LT_OP_DCSTEP;
    out->nstages = 2; /* cond, divide */
    break;
  }
}

/* finish_chain moves a frame on after its node produced f->token: to the next node of its
 * chain, or, at the end, up into its parent, as far up as frames complete. */
static void finish_chain(lt_frame_t *f, lt_fire_fn fire, void *ud) {
  lt_instance_t *inst = f->inst;
  for (;;) {
    const lt_tnode_t *n = &inst->tmpl->nodes[f->node];
    if (!f->single && n->next >= 0) {
      f->node = n->next;
      f->phase = PH_RUN;
      fire(ud, inst, f);
      return;
    }
    lt_frame_t *p = f->parent;
    if (p == NULL) {
      inst->result = f->token;
      f->token.value = NULL;
      inst->done = 1;
      frame_free(f);
      return;
    }
    p->parts[f->slot] = f->token;
    f->token.value = NULL;
    frame_free(f);
    if (--p->missing > 0) return;
    if (p->phase == PH_BASE) {
      token_set(&p->token, &p->parts[0]);
      parts_drop(p);
      f = p; /* the dc node is done: go on with the parent's chain */
      continue;
    }
    p->phase = PH_FINAL;
    fire(ud, inst, p);
    return;
  }
}

/* gather starts a child frame per part (the body block, or the same dc node), or fires the
 * merge/combine at once when there are none. */
static int gather(lt_frame_t *f, phase_t phase, int32_t child_node, int single,
                  const lt_token_t *toks, uint32_t n, lt_fire_fn fire, void *ud) {
  f->phase = n == 0 ? PH_FINAL : phase;
  if (n == 0) {
    fire(ud, f->inst, f);
    return LT_OK;
  }
  f->parts = calloc(n, sizeof *f->parts);
  if (f->parts == NULL) return LT_ENOMEM;
  /* A part not yet computed has no holder: lt__instance_tokens may visit it (a task that
   * fails or is recomputed releases what its instance holds). */
  for (uint32_t i = 0; i < n; i++)
    f->parts[i].holder = -1;
  f->nparts = f->missing = n;
  /* Create every child before firing any, so a synchronous caller that completes a child
   * inside `fire` never sees a half-built gather. */
  lt_frame_t **kids = malloc(n * sizeof *kids);
  if (kids == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    kids[i] = frame_new(f->inst, f, i, child_node, single, &toks[i]);
    if (kids[i] == NULL) {
      free(kids);
      return LT_ENOMEM;
    }
  }
  for (uint32_t i = 0; i < n; i++)
    fire(ud, f->inst, kids[i]);
  free(kids);
  return LT_OK;
}

lt_token_t *lt__frame_input_token(lt_frame_t *f, uint32_t i) {
  return f->phase == PH_FINAL ? &f->parts[i] : &f->token;
}

int lt__frame_moves_on(const lt_frame_t *f) {
  return f->phase == PH_FINAL ||
         (f->phase == PH_RUN && f->inst->tmpl->nodes[f->node].kind == LT_TN_SEQ);
}

void lt__instance_dispatched(lt_instance_t *inst, lt_frame_t *f, const lt_token_t *out,
                             lt_fire_fn fire, void *ud) {
  (void)inst;
  token_set(&f->token, out);
  parts_drop(f);
  finish_chain(f, fire, ud);
}

void lt__instance_tokens(lt_instance_t *inst, void (*fn)(void *ud, const lt_token_t *t), void *ud) {
  for (lt_frame_t *f = inst->live; f != NULL; f = f->next) {
    fn(ud, &f->token);
    for (uint32_t i = 0; i < f->nparts; i++)
      fn(ud, &f->parts[i]);
  }
}

int lt__instance_complete(lt_instance_t *inst, lt_frame_t *f, int answer, const lt_token_t *outs,
                          uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen) {
  const lt_template_t *t = inst->tmpl;
  const lt_tnode_t *n = &t->nodes[f->node];
  const char *why = NULL;
  if (f->phase == PH_FINAL || (f->phase == PH_RUN && n->kind == LT_TN_SEQ)) {
    if (nout != 1) {
      why = "a stage must make exactly one output";
    } else {
      token_set(&f->token, &outs[0]);
      parts_drop(f);
      finish_chain(f, fire, ud);
      return LT_OK;
    }
  } else if (f->phase == PH_RUN && n->kind == LT_TN_MAP) {
    return gather(f, PH_GATHER, (int32_t)t->blocks[n->block], 0, outs, nout, fire, ud);
  } else if (f->phase == PH_RUN && n->kind == LT_TN_DC && answer == 1) {
    if (nout != 0) {
      why = "a base case must make no parts";
    } else {
      lt_token_t tok = f->token;
      return gather(f, PH_BASE, (int32_t)t->blocks[n->block], 0, &tok, 1, fire, ud);
    }
  } else if (f->phase == PH_RUN && n->kind == LT_TN_DC && answer == 0) {
    return gather(f, PH_GATHER, f->node, 1, outs, nout, fire, ud);
  } else {
    why = f->phase == PH_RUN ? "a dc step needs an answer" : "the frame was not waiting";
  }
  snprintf(err, errlen, "%s (got %u outputs)", why, nout);
  return LT_EPROTO;
}

void lt__instance_free(lt_instance_t *inst) {
  if (inst == NULL) return;
  while (inst->live != NULL)
    frame_free(inst->live);
  token_clear(&inst->result);
  free(inst);
}
