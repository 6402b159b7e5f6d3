/* failures.c: the failure accounting, its one owner. What a failure costs a task is counted
 * here and nowhere else: a record's tries (dispatches lost to a failed server) and a task's
 * restarts (recomputations from its input), both toward max_retries; what a lost session
 * costs, held (lt_loss_t, per server entry) until the server's next welcome says how the
 * session ended: refunded after a crash (nobody's fault but the culprit's, which the crash
 * policy charges), counted for good otherwise (a session that never welcomes again keeps them
 * held); the rule of what a loss of a record does to its task; the one verdict on how a
 * session ended; and the cancels sent to servers. Policies ask (policy_view.h: would a loss
 * fail this task, the crash verdict, what a crash is charged to) and never count. Touches
 * records' and jobs' counters and the entries' loss lists; calls the server table and the
 * connection, nothing else of the dispatcher. Dispatcher thread only. */
#include <stdlib.h>

#include "exec.h"
#include "sched_failures.h"
#include "sched_servers.h"
#include "vec.h"

/* ---- tries and restarts ----------------------------------------------------------------- */

void lt__fail_charge_try(lt_sched_t *s, lt_instr_rec_t *r) {
  r->tries++;
  s->retries++;
}

uint32_t lt__fail_restarts_counted(const lt_job_rec_t *j) {
  return j->restarts - j->restarts_held;
}

int lt__fail_restarts_spent(const lt_sched_t *s, const lt_job_rec_t *j) {
  return lt__fail_restarts_counted(j) >= s->opts->max_retries;
}

void lt__fail_restart(lt_sched_t *s, lt_job_rec_t *j, long lost) {
  int known = lost >= 0 && (size_t)lost < s->nsrv ? s->srv[lost].slot.crashed : -1;
  if (known > 0) return; /* a crash's loss: nobody's retry */
  j->restarts++;
  s->retries++;
  if (known < 0) return;
  lt_slot_t *sl = &s->srv[lost].slot;
  lt_loss_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* counted: nothing worse than before */
  *n = (lt_loss_t){0, j->num, NULL, 1};
  j->restarts_held++;
}

/* movable tells whether lost record r can run elsewhere: every input is still somewhere (a
 * value here, or a reference on a live server other than r's that the lost instruction did
 * not release: only dc steps keep their inputs), and, if its frame went on, it named its
 * output to successors on that server only as the task's last. */
static int movable(const lt_sched_t *s, const lt_instr_rec_t *r) {
  if (r->moved && !r->final) return 0;
  for (uint32_t i = 0; i < r->nins; i++) {
    const lt_token_t *t = &r->ins[i];
    if (t->value == NULL &&
        (lt__holder(s, t) < 0 || lt__server_gone(s, (size_t)lt__holder(s, t)) ||
         !lt__op(r->op)->keeps_inputs || (size_t)lt__holder(s, t) == (size_t)r->conn))
      return 0;
  }
  return 1;
}

lt_loss_outcome_t lt__fail_loss_outcome(const lt_sched_t *s, const lt_instr_rec_t *r,
                                        uint32_t more) {
  if (!movable(s, r)) return LT_LOSS_RECOMPUTES;
  return r->tries + more - r->tries_held > s->opts->max_retries ? LT_LOSS_FAILS : LT_LOSS_AGAIN;
}

int lt__fail_would_fail(const lt_sched_t *s, const lt_instr_rec_t *r) {
  switch (lt__fail_loss_outcome(s, r, 1)) {
  case LT_LOSS_AGAIN:
    return 0;
  case LT_LOSS_RECOMPUTES:
    return r->job->input == NULL || lt__fail_restarts_spent(s, r->job);
  default:
    return 1;
  }
}

/* ---- what is held, and refunded ---------------------------------------------------------- */

void lt__fail_note_loss(lt_sched_t *s, size_t idx, lt_instr_rec_t *r) {
  /* Also a record its task's restart made stale a moment ago, in the same loss: it ran, and
   * may be what crashed the server. */
  if (r->stages == NULL) return;
  lt_slot_t *sl = &s->srv[idx].slot;
  lt_loss_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* the loss stays counted: nothing worse */
  *n = (lt_loss_t){r->seq, r->job->num, r->stages, 0};
  r->tries_held++;
}

long lt__fail_dead_holder(const lt_sched_t *s, const lt_token_t *ins, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    int32_t h = lt__holder(s, &ins[i]);
    if (ins[i].value == NULL && h >= 0 && (size_t)h < s->nsrv && lt__server_gone(s, (size_t)h))
      return h;
  }
  return -1;
}

/* find_rec returns the record of instruction `seq` still out or queued, or NULL. */
static lt_instr_rec_t *find_rec(lt_sched_t *s, uint64_t seq) {
  lt_instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &seq, sizeof seq, r);
  for (lt_instr_rec_t *q = s->fire_head; r == NULL && q != NULL; q = q->next)
    if (q->seq == seq) r = q;
  return r;
}

/* settle_try settles the try held when `seq` was lost: taken back after a crash, else
 * counted for good. */
static void settle_try(lt_sched_t *s, uint64_t seq, int crashed) {
  lt_instr_rec_t *r = find_rec(s, seq);
  if (r == NULL || r->tries_held == 0) return;
  r->tries_held--;
  if (!crashed || r->tries == 0) return;
  r->tries--;
  if (s->retries > 0) s->retries--;
}

