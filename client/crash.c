/* crash.c: the crash-charging policy: crashes charged to the instructions that caused them.
 * A supervised server whose worker process dies of a signal comes back as a new incarnation
 * and, in its welcome to each client that greets it again, says what the crash is charged
 * to: the culprit alone (crash_culprit) when the worker knew whose thread got the signal,
 * else every one of that client's instructions that was running. At the successor's welcome
 * this policy asks the failure accounting (failures.c) for its verdict on the ended session
 * and for what its crash is charged to, and charges the chain of each such instruction to
 * its task: a chain that crashed twice is poison, and its task fails with LT_ECRASH naming
 * the kernel and the signal instead of crashing more servers. What the crash cost everyone
 * else is the accounting's to refund, on the same verdict: no max_retries counted for it
 * (nothing is refunded when the session did not end in a crash, or the culprit is none of
 * ours). State: the crashes charged per task. Dispatcher thread only. */
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
  if (c->crashes > 0 && c->host == host && lt__servers_takers(s, 1) > 1 &&
      c->spared++ < s->opts->max_retries)
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

static void on_server_ready(lt_policy_t *p, size_t idx, const lt_msg_t *w) {
  const lt_sched_t *s = p->s;
  lt_crash_verdict_t v = lt__fail_crash_verdict(s, idx, w);
  if (v == LT_CRASH_NONE) return;
  const char *ep = s->srv[s->srv[idx].slot.predecessor].conn.endpoint;
  char sname[32];
  signal_name(w->u.welcome.crash_signal, sname, sizeof sname);
  lt__log(LT_LOG_WARN, "server %s crashed with %s, charged to %u of our instructions%s", ep, sname,
          w->u.welcome.ncrashed, w->u.welcome.crash_culprit != 0 ? " (the culprit)" : "");
  if (v == LT_CRASH_FOREIGN) {
    lt__log(LT_LOG_WARN, "server %s: the crash's culprit %llu is none of what we lost there", ep,
            (unsigned long long)w->u.welcome.crash_culprit);
    return;
  }
  prune(p);
  const lt_loss_t *l;
  for (uint32_t at = 0; (l = lt__fail_crash_next(s, idx, w, &at)) != NULL;)
    charge(p, l, w->u.welcome.crash_signal, s->srv[idx].slot.host);
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
