/* crash.c: crashes charged to the instructions that caused them. A supervised server whose
 * worker process dies of a signal comes back as a new incarnation and, in its welcome to
 * each client that greets it again, lists that client's instructions that were running at
 * the crash. The client kept what the ended session was running (lt_lost_rec_t, by slot); at
 * the welcome each listed instruction's chain is charged to its task: a chain present at two
 * crashes is poison, and its task fails with LT_ECRASH naming the kernel and the signal
 * instead of crashing more servers. Losses to a crash, of the poison and of the instructions
 * that happened to run beside it, are not charged to max_retries. Dispatcher thread only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_internal.h"
#include "vec.h"

#define POISON_CRASHES 2

void lt__sched_note_lost(lt_sched_t *s, size_t idx, const lt_instr_rec_t *r) {
  lt_slot_t *sl = &s->srv[idx].slot;
  if (lt__sched_stale(r) || r->stages == NULL) return;
  lt_lost_rec_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* the loss stays charged: nothing worse */
  *n = (lt_lost_rec_t){r->seq, r->job->num, r->stages};
}

void lt__sched_forget_lost(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->srv[idx].slot;
  LT_VEC_FREE(sl->lost, sl->nlost, sl->caplost);
}

/* find_rec returns the record of instruction `seq` still out or queued, or NULL. */
static lt_instr_rec_t *find_rec(lt_sched_t *s, uint64_t seq) {
  lt_instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &seq, sizeof seq, r);
  for (lt_instr_rec_t *q = s->fire_head; r == NULL && q != NULL; q = q->next)
    if (q->seq == seq) r = q;
  return r;
}

/* refund takes back the retry charged when `seq` was lost with a crashed session. */
static void refund(lt_sched_t *s, uint64_t seq) {
  lt_instr_rec_t *r = find_rec(s, seq);
  if (r == NULL || r->tries == 0) return;
  r->tries--;
  if (s->retries > 0) s->retries--;
}

static const char *kernel_of(const lt_sched_t *s, const void *key) {
  const lt_tstage_t *st = key;
  return st->kernel < s->tmpl->nkernels ? s->tmpl->kernels[st->kernel] : "?";
}

static void signal_name(int sig, char *buf, size_t len) {
  const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
  if (abbrev != NULL)
    snprintf(buf, len, "SIG%s", abbrev);
  else
    snprintf(buf, len, "signal %d", sig);
}

/* charge counts a crash against the chain `key` of task `task`; at the second, the task
 * fails with LT_ECRASH and a copy still out is cancelled. */
static void charge(lt_sched_t *s, const lt_lost_rec_t *l, int sig) {
  lt_job_rec_t *j;
  HASH_FIND(hh, s->jobs, &l->task, sizeof l->task, j);
  if (j == NULL || j->finished) return;
  if (j->crash_key != l->key) {
    j->crash_key = l->key;
    j->crashes = 0;
  }
  if (++j->crashes < POISON_CRASHES) return;
  char sname[32], msg[256];
  signal_name(sig, sname, sizeof sname);
  snprintf(msg, sizeof msg, "%s: server crashed with %s (%s; not retried)", kernel_of(s, l->key),
           sname, j->crashes == 2 ? "twice" : "again");
  lt__log(LT_LOG_WARN, "task %llu: %s", (unsigned long long)l->task, msg);
  lt_instr_rec_t *r = find_rec(s, l->seq);
  if (r != NULL && r->state != LT_IR_QUEUED) lt__sched_cancel(s, (size_t)r->conn, &r->seq, 1);
  lt__sched_job_fail(s, j, LT_ECRASH, msg);
}

static int listed(const lt_msg_t *w, uint64_t seq) {
  for (uint32_t i = 0; i < w->u.welcome.ncrashed; i++)
    if (w->u.welcome.crashed[i] == seq) return 1;
  return 0;
}

void lt__sched_crash_report(lt_sched_t *s, size_t idx, const lt_msg_t *w) {
  long p = s->srv[idx].slot.predecessor;
  if (p < 0) return;
  const lt_conn_t *old = &s->srv[p].conn;
  int crashed = w->u.welcome.crash_signal > 0 && old->incarnation != 0 &&
                w->u.welcome.crashed_incarnation == old->incarnation;
  if (crashed) {
    char sname[32];
    signal_name(w->u.welcome.crash_signal, sname, sizeof sname);
    lt__log(LT_LOG_WARN, "server %s crashed with %s while running %u of our instructions",
            old->endpoint, sname, w->u.welcome.ncrashed);
    lt_slot_t *ps = &s->srv[p].slot;
    for (uint32_t i = 0; i < ps->nlost; i++) {
      refund(s, ps->lost[i].seq);
      if (listed(w, ps->lost[i].seq)) charge(s, &ps->lost[i], w->u.welcome.crash_signal);
    }
  }
  lt__sched_forget_lost(s, (size_t)p);
}
