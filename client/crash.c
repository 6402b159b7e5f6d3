/* crash.c: crashes charged to the instructions that caused them. A supervised server whose
 * worker process dies of a signal comes back as a new incarnation and, in its welcome to
 * each client that greets it again, lists that client's instructions the crash is charged
 * to: the culprit alone (crash_culprit) when the worker knew whose thread got the signal,
 * else every one that was running. The client kept what the ended session was running
 * (lt_lost_rec_t, by slot); at the welcome each charged instruction's chain is charged to
 * its task: a chain present at two crashes is poison, and its task fails with LT_ECRASH
 * naming the kernel and the signal instead of crashing more servers. Losses to a crash never
 * count toward max_retries: the tries of instructions lost with the session and the task
 * restarts its lost values caused are held (not counted) until the welcome, refunded if it
 * reports a crash and counted if not. Dispatcher thread only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_internal.h"
#include "vec.h"

#define POISON_CRASHES 2

void lt__sched_note_lost(lt_sched_t *s, size_t idx, lt_instr_rec_t *r) {
  lt_slot_t *sl = &s->slots[idx];
  /* Also a record its task's restart made stale a moment ago, in the same loss: it ran, and
   * may be what crashed the server. */
  if (r->stages == NULL) return;
  lt_lost_rec_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* the loss stays charged: nothing worse */
  *n = (lt_lost_rec_t){r->seq, r->job->num, r->stages, 0};
  r->tries_held++;
}

void lt__sched_count_restart(lt_sched_t *s, lt_job_rec_t *j, long lost) {
  int known = lost >= 0 && (size_t)lost < s->nconns ? s->slots[lost].crashed : -1;
  if (known > 0) return; /* a crash's loss: nobody's retry */
  j->restarts++;
  s->retries++;
  if (known < 0) return;
  lt_slot_t *sl = &s->slots[lost];
  lt_lost_rec_t *n = LT_VEC_PUSH(sl->lost, sl->nlost, sl->caplost);
  if (n == NULL) return; /* counted: nothing worse than before */
  *n = (lt_lost_rec_t){0, j->num, NULL, 1};
  j->restarts_held++;
}

long lt__sched_dead_holder(const lt_sched_t *s, const lt_token_t *ins, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    int h = ins[i].holder;
    if (ins[i].value == NULL && h >= 0 && (size_t)h < s->nconns &&
        s->conns[h].state == LT_CONN_DEAD)
      return h;
  }
  return -1;
}

void lt__sched_forget_lost(lt_sched_t *s, size_t idx) {
  lt_slot_t *sl = &s->slots[idx];
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

/* settle_try settles the try held when `seq` was lost with a session: taken back when the
 * session crashed, else counted. */
static void settle_try(lt_sched_t *s, uint64_t seq, int crashed) {
  lt_instr_rec_t *r = find_rec(s, seq);
  if (r == NULL || r->tries_held == 0) return;
  r->tries_held--;
  if (!crashed || r->tries == 0) return;
  r->tries--;
  if (s->retries > 0) s->retries--;
}

/* settle_restart settles a restart of task `task` held for a session: taken back when the
 * session crashed, else counted. */
static void settle_restart(lt_sched_t *s, uint64_t task, int crashed) {
  lt_job_rec_t *j;
  HASH_FIND(hh, s->jobs, &task, sizeof task, j);
  if (j == NULL || j->restarts_held == 0) return;
  j->restarts_held--;
  if (!crashed || j->restarts == 0) return;
  j->restarts--;
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

/* charged tells whether the welcome charges the crash to instruction `seq`: the culprit
 * alone when it names one, else every listed instruction. */
static int charged(const lt_msg_t *w, uint64_t seq) {
  if (w->u.welcome.crash_culprit != 0) return seq == w->u.welcome.crash_culprit;
  for (uint32_t i = 0; i < w->u.welcome.ncrashed; i++)
    if (w->u.welcome.crashed[i] == seq) return 1;
  return 0;
}

void lt__sched_crash_report(lt_sched_t *s, size_t idx, const lt_msg_t *w) {
  long p = s->slots[idx].predecessor;
  if (p < 0) return;
  const lt_conn_t *old = &s->conns[p];
  int crashed = w->u.welcome.crash_signal > 0 && old->incarnation != 0 &&
                w->u.welcome.crashed_incarnation == old->incarnation;
  if (crashed) {
    char sname[32];
    signal_name(w->u.welcome.crash_signal, sname, sizeof sname);
    lt__log(LT_LOG_WARN, "server %s crashed with %s, charged to %u of our instructions%s",
            old->endpoint, sname, w->u.welcome.ncrashed,
            w->u.welcome.crash_culprit != 0 ? " (the culprit)" : "");
  }
  lt_slot_t *ps = &s->slots[p];
  /* A culprit we never knew of (nothing of ours ran when it crashed, as far as we can tell)
   * refunds nothing: a crash loop still ends at max_retries. */
  uint64_t culprit = w->u.welcome.crash_culprit;
  int known = culprit == 0;
  for (uint32_t i = 0; !known && i < ps->nlost; i++)
    known = !ps->lost[i].restart && ps->lost[i].seq == culprit;
  if (crashed && !known)
    lt__log(LT_LOG_WARN, "server %s: the crash's culprit %llu is none of what we lost there",
            old->endpoint, (unsigned long long)culprit);
  crashed = crashed && known;
  ps->crashed = crashed ? 1 : -1;
  for (uint32_t i = 0; i < ps->nlost; i++) {
    const lt_lost_rec_t *l = &ps->lost[i];
    if (l->restart) {
      settle_restart(s, l->task, crashed);
      continue;
    }
    settle_try(s, l->seq, crashed);
    if (crashed && charged(w, l->seq)) charge(s, l, w->u.welcome.crash_signal);
  }
  lt__sched_forget_lost(s, (size_t)p);
}