/* settle_restart settles a restart of task `task` held for a session, likewise. */
static void settle_restart(lt_sched_t *s, uint64_t task, int crashed) {
  lt_job_rec_t *j;
  HASH_FIND(hh, s->jobs, &task, sizeof task, j);
  if (j == NULL || j->restarts_held == 0) return;
  j->restarts_held--;
  if (!crashed || j->restarts == 0) return;
  j->restarts--;
  if (s->retries > 0) s->retries--;
}

void lt__fail_settle(lt_sched_t *s, size_t idx, int crashed) {
  lt_slot_t *sl = &s->srv[idx].slot;
  sl->crashed = crashed ? 1 : -1;
  for (uint32_t i = 0; i < sl->nlost; i++) {
    if (sl->lost[i].restart)
      settle_restart(s, sl->lost[i].task, crashed);
    else
      settle_try(s, sl->lost[i].seq, crashed);
  }
  lt__fail_forget(s, idx);
}

void lt__fail_forget(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->srv[idx].slot;
  LT_VEC_FREE(sl->lost, sl->nlost, sl->caplost);
}

void lt__fail_session_ended(lt_sched_t *s, size_t idx, const lt_msg_t *w) {
  long prev = s->srv[idx].slot.predecessor;
  if (prev < 0) return;
  lt_req_queue_t *q = &s->requests;
  lt_req_t *r = LT_VEC_PUSH(q->reqs, q->n, q->cap);
  if (r == NULL) return; /* what it cost stays held: nothing worse than a session never back */
  *r = (lt_req_t){.kind = LT_REQ_SETTLE,
                  .policy = LT_REQ_CORE,
                  .server = (size_t)prev,
                  .n = lt__fail_crash_verdict(s, idx, w) == LT_CRASH_OURS};
}

/* ---- the crash verdict -------------------------------------------------------------------- */

/* charged tells whether the welcome charges the crash to instruction `seq`: the culprit
 * alone when it names one, else every listed instruction. */
static int charged(const lt_msg_t *w, uint64_t seq) {
  if (w->u.welcome.crash_culprit != 0) return seq == w->u.welcome.crash_culprit;
  for (uint32_t i = 0; i < w->u.welcome.ncrashed; i++)
    if (w->u.welcome.crashed[i] == seq) return 1;
  return 0;
}

/* culprit_known tells whether the culprit the welcome names is one of what the ended
 * session `sl` lost (or none is named). A culprit we never knew of refunds nothing: a crash
 * loop still ends at max_retries. */
static int culprit_known(const lt_slot_t *sl, const lt_msg_t *w) {
  uint64_t culprit = w->u.welcome.crash_culprit;
  for (uint32_t i = 0; culprit != 0 && i < sl->nlost; i++)
    if (!sl->lost[i].restart && sl->lost[i].seq == culprit) return 1;
  return culprit == 0;
}

lt_crash_verdict_t lt__fail_crash_verdict(const lt_sched_t *s, size_t idx, const lt_msg_t *w) {
  long prev = s->srv[idx].slot.predecessor;
  if (prev < 0) return LT_CRASH_NONE;
  const lt_conn_t *old = &s->srv[prev].conn;
  if (w->u.welcome.crash_signal <= 0 || old->incarnation == 0 ||
      w->u.welcome.crashed_incarnation != old->incarnation)
    return LT_CRASH_NONE;
  return culprit_known(&s->srv[prev].slot, w) ? LT_CRASH_OURS : LT_CRASH_FOREIGN;
}

const lt_loss_t *lt__fail_crash_next(const lt_sched_t *s, size_t idx, const lt_msg_t *w,
                                     uint32_t *at) {
  if (*at == 0 && lt__fail_crash_verdict(s, idx, w) != LT_CRASH_OURS) return NULL;
  const lt_slot_t *ps = &s->srv[s->srv[idx].slot.predecessor].slot;
  while (*at < ps->nlost) {
    const lt_loss_t *l = &ps->lost[(*at)++];
    if (!l->restart && charged(w, l->seq)) return l;
  }
  return NULL;
}

/* ---- cancels ------------------------------------------------------------------------------ */

void lt__fail_cancel_seqs(lt_sched_t *s, size_t idx, uint64_t *seqs, uint32_t n) {
  if (n == 0 || !lt__server_alive(s, idx)) return;
  lt_msg_t m = {.type = LT_MSG_CANCEL};
  m.u.cancel.seqs = seqs;
  m.u.cancel.nseqs = n;
  int rc = lt__conn_send(&s->srv[idx].conn, &m, NULL, lt__clock_ms());
  if (rc != LT_OK) lt__server_mark_dead(s, idx, lt_strerror(rc), 0);
}

void lt__fail_cancel(lt_sched_t *s, const lt_instr_rec_t *r) {
  uint64_t seq = r->seq;
  if (!r->packed) lt__fail_cancel_seqs(s, (size_t)r->conn, &seq, 1);
}

void lt__fail_cancel_server(lt_sched_t *s, size_t idx) {
  uint32_t out = s->srv[idx].conn.inflight;
  uint64_t *seqs = calloc(out ? out : 1, sizeof *seqs);
  uint32_t n = 0;
  for (lt_instr_rec_t *r = s->srv[idx].slot.out; r != NULL && seqs != NULL; r = r->out_next)
    seqs[n++] = r->seq;
  lt__fail_cancel_seqs(s, idx, seqs, n);
  free(seqs);
}
