/* placement.c: where a fireable instruction goes (DESIGN.md 7), as two policies behind
 * lt_placement_ops_t. A successor fired by its predecessor's dispatch goes where its input
 * will be, unless (eft) a faster server would finish it clearly sooner, fetch included; other
 * work goes where it would finish first (eft: backlog, cost, and bytes to move) or to the
 * next server with room (rr, and eft in plain mode). Policies with a place hook (policy.h)
 * shape the candidates first: a weight on a server's finish estimate (eft), or its exclusion
 * (both); without one, nothing of that runs. It reads the servers' state and pacing
 * and moves only the round-robin cursor: no batch, record or connection is touched here.
 * It may call the server table and pacing, read only. Dispatcher thread only. */
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "policy_view.h"

#define MOVE_GAIN 0.75 /* a successor leaves its predecessor's server for a 25 % gain */

/* pick_fn chooses a server for instruction c (its inputs, the bytes of them each server holds
 * and the holder of most, the policies' weights or NULL). */
typedef int (*pick_fn)(lt_sched_t *s, const lt_place_t *c);

/* open_to tells whether the policies leave server i among the candidates (weight w[i]). */
static inline int open_to(const double *w, size_t i) {
  return w == NULL || w[i] < LT_PLACE_OUT;
}

/* weighed returns finish estimate `us` of server i as the policies weigh it. */
static inline double weighed(const double *w, size_t i, double us) {
  return w == NULL ? us : us * w[i];
}

/* holder_bytes sums the bytes of the inputs held by each server into bytes[] (of nconns
 * entries) and returns the live server holding most of them, or -1: O(inputs + servers),
 * since a merge may have tens of thousands of inputs. Ties go to the first input's holder. */
static int holder_bytes(const lt_sched_t *s, const lt_fire_t *fi, uint64_t *bytes,
                        uint64_t *total) {
  memset(bytes, 0, s->nsrv * sizeof *bytes);
  *total = 0;
  for (uint32_t i = 0; i < fi->ninputs; i++) {
    const lt_token_t *t = &fi->inputs[i];
    if (t->value == NULL && lt__holder(s, t) >= 0) {
      bytes[lt__holder(s, t)] += t->size + 1; /* +1: unknown sizes still count */
      *total += t->size + 1;
    }
  }
  int best = -1;
  for (uint32_t i = 0; i < fi->ninputs; i++) {
    const lt_token_t *t = &fi->inputs[i];
    if (t->value != NULL || lt__holder(s, t) < 0 || !lt__server_takes(s, (size_t)lt__holder(s, t)))
      continue;
    if (best < 0 || bytes[lt__holder(s, t)] > bytes[best]) best = lt__holder(s, t);
  }
  return best;
}

/* round_robin returns the next live server with room after the last one chosen, or -1. */
static int round_robin(lt_sched_t *s, const lt_place_t *c) {
  for (size_t k = 0; k < s->nsrv; k++) {
    size_t i = (s->rr + k) % s->nsrv;
    if (open_to(c->weight, i) && lt__server_takes(s, i) && lt__server_has_room(s, i) &&
        lt__server_fits(s, i, c->fi))
      return (int)i;
  }
  return -1;
}

/* sooner_take counts the instructions like this one that the servers would finish before
 * `until_us` from now, after what each has admitted: what list scheduling would give them
 * first. When at least as many wait behind this one in the fireable queue, holding it back
 * for a server that is full now gains nothing (that server has work enough until then), so
 * a slower one with a thread free may take it: in a long stream every server runs at its
 * speed; near the end, the rule above keeps the last instructions off the slow ones. */
static size_t sooner_take(lt_sched_t *s, const lt_place_t *c, double until_us) {
  int64_t now = lt__clock_ms();
  double n = 0;
  for (size_t i = 0; i < s->nsrv && n <= (double)s->nfire; i++) {
    if (!open_to(c->weight, i) || !lt__server_takes(s, i) || !lt__server_fits(s, i, c->fi))
      continue;
    double us =
        lt__pace_cost_us(s, i, c->fi->stages) + (double)(c->total - c->bytes[i]) / LT_LINK_BPUS;
    double free_us = until_us - lt__server_left_us(s, i, now);
    if (us > 0 && free_us > us) n += free_us / us;
  }
  return n > (double)SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n;
}

/* earliest returns the server with room where the instruction would finish first, counting
 * the inputs it would have to fetch (DESIGN.md 7), or -1: what it has admitted, costed at
 * today's estimates less what its running instructions have done (servers.c), plus this
 * one, plus moving the inputs held elsewhere, each weighed by the policies' weight. A holder
 * of the inputs wins unless its queue costs more than moving them. */
static int earliest(lt_sched_t *s, const lt_place_t *c) {
  int best = -1;
  double best_us = 0, best_raw = 0, floor_us = -1;
  int64_t now = lt__clock_ms();
  for (size_t k = 0; k < s->nsrv; k++) {
    size_t i = (s->rr + k) % s->nsrv;
    if (!open_to(c->weight, i) || !lt__server_takes(s, i) || !lt__server_fits(s, i, c->fi))
      continue;
    double raw = lt__server_left_us(s, i, now) + lt__pace_cost_us(s, i, c->fi->stages) +
                 (double)(c->total - c->bytes[i]) / LT_LINK_BPUS;
    double us = weighed(c->weight, i, raw);
    if (floor_us < 0 || us < floor_us) floor_us = us;
    if (!lt__server_has_room(s, i)) continue;
    if (best < 0 || us < best_us) {
      best = (int)i;
      best_us = us;
      best_raw = raw;
    }
  }
  /* Under lookahead a busy server gets another instruction only if it would finish it no
   * later than one that is full now: otherwise the instruction waits for that one, unless
   * the work queued behind it would keep those sooner servers busy anyway (below). An idle
   * server always gets work, so an estimate spoilt by one slow sample is corrected by the
   * next (no server starves). */
  if (best >= 0 && s->srv[best].admitted > 0 && best_us > floor_us * 1.05 + 1 &&
      sooner_take(s, c, best_raw) > s->nfire)
    best = -1;
  return best;
}

