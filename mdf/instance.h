/* instance.h: a graph instance: the template instantiated for one input task, grown at run
 * time (DESIGN.md 3). It is a tree of frames; a frame runs one block's chain on one token.
 * A map node, once its split says how many parts there are, starts a child frame on the body
 * block per part and gathers their tokens for the merge; a dc node starts the base block on
 * a base case, or a child dc frame per part and a combine. The instance tells through a
 * callback which frame needs an instruction now, and describes it (lt__frame_fire_info);
 * the caller runs it anywhere and reports the outputs with lt__instance_complete. Frames
 * live on the heap (the root one in the instance's own allocation): dc trees of any depth
 * cost no stack. Owned by one thread. */
#ifndef LT_INSTANCE_H
#define LT_INSTANCE_H

#include <stdint.h>
#include "msg.h"
#include "template.h"
#include "value.h"

typedef struct lt_instance lt_instance_t;
typedef struct lt_frame lt_frame_t;

/* A token is an input or output of an instruction: a value the client holds (the task's
 * input; every value in plain mode), or a reference to a value named `id` that a server
 * holds or will hold (lazy binding). Its holder is an id the dispatcher gives each session
 * with a server (opaque here: equal ids name the same session; 0, what zeroed memory holds,
 * names none): read and set it with lt__token_at and lt__token_set_at. The dispatcher maps it
 * to its server table (client/entries.c), and knows an id whose session ended from one of a
 * new session, whatever the table reuses. */
typedef struct lt_token {
  lt_value_t *value; /* NULL for a reference */
  lt_oid_t id;
  uint64_t at;   /* the holder's session id; 0: no holder */
  uint64_t size; /* bytes, when known (0: not yet) */
} lt_token_t;

/* lt__token_at returns t's holder's session id, or 0 when no server holds it. */
static inline uint64_t lt__token_at(const lt_token_t *t) {
  return t->at;
}

/* lt__token_set_at makes session `at` t's holder (0: none). */
static inline void lt__token_set_at(lt_token_t *t, uint64_t at) {
  t->at = at;
}

/* Called when frame `f` of `inst` needs its next instruction. */
typedef void (*lt_fire_fn)(void *ud, lt_instance_t *inst, lt_frame_t *f);

/* What a frame needs run: an op (LT_OP_SEQ, LT_OP_SPLIT, LT_OP_DCSTEP) with its stages and
 * input tokens, all borrowed from the instance until the frame's completion. */
typedef struct lt_fire {
  uint32_t op;
  const lt_tstage_t *stages;
  uint32_t nstages;
  const lt_token_t *inputs;
  uint32_t ninputs;
} lt_fire_t;

struct lt_instance {
  uint64_t task;             /* task sequence number */
  const lt_template_t *tmpl; /* borrowed */
  lt_frame_t *live;          /* every frame not yet finished */
  uint64_t frames;           /* frames created, for stats */
  lt_token_t result;         /* the task's result once done */
  int done;
  void *user; /* the caller's per-task data */
};

/* lt__instance_new creates the instance of task `task` over `t` (borrowed). */
int lt__instance_new(lt_instance_t **out, const lt_template_t *t, uint64_t task);

/* lt__instance_feed starts the program on the task's input `v` (a reference is taken); the
 * first frame fires. */
int lt__instance_feed(lt_instance_t *inst, lt_value_t *v, lt_fire_fn fire, void *ud);

/* lt__instance_feed_pair starts the combine of two results `a` and `b` of a program that
 * reduces its stream (template.h: combine_block; references are taken): its one
 * instruction fires, and the instance is done with its output. LT_ESTATE for a program
 * that does not reduce its stream. */
int lt__instance_feed_pair(lt_instance_t *inst, lt_value_t *a, lt_value_t *b, lt_fire_fn fire,
                           void *ud);

/* lt__frame_fire_info describes the instruction frame `f` waits for. */
void lt__frame_fire_info(const lt_frame_t *f, lt_fire_t *out);

/* lt__frame_input_token borrows input `i` of f's instruction (what lt__frame_fire_info
 * lists), so that the dispatcher can mark a reference it learnt more about. */
lt_token_t *lt__frame_input_token(lt_frame_t *f, uint32_t i);

/* lt__frame_moves_on tells whether f's instruction makes one output that the frame can
 * pass on before it exists (a seq stage or a merge/combine): lazy binding may then call
 * lt__instance_dispatched. Splits and dc steps must wait for their completion. */
int lt__frame_moves_on(const lt_frame_t *f);

/* lt__instance_dispatched passes on the reference `out` (copied; a value reference is
 * taken) to f's output at dispatch time: the next node fires, or the parent's gather gets
 * it, or the instance is done with `out` as its result. f's input tokens are dropped (the
 * instruction carries them). Only when lt__frame_moves_on(f); the instruction's completion
 * is then not reported to the instance. */
void lt__instance_dispatched(lt_instance_t *inst, lt_frame_t *f, const lt_token_t *out,
                             lt_fire_fn fire, void *ud);

/* lt__instance_tokens calls `fn` for every token the live frames still hold (for releasing
 * server-side values of a task that failed). */
void lt__instance_tokens(lt_instance_t *inst, void (*fn)(void *ud, const lt_token_t *t), void *ud);

/* lt__instance_complete applies the completion of `f`'s instruction: `answer` (DCSTEP: 1
 * base case, 0 divided; else ignored) and its `nout` output tokens (copied; value
 * references are taken). Frames
 * that can go on fire; when the program is done inst->done is set and inst->result holds
 * the result. LT_EPROTO when the outputs do not fit the op (a seq stage must make exactly
 * one output), with a message in err; the frame is then finished with nothing. */
int lt__instance_complete(lt_instance_t *inst, lt_frame_t *f, int answer, const lt_token_t *outs,
                          uint32_t nout, lt_fire_fn fire, void *ud, char *err, size_t errlen);

/* lt__instance_free drops every token and frame; accepts NULL. */
void lt__instance_free(lt_instance_t *inst);

#endif
