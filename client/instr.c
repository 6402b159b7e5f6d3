/* instr.c: instruction records and their state machine (DESIGN.md 7a, "records"). A record
 * is queued for placement, out on one server, out while a cancel moves it, or out after its
 * twin won (lt_ir_state_t); the legal moves between these states are written here once
 * (lt__rec_to), as is what going out on a server and coming back off it counts (the
 * server's in-flight count, window and backlog: nothing else touches them), and how a
 * record's time on a server ends (lt__rec_settle: taken off, its migration and its copy
 * settled). It decides nothing about where a record goes or what its outcome means for its
 * task: dispatch.c and jobs.c do. May call: the server table, pacing, the failure
 * accounting's cancel (a twin that lost). Dispatcher thread only. */
#include <assert.h>
#include <stdlib.h>
#include <utlist.h>

#include <lithium/error.h>
#include "log.h"
#include "queue.h"
#include "sched_failures.h"
#include "sched_jobs.h"
#include "sched_records.h"
#include "sched_servers.h"

/* The states each state may go to, as bit masks. A queued record may be put back at the
 * front of the queue; one that is out comes back to the queue when it is lost or its
 * migration is confirmed; one whose twin won is dropped, also while a migration's cancel is
 * on its way; a dropped twin is only ever freed. */
#define BIT(st) (1u << (st))
static const unsigned legal_next[] = {
    [LT_IR_QUEUED] = BIT(LT_IR_QUEUED) | BIT(LT_IR_OUT),
    [LT_IR_OUT] = BIT(LT_IR_QUEUED) | BIT(LT_IR_MIGRATING) | BIT(LT_IR_DROPPED),
    [LT_IR_MIGRATING] = BIT(LT_IR_QUEUED) | BIT(LT_IR_OUT) | BIT(LT_IR_DROPPED),
    [LT_IR_DROPPED] = 0,
};

