/* instance.c: graph instances as trees of frames (instance.h). Knows nothing of servers or
 * the wire; the caller decides where each fired instruction runs. One thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "instance.h"

typedef enum phase {
  PH_RUN = 1, /* the node's own instruction (seq, split, dc step, test) is out */
  PH_GATHER,  /* waiting for the children of a map or a divided dc */
  PH_FINAL,   /* the merge/combine is out */
  PH_BASE,    /* waiting for the one block that gives the node's result (a dc base case, an
                 if's branch) */
  PH_LOOP,    /* waiting for a while's body, to test its result again */
  PH_REDUCE,  /* a map-reduce: combining its parts pairwise as they are ready */
  PH_PAIR     /* a combine of two neighbouring parts of its parent's reduce is out */
} phase_t;

/* A segment of a reduce: a run of neighbouring parts combined (or being combined) into one
 * value, named by its first part. Live segments form a list in part order. */
typedef enum seg_state { SEG_PENDING = 0, SEG_READY, SEG_BUSY } seg_state_t;

typedef struct seg {
  int32_t prev, next; /* neighbouring live segments; -1 at the ends */
  seg_state_t state;  /* PENDING: its part is being computed; BUSY: a pair frame combines it
                         with its next; READY: its value is in the frame's parts */
} seg_t;

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
  uint32_t missing;        /* PH_GATHER, PH_BASE, PH_LOOP: children not finished; PH_REDUCE: live
                              segments */
  seg_t *segs;             /* PH_REDUCE: one per part */
  lt_frame_t *spare;       /* PH_REDUCE: the frames of the combines still to come, made up front
                              so that a reduce never fails half-way (linked by `next`) */
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
  t->at = 0;
}

static void parts_drop(lt_frame_t *f) {
  for (uint32_t i = 0; i < f->nparts; i++)
    lt__value_unref(f->parts[i].value);
  free(f->parts);
  free(f->segs);
  while (f->spare != NULL) {
    lt_frame_t *k = f->spare;
    f->spare = k->next;
    free(k->parts);
    free(k);
  }
  f->parts = NULL;
  f->segs = NULL;
  f->nparts = f->missing = 0;
}

/* An instance and its root frame share one allocation: a farm's task, whose instance is one
 * frame, costs one malloc here, not two. The root is the frame without a parent; an
 * instance has one at a time (feed and feed_pair refuse a second). */
typedef struct instance_block {
  lt_instance_t inst; /* first: an lt_instance_t * of lt__instance_new casts back */
  lt_frame_t root;
} instance_block_t;

/* root_of returns inst's root frame's storage. */
static lt_frame_t *root_of(lt_instance_t *inst) {
  return &((instance_block_t *)inst)->root;
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
  if (f == root_of(inst))
    memset(f, 0, sizeof *f); /* in the instance's block */
  else
    free(f);
}

/* frame_init makes the zeroed `f` a live frame of `inst` on node `node` with input `tok`
 * (copied; NULL for none). */
static lt_frame_t *frame_init(lt_frame_t *f, lt_instance_t *inst, lt_frame_t *parent, uint32_t slot,
                              int32_t node, int single, const lt_token_t *tok) {
  f->inst = inst;
  f->parent = parent;
  f->slot = slot;
  f->node = node;
  f->single = single;
  f->phase = PH_RUN;
  f->token.at = 0;
  if (tok != NULL) token_set(&f->token, tok);
  f->next = inst->live;
  if (inst->live != NULL) inst->live->prev = f;
  inst->live = f;
  inst->frames++;
  return f;
}

static lt_frame_t *frame_new(lt_instance_t *inst, lt_frame_t *parent, uint32_t slot, int32_t node,
                             int single, const lt_token_t *tok) {
  lt_frame_t *f = parent == NULL ? root_of(inst) : calloc(1, sizeof *f);
  return f != NULL ? frame_init(f, inst, parent, slot, node, single, tok) : NULL;
}

int lt__instance_new(lt_instance_t **out, const lt_template_t *t, uint64_t task) {
  instance_block_t *b = calloc(1, sizeof *b);
  lt_instance_t *inst = b != NULL ? &b->inst : NULL;
  *out = inst;
  if (inst == NULL) return LT_ENOMEM;
  inst->tmpl = t;
  inst->task = task;
  return LT_OK;
}

int lt__instance_feed(lt_instance_t *inst, lt_value_t *v, lt_fire_fn fire, void *ud) {
  if (inst->live != NULL || inst->done) return LT_ESTATE;
  lt_token_t tok = {.value = v, .size = v->len};
  lt_frame_t *f = frame_new(inst, NULL, 0, (int32_t)inst->tmpl->blocks[0], 0, &tok);
  if (f == NULL) return LT_ENOMEM;
  fire(ud, inst, f);
  return LT_OK;
}

