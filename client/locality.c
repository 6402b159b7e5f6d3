/* locality.c: the locality policy (option `locality`, issue 34 item 5). Before an instruction
 * whose inputs servers hold is placed, it favours the live server that holds most of their
 * bytes: it divides that server's weight by the factor `locality`, so `eft` keeps the work
 * there whenever its finish estimate is within that factor of the best server's, and the
 * bytes stay where they are. A placement it changed that way, to the holder, is counted
 * (`locality_kept`), with the bytes of inputs the holder had and the server eft would have
 * chosen would have had to fetch (`locality_bytes_saved`). It only weighs: under `rr`, and
 * `eft` in plain mode, which compare no estimates, it changes nothing. State: its two
 * counters. It reads the instruction it is shown and nothing else of the dispatcher.
 * Dispatcher thread only. */
#include "policy_view.h"

typedef struct locality_state {
  uint64_t kept;        /* placements it turned to the holder of the inputs */
  uint64_t bytes_saved; /* the bytes of inputs those placements did not move */
} locality_state_t;

/* The holder of most of the input bytes finishes `locality` times later at worst. */
static int place(lt_policy_t *p, const lt_place_t *c, double *weight) {
  if (c->holder < 0) return 0;
  weight[c->holder] /= p->s->opts->locality;
  return 1;
}

/* held_on sums the bytes of c's inputs held by server i. */
static uint64_t held_on(const lt_sched_t *s, const lt_place_t *c, int i) {
  uint64_t n = 0;
  for (uint32_t k = 0; k < c->fi->ninputs; k++) {
    const lt_token_t *t = &c->fi->inputs[k];
    if (t->value == NULL && lt__holder(s, t) == i) n += t->size;
  }
  return n;
}

static void placed(lt_policy_t *p, const lt_place_t *c, int to, int unshaped) {
  if (to < 0 || to == unshaped || to != c->holder) return;
  locality_state_t *st = p->state;
  st->kept++;
  uint64_t here = held_on(p->s, c, to), there = unshaped >= 0 ? held_on(p->s, c, unshaped) : here;
  if (here > there) st->bytes_saved += here - there;
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx != SIZE_MAX) return 0;
  const locality_state_t *st = p->state;
  out[0] = (lt_stat_t){"locality_kept", 0, st->kept};
  out[1] = (lt_stat_t){"locality_bytes_saved", 0, st->bytes_saved};
  return 2;
}

/* A factor above 1 turns it on: 1 (or less) would favour nothing. */
static int enabled(const lt_options_t *o) {
  return o->locality > 1;
}

const lt_policy_ops_t lt__policy_locality = {
    .name = "locality",
    .state_size = sizeof(locality_state_t),
    .enabled = enabled,
    .place = place,
    .placed = placed,
    .stats = stats,
};
