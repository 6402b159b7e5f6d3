/* instr.c: instruction records and their states. A record is queued for placement, out on
 * one server, out while a cancel moves it, or out after its twin won (lt_ir_state_t); the
 * legal moves between these states are written here once (lt__rec_to), as is what going
 * out on a server and coming back off it counts (the server's in-flight count, window and
 * backlog). It decides nothing about where a record goes or what its completion means:
 * dispatch.c, jobs.c, migrate.c, backup.c and watchdog.c do. Dispatcher thread only. */
#include <assert.h>
#include <stdlib.h>
#include <utlist.h>

#include "log.h"
#include "queue.h"
#include "sched_internal.h"

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

lt_instr_rec_t *lt__rec_new(lt_sched_t *s, lt_job_rec_t *j) {
  lt_instr_rec_t *r = calloc(1, sizeof *r);
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
}

lt_instr_rec_t *lt__sched_pop_fireable(lt_sched_t *s) {
  lt_instr_rec_t *r;
  LT_QUEUE_POP(s->fire_head, s->fire_tail, r, next);
  return r;
}

void lt__sched_put_on(lt_sched_t *s, lt_instr_rec_t *r, int idx) {
  r->conn = idx;
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
  if (s->srv[idx].admitted == 0) {
    s->srv[idx].slot.idle_ms = now;
    s->went_idle = 1;
  }
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
