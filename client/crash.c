/* crash.c: the crash-charging policy: crashes charged to the instructions that caused them.
 * A supervised server whose worker process dies of a signal comes back as a new incarnation
 * and, in its welcome to each client that greets it again, says what the crash is charged
 * to: the culprit alone (crash_culprit) when the worker knew whose thread got the signal,
 * else every one of that client's instructions that was running. At the successor's welcome
 * this policy reads what the ended session was running (the entry's losses, losses.c) and
 * charges the chain of each charged instruction to its task: a chain that crashed twice is
 * poison, and its task fails with LT_ECRASH naming the kernel and the signal instead of
 * crashing more servers. It asks the core to refund what the crash cost everyone (no
 * max_retries counted for it), or, when the session did not end in a crash (or the culprit
 * is none of ours), to count it for good. State: the crashes charged per task. Dispatcher
 * thread only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "policy_view.h"

#define POISON_CRASHES 2

/* Crashes charged to one task: its chain that crashed, how often, and on which host last. */
typedef struct charge {
  uint64_t task;
  const void *key;
  uint32_t crashes;
  size_t host;
  uint32_t spared; /* second crashes on the same host not counted (another server soon may) */
  UT_hash_handle hh;
} charge_t;

typedef struct crash_state {
  charge_t *charges; /* by task number */
} crash_state_t;

static const char *kernel_of(const lt_sched_t *s, const void *key) {
  const lt_tstage_t *st = key;
  return st->kernel < s->tmpl->nkernels ? s->tmpl->kernels[st->kernel] : "?";
}

/* signal_name names the welcome's crash_signal: a signal, or 256 + the status of an exit the
 * worker had not decided on (a kernel that called exit: proto/msg.h). */
static void signal_name(int sig, char *buf, size_t len) {
  const char *abbrev = sig > 0 && sig < 256 ? sigabbrev_np(sig) : NULL;
  if (sig >= 256)
    snprintf(buf, len, "exit(%d)", sig - 256);
  else if (abbrev != NULL)
    snprintf(buf, len, "SIG%s", abbrev);
  else
    snprintf(buf, len, "signal %d", sig);
}

/* takers counts the servers that take work, or soon may (greeting). */
static uint32_t takers(const lt_sched_t *s) {
  uint32_t n = 0;
  for (size_t i = 0; i < s->nsrv; i++)
    n += lt__server_takes(s, i) || s->srv[i].conn.state == LT_CONN_HELLO;
  return n;
}

/* charge counts a crash on `host` against the chain of l's task. The chain is poison, and
 * the task fails with LT_ECRASH (its record, if still out, cancelled), at its second crash;
 * a second crash on the same host as the first counts only while no other server is there
 * to tell a poison input from a flaky host (quarantine.c), or once that was so max_retries
 * times. */
static void charge(lt_policy_t *p, const lt_loss_t *l, int sig, size_t host) {
  crash_state_t *st = p->state;
  const lt_sched_t *s = p->s;
  lt_job_rec_t *j;
  HASH_FIND(hh, s->jobs, &l->task, sizeof l->task, j);
  if (j == NULL || j->finished) return;
  charge_t *c;
  HASH_FIND(hh, st->charges, &l->task, sizeof l->task, c);
  if (c == NULL) {
    if ((c = calloc(1, sizeof *c)) == NULL) return;
    c->task = l->task;
    HASH_ADD(hh, st->charges, task, sizeof c->task, c);
  }
  if (c->key != l->key) {
    c->key = l->key;
    c->crashes = c->spared = 0;
  }
  /* Spared at most max_retries times: servers that only greet may never come back, and the
   * retry, with nowhere else to go, lands on the same host again (a livelock: the
   * simulator's seed 3461). */
  if (c->crashes > 0 && c->host == host && takers(s) > 1 && c->spared++ < s->opts->max_retries)
    return;
  c->host = host;
  if (++c->crashes < POISON_CRASHES) return;
  char sname[32];
  signal_name(sig, sname, sizeof sname);
  lt_req_t q = {.kind = LT_REQ_FAIL, .task = l->task, .seq = l->seq, .err = LT_ECRASH};
  snprintf(q.msg, sizeof q.msg, "%s: server crashed with %s (%s; not retried)",
           kernel_of(s, l->key), sname, c->crashes == 2 ? "twice" : "again");
  lt__policy_ask(p, &q);
}

/* prune forgets the charges of tasks that are over. */
static void prune(lt_policy_t *p) {
  crash_state_t *st = p->state;
  charge_t *c, *tmp;
  HASH_ITER(hh, st->charges, c, tmp) {
    lt_job_rec_t *j;
    HASH_FIND(hh, p->s->jobs, &c->task, sizeof c->task, j);
    if (j == NULL || j->finished) {
      HASH_DEL(st->charges, c);
      free(c);
    }
  }
}

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

static void on_server_ready(lt_policy_t *p, size_t idx, const lt_msg_t *w) {
  const lt_sched_t *s = p->s;
  long prev = s->srv[idx].slot.predecessor;
  if (prev < 0) return;
  const lt_conn_t *old = &s->srv[prev].conn;
  const lt_slot_t *ps = &s->srv[prev].slot;
  int crashed = w->u.welcome.crash_signal > 0 && old->incarnation != 0 &&
                w->u.welcome.crashed_incarnation == old->incarnation;
  if (crashed) {
    char sname[32];
    signal_name(w->u.welcome.crash_signal, sname, sizeof sname);
    lt__log(LT_LOG_WARN, "server %s crashed with %s, charged to %u of our instructions%s",
            old->endpoint, sname, w->u.welcome.ncrashed,
            w->u.welcome.crash_culprit != 0 ? " (the culprit)" : "");
    if (!culprit_known(ps, w)) {
      lt__log(LT_LOG_WARN, "server %s: the crash's culprit %llu is none of what we lost there",
              old->endpoint, (unsigned long long)w->u.welcome.crash_culprit);
      crashed = 0;
    }
  }
  if (crashed) {
    prune(p);
    for (uint32_t i = 0; i < ps->nlost; i++)
      if (!ps->lost[i].restart && charged(w, ps->lost[i].seq))
        charge(p, &ps->lost[i], w->u.welcome.crash_signal, s->srv[idx].slot.host);
  }
  lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_REFUND, .server = (size_t)prev, .n = crashed});
}

static void fini(lt_policy_t *p) {
  crash_state_t *st = p->state;
  charge_t *c, *tmp;
  HASH_ITER(hh, st->charges, c, tmp) {
    HASH_DEL(st->charges, c);
    free(c);
  }
}

const lt_policy_ops_t lt__policy_crash = {
    .name = "crash",
    .state_size = sizeof(crash_state_t),
    .on_server_ready = on_server_ready,
    .fini = fini,
};