static const char *state_name(lt_ir_state_t st) {
  static const char *const names[] = {"queued", "out", "migrating", "dropped"};
  return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

void lt__rec_to(lt_instr_rec_t *r, lt_ir_state_t to) {
  if (!(legal_next[r->state] & BIT(to))) {
    lt__log(LT_LOG_ERROR, "instruction %llu: illegal move from %s to %s",
            (unsigned long long)r->seq, state_name(r->state), state_name(to));
    assert(!"illegal instruction record state change");
  }
  r->state = to;
  if (to == LT_IR_QUEUED) r->conn = -1;
}

/* Records kept for reuse, at most: a few windows' worth of instructions. */
#define RECS_KEPT 4096

lt_instr_rec_t *lt__rec_new(lt_sched_t *s, lt_job_rec_t *j) {
  if (s->recs.size == 0) s->recs = LT_FREELIST_INIT(sizeof(lt_instr_rec_t), RECS_KEPT);
  lt_instr_rec_t *r = lt__freelist_get(&s->recs);
  if (r == NULL) return NULL;
  /* Output i of this instruction is named seq + i: ids are spaced for the most parts. */
  r->seq = s->next_seq;
  s->next_seq += (uint64_t)LT_MAX_PARTS + 1;
  r->job = j;
  r->gen = j->gen;
  r->state = LT_IR_QUEUED;
  r->conn = -1;
  j->live++;
  return r;
}

void lt__sched_push_fireable(lt_sched_t *s, lt_instr_rec_t *r, int front) {
  lt__rec_to(r, LT_IR_QUEUED);
  if (front)
    LT_QUEUE_PUSH_FRONT(s->fire_head, s->fire_tail, r, next);
  else
    LT_QUEUE_PUSH(s->fire_head, s->fire_tail, r, next);
  s->nfire++;
}

lt_instr_rec_t *lt__sched_pop_fireable(lt_sched_t *s) {
  lt_instr_rec_t *r;
  LT_QUEUE_POP(s->fire_head, s->fire_tail, r, next);
  if (r != NULL) s->nfire--;
  return r;
}

void lt__sched_put_on(lt_sched_t *s, lt_instr_rec_t *r, int idx) {
  r->conn = idx;
  r->packed = 0; /* dispatch.c marks it again when it goes in a pack */
  r->pack_lead = 0;
  lt__rec_to(r, LT_IR_OUT);
  HASH_ADD(hh, s->inflight, seq, sizeof r->seq, r);
  r->run_ms = -1;
  DL_APPEND2(s->srv[idx].slot.out, r, out_prev, out_next);
  lt__sched_mark_running(s, (size_t)idx, r->sent_ms); /* it runs on arrival when in line */
  s->srv[idx].conn.inflight++;
  s->srv[idx].admitted++;
  lt__pace_admit(&s->srv[idx].pace, r->stages);
}

void lt__sched_take_off(lt_sched_t *s, lt_instr_rec_t *r) {
  size_t idx = (size_t)r->conn;
  HASH_DEL(s->inflight, r);
  DL_DELETE2(s->srv[idx].slot.out, r, out_prev, out_next);
  r->out_prev = r->out_next = NULL;
  s->srv[idx].conn.inflight--;
  s->srv[idx].admitted--;
  lt__pace_unadmit(&s->srv[idx].pace, r->stages);
  int64_t now = lt__clock_ms();
  lt__sched_mark_running(s, idx, now);
  s->freed = 1;
  if (s->srv[idx].admitted == 0) s->srv[idx].slot.idle_ms = now;
}

/* running_slots returns how many of our instructions server idx runs at once: as many as
 * it has worker threads, fewer under throttle, when it is told the window and keeps to it
 * (without throttle a window below its threads is only what the client admits). */
static uint32_t running_slots(const lt_sched_t *s, size_t idx) {
  const lt_pace_t *p = &s->srv[idx].pace;
  if (!s->opts->throttle && p->workers > 0) return p->workers;
  return (uint32_t)lt__pace_parallel(p);
}

void lt__sched_mark_running(lt_sched_t *s, size_t idx, int64_t now_ms) {
  uint32_t n = running_slots(s, idx);
  for (lt_instr_rec_t *r = s->srv[idx].slot.out; r != NULL && n > 0; r = r->out_next, n--)
    if (r->run_ms < 0) r->run_ms = now_ms;
}

int lt__end_status(lt_end_t why, const lt_completion_t *cp) {
  return cp != NULL ? cp->status : why == LT_END_NOT_RUN ? LT_ECANCELED : LT_ELOST;
}

int lt__end_migrates(const lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp) {
  return r->state == LT_IR_MIGRATING && lt__end_status(why, cp) == LT_ECANCELED && r->twin == NULL;
}

int lt__end_decides(const lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp) {
  return why == LT_END_DONE ||
         (why == LT_END_FAILED && !lt__status_lost(lt__end_status(why, cp)) && !r->backup);
}

/* migration_settled settles a migration of r (taken off its server already) by how its time
 * there ended: 1 when the server confirmed that r never ran (ECANCELED) and r is queued for
 * placement again; 0 when it had started, or when it got a copy meanwhile, which then
 * carries on alone (twin_settled). */
static int migration_settled(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why,
                             const lt_completion_t *cp) {
  if (r->state != LT_IR_MIGRATING) return 0;
  int status = lt__end_status(why, cp);
  lt__log(LT_LOG_DEBUG, "instruction %llu: its migration's cancel settled: %s",
          (unsigned long long)r->seq,
          status == LT_ECANCELED ? "it never ran there" : lt_strerror(status));
  /* It had started: its result stands. Or it got a copy while the cancel was on its way:
   * back out, so that settling the twins leaves the copy alone, as for any of them that
   * never ran. */
  if (!lt__end_migrates(r, why, cp)) {
    lt__rec_to(r, LT_IR_OUT);
    return 0;
  }
  lt__sched_push_fireable(s, r, 1);
  return 1;
}

/* twin_settled settles r's copies as r's time on its server ends: `ok` (a result, or a
 * failure of the kernel itself) settles both; otherwise (lost, never run) the twin carries
 * on. 1 when r is to be dropped without effect (its twin won, or carries on), else 0. */
static int twin_settled(lt_sched_t *s, lt_instr_rec_t *r, int ok) {
  if (r->state == LT_IR_DROPPED) return 1;
  lt_instr_rec_t *t = r->twin;
  if (t == NULL) return 0;
  r->twin = NULL;
  t->twin = NULL;
  if (!ok) {
    /* A copy left alone is the instruction from now on (placed again like any other if it
     * is lost in turn), and its result is the one used. */
    t->backup = 0;
    return 1;
  }
  /* The twin is out: copies go out at once. One whose migration's cancel is on its way is
   * cancelled already; the answer only frees it. */
  if (t->state != LT_IR_MIGRATING) lt__fail_cancel(s, t);
  lt__rec_to(t, LT_IR_DROPPED);
  return 0;
}

lt_settle_t lt__rec_settle(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why,
                           const lt_completion_t *cp) {
  if (r->state == LT_IR_QUEUED) return LT_SETTLE_APPLY;
  lt__sched_take_off(s, r);
  if (migration_settled(s, r, why, cp)) return LT_SETTLE_REQUEUED;
  return twin_settled(s, r, lt__end_decides(r, why, cp)) ? LT_SETTLE_DROP : LT_SETTLE_APPLY;
}

int lt__rec_stale(const lt_instr_rec_t *r) {
  return r->gen != r->job->gen || r->job->finished;
}

int lt__rec_portable(const lt_instr_rec_t *r) {
  if (r->chained || r->packed || (r->moved && !r->final) || r->twin != NULL || lt__rec_stale(r))
    return 0;
  for (uint32_t i = 0; i < r->nins; i++)
    if (r->ins[i].value == NULL) return 0;
  return 1;
}

int lt__token_made(const lt_sched_t *s, const lt_token_t *t) {
  if (t->value != NULL) return 1;
  uint64_t producer = t->id.seq - t->id.seq % ((uint64_t)LT_MAX_PARTS + 1);
  lt_instr_rec_t *p, *out = s->inflight;
  HASH_FIND(hh, out, &producer, sizeof producer, p);
  return p == NULL;
}

/* input_ready tells whether input t of r can be read by a copy: the client holds it, or r's
 * own server holds it and its producer has completed (a copy of a reader still waiting for
 * its input would only wait for the same producer). A value r fetched from another server
 * is not: r, its last reader, had it released there as it took it. */
static int input_ready(const lt_sched_t *s, const lt_instr_rec_t *r, const lt_token_t *t) {
  if (t->value != NULL) return 1;
  int h = lt__holder(s, t);
  if (h < 0 || h != r->conn || !lt__server_alive(s, (size_t)h) || t->id.client != s->client_id)
    return 0;
  return lt__token_made(s, t);
}

int lt__rec_copyable(const lt_sched_t *s, const lt_instr_rec_t *r) {
  if (r->packed || (r->moved && !r->final) || r->twin != NULL || lt__rec_stale(r)) return 0;
  for (uint32_t i = 0; i < r->nins; i++)
    if (!input_ready(s, r, &r->ins[i])) return 0;
  return 1;
}

lt_token_t *lt__rec_ins_alloc(lt_instr_rec_t *r, uint32_t n) {
  return n <= LT_REC_SMALL_INS ? r->ins_small : calloc(n, sizeof(lt_token_t));
}

void lt__rec_ins_free(lt_instr_rec_t *r) {
  if (r->ins != r->ins_small) free(r->ins);
  r->ins = NULL;
}

lt_instr_rec_t *lt__rec_copy(lt_sched_t *s, const lt_instr_rec_t *r) {
  /* Tokens beyond what a record holds inside are allocated first: a record once made can
   * only end through its job (jobs.c). */
  lt_token_t *big = r->nins > LT_REC_SMALL_INS ? calloc(r->nins, sizeof *big) : NULL;
  if (r->nins > LT_REC_SMALL_INS && big == NULL) return NULL;
  lt_instr_rec_t *c = lt__rec_new(s, r->job);
  if (c == NULL) {
    free(big);
    return NULL;
  }
  lt_token_t *ins = big != NULL ? big : c->ins_small;
  for (uint32_t i = 0; i < r->nins; i++) {
    ins[i] = r->ins[i];
    if (ins[i].value != NULL) lt__value_ref(ins[i].value);
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