/* follow_or_move places a successor dispatched with its predecessor, which will hold its
 * input on server h (DESIGN.md 7: the finish estimate decides between chain affinity and
 * moving a value). Elsewhere it cannot start before the predecessor is done on h, then pays
 * the transfer: it moves only to a server that would finish it in under MOVE_GAIN of the
 * time h would, backlog included (a full server too: like on h, it waits there without a
 * thread until its input is ready), and only once the chain has a measured cost. */
static int follow_or_move(lt_sched_t *s, const lt_place_t *c, int h) {
  const lt_fire_t *fi = c->fi;
  /* A chain that never ran anywhere has no cost to weigh a move by: it stays. */
  if (lt__pace_known_us(s, fi->stages) <= 0) return h;
  int64_t now = lt__clock_ms();
  double ready = lt__server_left_us(s, (size_t)h, now);
  double stay = weighed(c->weight, (size_t)h, ready + lt__pace_cost_us(s, (size_t)h, fi->stages));
  int best = h;
  double best_us = stay;
  for (size_t j = 0; j < s->nsrv; j++) {
    if ((int)j == h || !open_to(c->weight, j) || !lt__server_takes(s, j) ||
        !lt__server_fits(s, j, fi))
      continue;
    double backlog = lt__server_left_us(s, j, now);
    double us = weighed(c->weight, j,
                        (backlog > ready ? backlog : ready) + lt__pace_cost_us(s, j, fi->stages) +
                            (double)(c->total - c->bytes[j]) / LT_LINK_BPUS);
    if (us < best_us && us < MOVE_GAIN * stay) {
      best = (int)j;
      best_us = us;
    }
  }
  return best;
}

/* advance moves the round-robin cursor past `best`, the server new work went to (if any). */
static int advance(lt_sched_t *s, int best) {
  if (best >= 0) s->rr = (size_t)best + 1;
  return best;
}

/* A successor waits for its predecessor, on the holder unless a faster server would finish
 * it clearly sooner even after fetching the value; either way it fills that server's window,
 * so that a server is not given more tasks than it can hold whole. Plain mode is the
 * original Lithium: the next idle server. */
static int eft_pick(lt_sched_t *s, const lt_place_t *c) {
  if (c->holder >= 0 && c->chained) return follow_or_move(s, c, c->holder);
  if (!s->opts->lookahead) return advance(s, round_robin(s, c));
  return advance(s, earliest(s, c));
}

/* A successor stays with its input; other work goes to the next server with room. */
static int rr_pick(lt_sched_t *s, const lt_place_t *c) {
  if (c->holder >= 0 && c->chained) return c->holder;
  return advance(s, round_robin(s, c));
}

/* shaped lets the policies weigh the servers for c, then `pick` choose with their weights,
 * and, when one set a weight, tells them where c went and where it would have gone without
 * (the same pick, the round-robin cursor put back); -1 also when out of memory. */
static int shaped(lt_sched_t *s, lt_place_t *c, pick_fn pick) {
  double stack[64];
  double *w = stack;
  if (s->nsrv > 64 && (w = malloc(s->nsrv * sizeof *w)) == NULL) return -1;
  for (size_t i = 0; i < s->nsrv; i++)
    w[i] = 1;
  if (!lt__policies_place(s, c, w)) {
    if (w != stack) free(w);
    return pick(s, c);
  }
  size_t rr = s->rr;
  int unshaped = pick(s, c);
  s->rr = rr;
  c->weight = w;
  int holder = c->holder;
  if (holder >= 0 && !open_to(w, (size_t)holder)) c->holder = -1; /* excluded: no follow */
  int best = pick(s, c);
  c->holder = holder;
  lt__policies_placed(s, c, best, unshaped);
  if (w != stack) free(w);
  return best;
}

/* place_with counts where the inputs are and lets `pick` choose, shaped by the policies when
 * one has a place hook; -1 also when out of memory. */
static int place_with(lt_sched_t *s, const lt_fire_t *fi, int chained, pick_fn pick) {
  uint64_t stack[64];
  lt_place_t c = {.fi = fi, .chained = chained, .bytes = stack};
  uint64_t *bytes = stack;
  if (s->nsrv > 64 && (bytes = calloc(s->nsrv, sizeof *bytes)) == NULL) return -1;
  c.bytes = bytes;
  c.holder = holder_bytes(s, fi, bytes, &c.total);
  if (c.holder >= 0 && !lt__server_fits(s, (size_t)c.holder, fi)) c.holder = -1;
  int best = s->nplacers == 0 ? pick(s, &c) : shaped(s, &c, pick);
  if (bytes != stack) free(bytes);
  return best;
}

static int eft_place(lt_sched_t *s, const lt_fire_t *fi, int chained) {
  return place_with(s, fi, chained, eft_pick);
}

static int rr_place(lt_sched_t *s, const lt_fire_t *fi, int chained) {
  return place_with(s, fi, chained, rr_pick);
}

const lt_placement_ops_t lt__placement_eft = {"eft", eft_place};
const lt_placement_ops_t lt__placement_rr = {"rr", rr_place};

const lt_placement_ops_t *lt__placement_of(const lt_options_t *o) {
  return o->placement == LT_PLACE_RR ? &lt__placement_rr : &lt__placement_eft;
}