int lt__instance_feed_pair(lt_instance_t *inst, lt_value_t *a, lt_value_t *b, lt_fire_fn fire,
                           void *ud) {
  const lt_template_t *t = inst->tmpl;
  if (inst->live != NULL || inst->done || t->combine_block < 0) return LT_ESTATE;
  lt_frame_t *f = frame_new(inst, NULL, 0, (int32_t)t->blocks[t->combine_block], 1, NULL);
  if (f == NULL || (f->parts = calloc(2, sizeof *f->parts)) == NULL) return LT_ENOMEM;
  lt_value_t *v[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    lt_token_t tok = {.value = v[i], .size = v[i]->len};
    token_set(&f->parts[i], &tok);
  }
  f->nparts = 2;
  f->phase = PH_PAIR;
  fire(ud, inst, f);
  return LT_OK;
}

void lt__frame_fire_info(const lt_frame_t *f, lt_fire_t *out) {
  const lt_tnode_t *n = &f->inst->tmpl->nodes[f->node];
  if (f->phase == PH_FINAL || f->phase == PH_PAIR) {
    out->op = LT_OP_SEQ;
    out->stages = n->kind == LT_TN_SEQ   ? n->stages /* a stream reduce's combine */
                  : n->kind == LT_TN_MAP ? &n->stages[LT_TS_MERGE]
                                         : &n->stages[LT_TS_COMBINE];
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
  case LT_TN_IF:
  case LT_TN_WHILE:
    out->op = LT_OP_TEST;
    out->nstages = 1;
    break;
  }
}

/* token_move moves the token at `src` into `dst`, leaving `src` empty with no holder. */
static void token_move(lt_token_t *dst, lt_token_t *src) {
  *dst = *src;
  memset(src, 0, sizeof *src);
  src->at = 0;
}

/* pair starts the combine of the neighbouring ready segments `a` and `b` of p's reduce on a
 * spare frame; `a` then stands for both. */
static void pair(lt_frame_t *p, int32_t a, int32_t b, lt_fire_fn fire, void *ud) {
  seg_t *sg = p->segs;
  sg[a].state = SEG_BUSY;
  sg[a].next = sg[b].next;
  if (sg[b].next >= 0) sg[sg[b].next].prev = a;
  p->missing--;
  lt_frame_t *k = p->spare;
  p->spare = k->next;
  lt_token_t *two = k->parts;
  memset(k, 0, sizeof *k);
  frame_init(k, p->inst, p, (uint32_t)a, p->node, 1, NULL);
  k->phase = PH_PAIR;
  k->parts = two;
  k->nparts = 2;
  token_move(&two[0], &p->parts[a]);
  token_move(&two[1], &p->parts[b]);
  fire(ud, p->inst, k);
}

/* reduce_arrive takes the value of segment `i` of p's reduce, now in p->parts[i]: it pairs
 * with a ready neighbour (one on the same server first), or, when it is the last segment,
 * becomes p's token; returns 1 then. */
static int reduce_arrive(lt_frame_t *p, int32_t i, lt_fire_fn fire, void *ud) {
  seg_t *sg = p->segs;
  sg[i].state = SEG_READY;
  int32_t l = sg[i].prev, r = sg[i].next;
  int left = l >= 0 && sg[l].state == SEG_READY;
  int right = r >= 0 && sg[r].state == SEG_READY;
  uint64_t here = lt__token_at(&p->parts[i]);
  if (left && right && lt__token_at(&p->parts[l]) != here && lt__token_at(&p->parts[r]) == here)
    left = 0;
  if (left || right) {
    pair(p, left ? l : i, left ? i : r, fire, ud);
    return 0;
  }
  if (p->missing > 1) return 0;
  token_set(&p->token, &p->parts[i]);
  parts_drop(p);
  return 1;
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
    uint32_t slot = f->slot;
    token_move(&p->parts[slot], &f->token);
    frame_free(f);
    if (p->phase == PH_REDUCE) {
      if (!reduce_arrive(p, (int32_t)slot, fire, ud)) return;
      f = p; /* the reduce is done: go on with the map's chain */
      continue;
    }
    if (--p->missing > 0) return;
    if (p->phase == PH_BASE || p->phase == PH_LOOP) {
      token_set(&p->token, &p->parts[0]);
      parts_drop(p);
      if (p->phase == PH_LOOP) {
        p->phase = PH_RUN; /* test the while's condition again */
        fire(ud, inst, p);
        return;
      }
      f = p; /* the node is done: go on with the parent's chain */
      continue;
    }
    p->phase = PH_FINAL;
    fire(ud, inst, p);
    return;
  }
}

/* reduce_prepare gives f's reduce over `n` parts its segments, one per part, and the n - 1
 * frames of the combines to come. */
