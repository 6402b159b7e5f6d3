/* crash.c: the crash-charging policy: crashes charged to the instructions that caused them.
 * A supervised server whose worker process dies of a signal comes back as a new incarnation
 * and, in its welcome to each client that greets it again, lists that client's
 * instructions that were running at the crash. This policy keeps, per server entry, what
 * the ended session was running (its records that ended LT_END_LOST); at the successor's
 * welcome each listed instruction's chain is charged to its task: a chain present at two
 * crashes is poison, and its task fails with LT_ECRASH naming the kernel and the signal
 * instead of crashing more servers. Losses to a crash, of the poison and of the
 * instructions that happened to run beside it, are refunded: not charged to max_retries.
 * State: the lost records per server, and the crashes counted per task. Dispatcher thread
 * only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_internal.h"
#include "vec.h"

#define POISON_CRASHES 2

/* An instruction lost with a session, kept until the server's next welcome says whether
 * the session ended in a crash. */
typedef struct lost_rec {
  uint64_t seq;  /* the instruction */
  uint64_t task; /* its task (job) number */
  const void *key;
} lost_rec_t;

typedef struct crash_srv {
  lost_rec_t *lost;
  uint32_t nlost;
  size_t cap;
} crash_srv_t;

/* Crashes charged to one task: its chain that crashed, how often, and on which host last;
 * `hosts` counts the different hosts in a row it crashed. */
typedef struct charge {
  uint64_t task;
  const void *key;
  uint32_t crashes;
  size_t host;
  uint32_t hosts;
  UT_hash_handle hh;
} charge_t;

typedef struct crash_state {
  charge_t *charges; /* by task number */
} crash_state_t;

static void on_end(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                   const lt_completion_t *cp) {
  (void)cp;
  if (why != LT_END_LOST || lt__rec_stale(r) || r->stages == NULL) return;
  crash_srv_t *c = lt__policy_server(p, idx);
  lost_rec_t *n = LT_VEC_PUSH(c->lost, c->nlost, c->cap);
  if (n == NULL) return; /* the loss stays charged: nothing worse */
  *n = (lost_rec_t){r->seq, r->job->num, r->stages};
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

/* takers counts the hosts with a session that takes work. */
static uint32_t takers(const lt_sched_t *s) {
  uint32_t n = 0;
  for (size_t i = 0; i < s->nsrv; i++)
    n += lt__server_takes(s, i) || s->srv[i].conn.state == LT_CONN_HELLO;
  return n;
}

/* charge counts a crash on `host` against the chain of l's task. The chain is poison, and
 * the task fails with LT_ECRASH (its record, if still out, cancelled), at its second crash
 * on a different host; a crash on the host it crashed on before counts only while no other
 * host is there to tell a poison input from a flaky host (quarantine.c). */
static void charge(lt_policy_t *p, const lost_rec_t *l, int sig, size_t host) {
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
    c->crashes = c->hosts = 0;
  }
  if (c->crashes > 0 && c->host == host && takers(s) > 1) return;
  c->hosts += c->crashes == 0 || c->host != host;
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

uint64_t lt__crash_culprit(const lt_msg_t *w) {
  (void)w;
  return 0;
}

static int listed(const lt_msg_t *w, uint64_t seq) {
  for (uint32_t i = 0; i < w->u.welcome.ncrashed; i++)
    if (w->u.welcome.crashed[i] == seq) return 1;
  return 0;
}

static void forget(lt_policy_t *p, size_t idx) {
  crash_srv_t *c = lt__policy_server(p, idx);
  if (c != NULL) LT_VEC_FREE(c->lost, c->nlost, c->cap);
}

static void on_server_ready(lt_policy_t *p, size_t idx, const lt_msg_t *w) {
  const lt_sched_t *s = p->s;
  long prev = s->srv[idx].slot.predecessor;
  if (prev < 0) return;
  const lt_conn_t *old = &s->srv[prev].conn;
  int crashed = w->u.welcome.crash_signal > 0 && old->incarnation != 0 &&
                w->u.welcome.crashed_incarnation == old->incarnation;
  if (crashed) {
    char sname[32];
    signal_name(w->u.welcome.crash_signal, sname, sizeof sname);
    lt__log(LT_LOG_WARN, "server %s crashed with %s while running %u of our instructions",
            old->endpoint, sname, w->u.welcome.ncrashed);
    prune(p);
    crash_srv_t *c = lt__policy_server(p, (size_t)prev);
    uint64_t culprit = lt__crash_culprit(w);
    for (uint32_t i = 0; i < c->nlost; i++) {
      lt__policy_ask(
          p, &(lt_req_t){
                 .kind = LT_REQ_REFUND, .seq = c->lost[i].seq, .task = c->lost[i].task, .n = 1});
      /* The culprit alone, when the server knows it; else every one running then. */
      uint64_t seq = c->lost[i].seq;
      if (culprit != 0 ? seq == culprit : listed(w, seq))
        charge(p, &c->lost[i], w->u.welcome.crash_signal, s->srv[idx].slot.host);
    }
  }
  forget(p, (size_t)prev);
}

static void fini(lt_policy_t *p) {
  crash_state_t *st = p->state;
  charge_t *c, *tmp;
  HASH_ITER(hh, st->charges, c, tmp) {
    HASH_DEL(st->charges, c);
    free(c);
  }
  for (size_t i = 0; i < p->s->capsrv; i++) /* entries past nsrv have no blob */
    forget(p, i);
}

const lt_policy_ops_t lt__policy_crash = {
    .name = "crash",
    .state_size = sizeof(crash_state_t),
    .server_size = sizeof(crash_srv_t),
    .on_server_ready = on_server_ready,
    .on_end = on_end,
    .fini = fini,
};
