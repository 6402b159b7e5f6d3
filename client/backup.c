/* backup.c: copies of stragglers (option backup, on in `optimized`). Once the input is
 * closed, an instruction that has run for more than backup_factor times its expected cost
 * on its server (run: since the client saw it come into the server's threads, instr.c),
 * and that an idle server (nothing of ours there: a thread free on a server whose CPU is
 * capped is no spare CPU) would finish in less time than it has already run, gets a copy
 * there. Stragglers are looked for on every tick and as soon as a server comes to run
 * nothing of ours. The two are twins: the first to complete wins and is applied as usual;
 * the other is cancelled on its server and, when it still completes, only releases what it
 * left. Nothing is delivered twice; a failure of the kernel itself settles both as a result
 * does. Only instructions whose inputs the client holds, whose output nobody references yet
 * (a farm's tasks, a last stage), and whose chain has completed somewhere (so that there is
 * an expected time) get copies. Kernels are pure functions of their inputs, which is what
 * makes this safe. Dispatcher thread only. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "exec.h"
#include "sched_internal.h"

#define BACKUP_MIN_MS 20 /* nothing is a straggler before this */

/* eligible tells whether r may get a copy: out (a migration's cancel may be on its way:
 * it may have begun before the cancel arrives, and then runs where it is), alone, its inputs
 * held by the client, and its output not named to successors on its server. */
static int eligible(const lt_instr_rec_t *r) {
  if ((r->state != LT_IR_OUT && r->state != LT_IR_MIGRATING) || r->twin != NULL ||
      lt__sched_stale(r) || lt__op(r->op)->outputs != LT_OP_OUT_ONE || (r->moved && !r->final) ||
      r->chained)
    return 0;
  for (uint32_t i = 0; i < r->nins; i++)
    if (r->ins[i].value == NULL) return 0;
  return 1;
}

/* idle_server returns a server running nothing of ours that takes r's inputs and would
 * finish r in less than `ran_us`, the cheapest such, or -1. */
static int idle_server(lt_sched_t *s, const lt_instr_rec_t *r, double ran_us) {
  int best = -1;
  double best_us = ran_us;
  for (size_t i = 0; i < s->nsrv; i++) {
    if ((int)i == r->conn || !lt__sched_takes(s, i) || s->srv[i].slot.suspect) continue;
    if (s->srv[i].admitted > 0 || s->srv[i].conn.inflight > 0) continue;
    uint64_t lim = s->srv[i].conn.max_frame;
    int fits = 1;
    for (uint32_t k = 0; k < r->nins && lim > 0; k++)
      if (r->ins[k].value->len > lim) fits = 0;
    double us = lt__pace_cost_us(s, i, r->stages);
    if (fits && us < best_us) {
      best = (int)i;
      best_us = us;
    }
  }
  return best;
}

/* due_us is what r should take on its server: its cost there as expected when it was sent,
 * or, sent before any was measured (the first burst of lookahead), as expected now. */
static double due_us(lt_sched_t *s, const lt_instr_rec_t *r) {
  return r->cost_known ? r->cost_us : lt__pace_cost_us(s, (size_t)r->conn, r->stages);
}

/* any_idle tells whether some server that takes work runs nothing of ours. */
static int any_idle(lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++)
    if (lt__sched_takes(s, i) && !s->srv[i].slot.suspect && s->srv[i].admitted == 0 &&
        s->srv[i].conn.inflight == 0)
      return 1;
  return 0;
}

/* copy_of makes r's twin: the same work under an instruction id of its own. */
static lt_instr_rec_t *copy_of(lt_sched_t *s, lt_instr_rec_t *r) {
  lt_token_t *ins = calloc(r->nins ? r->nins : 1, sizeof *ins);
  lt_instr_rec_t *c = ins != NULL ? lt__rec_new(s, r->job) : NULL;
  if (c == NULL) {
    free(ins);
    return NULL;
  }
  for (uint32_t i = 0; i < r->nins; i++) {
    ins[i] = r->ins[i];
    lt__value_ref(ins[i].value);
  }
  c->gen = r->gen;
  c->frame = r->frame;
  c->op = r->op;
  c->ins = ins;
  c->nins = r->nins;
  c->stages = r->stages;
  c->nstages = r->nstages;
  c->moved = r->moved;
  c->final = r->final;
  c->backup = 1;
  return c;
}

int lt__sched_backup_target(lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms) {
  if (!eligible(r) || r->run_ms < 0 || lt__pace_known_us(s, r->stages) <= 0) return -1;
  double ran_us = (double)(now_ms - r->run_ms) * 1000.0;
  if (ran_us < BACKUP_MIN_MS * 1000.0 || ran_us < s->opts->backup_factor * due_us(s, r)) return -1;
  return idle_server(s, r, ran_us);
}

void lt__sched_backup(lt_sched_t *s, int64_t now_ms) {
  const lt_options_t *o = s->opts;
  s->went_idle = 0;
  if (!o->backup || !o->lookahead || s->fire_head != NULL || s->inflight == NULL ||
      !lt__eval_input_closed(s->ev) || !any_idle(s))
    return;
  /* A window that grew since the last completion lets more run. */
  for (size_t i = 0; i < s->nsrv; i++)
    lt__sched_mark_running(s, i, now_ms);
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    int to = lt__sched_backup_target(s, r, now_ms);
    if (to < 0) continue;
    lt_instr_rec_t *c = copy_of(s, r);
    if (c == NULL) return;
    c->twin = r;
    r->twin = c;
    int64_t idle_ms = now_ms - s->srv[to].slot.idle_ms;
    if (lt__sched_dispatch_to(s, c, to) != LT_OK) {
      r->twin = NULL;
      lt__sched_rec_done(s, c);
      continue;
    }
    s->backups++;
    lt__log(LT_LOG_INFO, "instruction %llu: out %lld ms on %s, a copy goes to %s",
            (unsigned long long)r->seq, (long long)(now_ms - r->sent_ms),
            s->srv[r->conn].conn.endpoint, s->srv[to].conn.endpoint);
    lt__log(LT_LOG_DEBUG,
            "instruction %llu: ran %lld ms against %.0f ms expected%s; %s had been idle %lld ms",
            (unsigned long long)r->seq, (long long)(now_ms - r->run_ms), due_us(s, r) / 1000.0,
            r->state == LT_IR_MIGRATING ? " (a migration's cancel on its way)" : "",
            s->srv[to].conn.endpoint, (long long)idle_ms);
  }
}

int lt__sched_twin_settle(lt_sched_t *s, lt_instr_rec_t *r, int ok) {
  if (r->state == LT_IR_DROPPED) return 1;
  lt_instr_rec_t *t = r->twin;
  if (t == NULL) return 0;
  r->twin = NULL;
  t->twin = NULL;
  if (!ok) {
    /* Lost or never run here: the twin carries on. A copy left alone is the instruction
     * from now on (placed again like any other if it is lost in turn), and its result is
     * the one used. */
    if (t->backup) {
      t->backup = 0;
      s->backups_won++;
    }
    return 1;
  }
  /* The twin is out: copies go out at once, and a twin lost or failed is freed. One whose
   * migration's cancel is on its way is cancelled already; the answer only frees it. */
  if (t->state == LT_IR_MIGRATING)
    s->cancels_out--;
  else
    lt__sched_cancel(s, (size_t)t->conn, &t->seq, 1);
  lt__rec_to(t, LT_IR_DROPPED);
  if (r->backup) s->backups_won++;
  return 0;
}