static int reduce_prepare(lt_frame_t *f, uint32_t n) {
  if ((f->segs = calloc(n, sizeof *f->segs)) == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    f->segs[i].prev = (int32_t)i - 1;
    f->segs[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  for (uint32_t i = 0; i + 1 < n; i++) {
    lt_frame_t *k = calloc(1, sizeof *k);
    if (k == NULL) return LT_ENOMEM;
    k->next = f->spare;
    f->spare = k;
    if ((k->parts = calloc(2, sizeof *k->parts)) == NULL) return LT_ENOMEM;
  }
  return LT_OK;
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
    f->parts[i].at = 0;
  f->nparts = f->missing = n;
  if (phase == PH_REDUCE && reduce_prepare(f, n) != LT_OK) return LT_ENOMEM;
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

/* runs_combine tells whether f's instruction is a merge, a combine or a reduce's pair: its
 * inputs are f's parts. */
static int runs_combine(const lt_frame_t *f) {
  return f->phase == PH_FINAL || f->phase == PH_PAIR;
}

lt_token_t *lt__frame_input_token(lt_frame_t *f, uint32_t i) {
  return runs_combine(f) ? &f->parts[i] : &f->token;
}

int lt__frame_moves_on(const lt_frame_t *f) {
  return runs_combine(f) || (f->phase == PH_RUN && f->inst->tmpl->nodes[f->node].kind == LT_TN_SEQ);
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

/* What a node's own instruction made, applied to its frame f by the node's kind; each
 * returns LT_OK, or an error with a message in err. */
typedef int (*ran_fn)(lt_frame_t *f, const lt_tnode_t *n, int answer, const lt_token_t *outs,
                      uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen);

/* map_ran starts the body on every part the split made (or the merge at once on none). */
static int map_ran(lt_frame_t *f, const lt_tnode_t *n, int answer, const lt_token_t *outs,
                   uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen) {
  (void)answer;
  const lt_template_t *t = f->inst->tmpl;
  if (n->reduce && nout == 0) {
    snprintf(err, errlen, "%s: made no parts, and a reduce needs at least one",
             t->kernels[n->stages[LT_TS_SPLIT].kernel]);
    return LT_EKERNEL;
  }
  phase_t ph = n->reduce ? PH_REDUCE : PH_GATHER;
  return gather(f, ph, (int32_t)t->blocks[n->block], 0, outs, nout, fire, ud);
}

/* dc_ran starts the base block on a base case, or the same dc node on every part. */
static int dc_ran(lt_frame_t *f, const lt_tnode_t *n, int answer, const lt_token_t *outs,
                  uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen) {
  const lt_template_t *t = f->inst->tmpl;
  if (answer == 0) return gather(f, PH_GATHER, f->node, 1, outs, nout, fire, ud);
  if (answer != 1 || nout != 0) {
    snprintf(err, errlen, "%s (got %u outputs)",
             answer != 1 ? "a condition needs an answer" : "a base case must make no parts", nout);
    return LT_EPROTO;
  }
  lt_token_t tok = f->token;
  return gather(f, PH_BASE, (int32_t)t->blocks[n->block], 0, &tok, 1, fire, ud);
}

/* test_ran runs an if's branch on the task, or a while's body while the condition holds;
 * a while whose condition fails goes on with the task as it is. */
static int test_ran(lt_frame_t *f, const lt_tnode_t *n, int answer, const lt_token_t *outs,
                    uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen) {
  (void)outs;
  const lt_template_t *t = f->inst->tmpl;
  if (answer < 0 || nout != 0) {
    snprintf(err, errlen, "%s (got %u outputs)",
             answer < 0 ? "a condition needs an answer" : "a condition must make no outputs", nout);
    return LT_EPROTO;
  }
  int loop = n->kind == LT_TN_WHILE;
  if (loop && answer == 0) {
    finish_chain(f, fire, ud);
    return LT_OK;
  }
  lt_token_t tok = f->token;
  uint32_t block = answer ? n->block : n->alt;
  return gather(f, loop ? PH_LOOP : PH_BASE, (int32_t)t->blocks[block], 0, &tok, 1, fire, ud);
}

/* The kinds whose own instruction grows the graph; a seq's passes its one output on. */
static const ran_fn ran[] = {
    [LT_TN_MAP] = map_ran, [LT_TN_DC] = dc_ran, [LT_TN_IF] = test_ran, [LT_TN_WHILE] = test_ran};

int lt__instance_complete(lt_instance_t *inst, lt_frame_t *f, int answer, const lt_token_t *outs,
                          uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen) {
  const lt_tnode_t *n = &inst->tmpl->nodes[f->node];
  if (lt__frame_moves_on(f) && nout == 1) {
    token_set(&f->token, &outs[0]);
    parts_drop(f);
    finish_chain(f, fire, ud);
    return LT_OK;
  }
  if (f->phase == PH_RUN && !lt__frame_moves_on(f))
    return ran[n->kind](f, n, answer, outs, nout, fire, ud, err, errlen);
  snprintf(err, errlen, "%s (got %u outputs)",
           f->phase == PH_RUN || runs_combine(f) ? "a stage must make exactly one output"
                                                 : "the frame was not waiting",
           nout);
  return LT_EPROTO;
}

void lt__instance_free(lt_instance_t *inst) {
  if (inst == NULL) return;
  while (inst->live != NULL)
    frame_free(inst->live);
  token_clear(&inst->result);
  free(inst);
}
