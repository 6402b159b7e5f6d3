/* placement.c: where a fireable instruction goes (DESIGN.md 7), as two policies behind
 * lt_placement_ops_t. A successor fired by its predecessor's dispatch goes where its input
 * will be, unless (eft) a faster server would finish it clearly sooner, fetch included; other
 * work goes where it would finish first (eft: backlog, cost, and bytes to move) or to the
 * next server with room (rr, and eft in plain mode). It reads the servers' state and pacing
 * and moves only the round-robin cursor: no batch, record or connection is touched here.
 * It may call the server table and pacing, read only. Dispatcher thread only. */
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "policy_view.h"

#define MOVE_GAIN 0.75 /* a successor leaves its predecessor's server for a 25 % gain */

/* pick_fn chooses a server given the bytes of the inputs each server holds (bytes[], of
 * nconns entries, `total` in all) and the live holder of most of them (`holder`, or -1). */
typedef int (*pick_fn)(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total,
                       int holder, int chained);

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
static int round_robin(lt_sched_t *s, const lt_fire_t *fi) {
  for (size_t k = 0; k < s->nsrv; k++) {
    size_t i = (s->rr + k) % s->nsrv;
    if (lt__server_takes(s, i) && lt__server_has_room(s, i) && lt__server_fits(s, i, fi))
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
static size_t sooner_take(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total,
                          double until_us) {
  int64_t now = lt__clock_ms();
  double n = 0;
  for (size_t i = 0; i < s->nsrv && n <= (double)s->nfire; i++) {
    if (!lt__server_takes(s, i) || !lt__server_fits(s, i, fi)) continue;
    double c = lt__pace_cost_us(s, i, fi->stages) + (double)(total - bytes[i]) / LT_LINK_BPUS;
    double free_us = until_us - lt__server_left_us(s, i, now);
    if (c > 0 && free_us > c) n += free_us / c;
  }
  return n > (double)SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n;
}

/* earliest returns the server with room where the instruction would finish first, counting
 * the inputs it would have to fetch (DESIGN.md 7), or -1: what it has admitted, costed at
 * today's estimates less what its running instructions have done (servers.c), plus this
 * one, plus moving the inputs held elsewhere. A holder of the
 * inputs wins unless its queue costs more than moving them. */
static int earliest(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total) {
  int best = -1;
  double best_us = 0, floor_us = -1;
  int64_t now = lt__clock_ms();
  for (size_t k = 0; k < s->nsrv; k++) {
    size_t i = (s->rr + k) % s->nsrv;
    if (!lt__server_takes(s, i) || !lt__server_fits(s, i, fi)) continue;
    double c = lt__pace_cost_us(s, i, fi->stages);
    double us = lt__server_left_us(s, i, now) + c + (double)(total - bytes[i]) / LT_LINK_BPUS;
    if (floor_us < 0 || us < floor_us) floor_us = us;
    if (!lt__server_has_room(s, i)) continue;
    if (best < 0 || us < best_us) {
      best = (int)i;
      best_us = us;
    }
  }
  /* Under lookahead a busy server gets another instruction only if it would finish it no
   * later than one that is full now: otherwise the instruction waits for that one, unless
   * the work queued behind it would keep those sooner servers busy anyway (below). An idle
   * server always gets work, so an estimate spoilt by one slow sample is corrected by the
   * next (no server starves). */
  if (best >= 0 && s->srv[best].admitted > 0 && best_us > floor_us * 1.05 + 1 &&
      sooner_take(s, fi, bytes, total, best_us) > s->nfire)
    best = -1;
  return best;
}

/* follow_or_move places a successor dispatched with its predecessor, which will hold its
 * input on server h (DESIGN.md 7: the finish estimate decides between chain affinity and
 * moving a value). Elsewhere it cannot start before the predecessor is done on h, then pays
 * the transfer: it moves only to a server that would finish it in under MOVE_GAIN of the
 * time h would, backlog included (a full server too: like on h, it waits there without a
 * thread until its input is ready), and only once the chain has a measured cost. */
static int follow_or_move(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total,
                          int h) {
  /* A chain that never ran anywhere has no cost to weigh a move by: it stays. */
  if (lt__pace_known_us(s, fi->stages) <= 0) return h;
  int64_t now = lt__clock_ms();
  double ready = lt__server_left_us(s, (size_t)h, now);
  double stay = ready + lt__pace_cost_us(s, (size_t)h, fi->stages);
  int best = h;
  double best_us = stay;
  for (size_t j = 0; j < s->nsrv; j++) {
    if ((int)j == h || !lt__server_takes(s, j) || !lt__server_fits(s, j, fi)) continue;
    double backlog = lt__server_left_us(s, j, now);
    double us = (backlog > ready ? backlog : ready) + lt__pace_cost_us(s, j, fi->stages) +
                (double)(total - bytes[j]) / LT_LINK_BPUS;
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
static int eft_pick(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total,
                    int holder, int chained) {
  if (holder >= 0 && chained) return follow_or_move(s, fi, bytes, total, holder);
  if (!s->opts->lookahead) return advance(s, round_robin(s, fi));
  return advance(s, earliest(s, fi, bytes, total));
}

/* A successor stays with its input; other work goes to the next server with room. */
static int rr_pick(lt_sched_t *s, const lt_fire_t *fi, const uint64_t *bytes, uint64_t total,
                   int holder, int chained) {
  (void)bytes;
  (void)total;
  if (holder >= 0 && chained) return holder;
  return advance(s, round_robin(s, fi));
}

/* place_with counts where the inputs are and lets `pick` choose; -1 also when out of memory. */
static int place_with(lt_sched_t *s, const lt_fire_t *fi, int chained, pick_fn pick) {
  uint64_t stack[64], total;
  uint64_t *bytes = stack;
  if (s->nsrv > 64 && (bytes = calloc(s->nsrv, sizeof *bytes)) == NULL) return -1;
  int holder = holder_bytes(s, fi, bytes, &total);
  if (holder >= 0 && !lt__server_fits(s, (size_t)holder, fi)) holder = -1;
  int best = pick(s, fi, bytes, total, holder, chained);
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
