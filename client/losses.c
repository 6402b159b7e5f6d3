/* losses.c: what the loss of a server's session costs the tasks, held until the server says
 * how the session ended. The instructions lost with it (their tries) and the recomputations
 * of tasks whose values it held (their restarts) are counted toward max_retries, but held
 * (lt_loss_t, per server entry) until the server's next welcome: refunded when it reports a
 * crash (nobody's fault but the culprit's, which the crash policy charges), counted for good
 * when it does not. A session that never welcomes again keeps them held. Touches records'
 * and jobs' counters and the entries' lists; calls nothing of the dispatcher. Dispatcher
 * thread only. */
#include <stdlib.h>

#include "sched_jobs.h"
#include "vec.h"

void lt__loss_note(lt_sched_t *s, size_t idx, lt_instr_rec_t *r) {
  /* Also a record its task's restart made stale a moment ago, in the same loss: it ran, and
   * may be what crashed the server. */
  if (r->stages == NULL) return;
  lt_slot_t *sl = &s->srv[idx].slot;
  lt_loss_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* the loss stays counted: nothing worse */
  *n = (lt_loss_t){r->seq, r->job->num, r->stages, 0};
  r->tries_held++;
}

void lt__loss_count_restart(lt_sched_t *s, lt_job_rec_t *j, long lost) {
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

long lt__loss_dead_holder(const lt_sched_t *s, const lt_token_t *ins, uint32_t n) {
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

void lt__loss_settle(lt_sched_t *s, size_t idx, int crashed) {
  lt_slot_t *sl = &s->srv[idx].slot;
  sl->crashed = crashed ? 1 : -1;
  for (uint32_t i = 0; i < sl->nlost; i++) {
    if (sl->lost[i].restart)
      settle_restart(s, sl->lost[i].task, crashed);
    else
      settle_try(s, sl->lost[i].seq, crashed);
  }
  lt__loss_forget(s, idx);
}

void lt__loss_forget(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->srv[idx].slot;
  LT_VEC_FREE(sl->lost, sl->nlost, sl->caplost);
}
