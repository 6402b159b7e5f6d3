/* deadline.c: the deadline policy (option task_timeout_ms > 0; its stats are there, 0 and
 * false, without it): the client enforces the task deadline too, instead of trusting each
 * server to report it. A server fails an instruction that runs longer than task_timeout_ms
 * with LT_ETIMEDOUT itself; one that has been running an instruction (since the client saw
 * it come into the server's threads, `run_ms`) for that long plus a grace that covers the
 * server's report (GRACE_BEATS heartbeats, at least GRACE_MIN_MS) without any completion is
 * late: hostile, buggy or wedged. The instruction is taken back (cancelled there and placed
 * again, charged as a loss; stat `overdue`, with the watchdog's), and so is what waits behind
 * it on that server; once a task's instructions were taken back for this max_retries times,
 * or when one more loss would fail it anyway or no other server takes work or is being
 * greeted, the task fails with LT_ETIMEDOUT, naming the kernel (whether one more loss fails it
 * is the failure accounting's rule, lt__fail_would_fail: the rule the take-back's loss meets). A
 * late server gets no new work for a cool-down (COOL_FIRST_MS, doubled each time it is found late
 * again, at most COOL_MAX_MS), then one instruction at a time until it reports one. Under an
 * explicit `grain` an instruction may wait behind the rest of its group on one worker, so the
 * allowance is grain times the deadline; and while the server's latest load report shows work
 * waiting for a thread or for its inputs (a server shared with other clients, a value on its way
 * from a peer), the client cannot tell which of its instructions started, so the allowance is
 * WAITING_X times as long. Stats: `deadline_misses` (times a server was found late), `overdue` and
 * each server's `late`. State: per task its misses (forgotten once the task is over), per server
 * its cool-down, and its counters. It only reads the dispatcher's state and asks (take back, fail,
 * limit). Dispatcher thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "log.h"
#include "policy_view.h"

#define GRACE_BEATS   2
#define GRACE_MIN_MS  1000
#define COOL_FIRST_MS 10000
#define COOL_MAX_MS   600000
#define WAITING_X     4 /* the allowance while the server reports work waiting */

typedef struct dl_srv {
  int64_t until_ms; /* no new work until then; 0: not cooling down */
  uint32_t cool_ms; /* the latest cool-down */
  int probation;    /* after a cool-down: one instruction at a time until a report */
  int64_t swept_ms; /* the tick that took back what waited there */
} dl_srv_t;

typedef struct dl_task {
  uint64_t task;
  uint32_t misses;
  UT_hash_handle hh;
} dl_task_t;

typedef struct dl_state {
  dl_task_t *tasks;
  uint64_t misses;  /* times a server was found late (each starts a cool-down) */
  uint64_t overdue; /* instructions taken back (with the watchdog's, stat `overdue`) */
} dl_state_t;

/* allowance_ms returns how long a server may run an instruction before it is late. */
static int64_t allowance_ms(const lt_options_t *o) {
  int64_t grace = (int64_t)GRACE_BEATS * o->heartbeat_ms;
  if (grace < GRACE_MIN_MS) grace = GRACE_MIN_MS;
  int64_t k = o->grain > 1 ? (int64_t)o->grain : 1;
  return k * (int64_t)o->task_timeout_ms + grace;
}

static void limit(lt_policy_t *p, size_t idx, uint32_t n) {
  lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_LIMIT, .server = idx, .n = n});
}

static void take_back(lt_policy_t *p, const lt_instr_rec_t *r, const char *what) {
  lt_req_t q = {.kind = LT_REQ_TAKE_BACK, .seq = r->seq};
  snprintf(q.msg, sizeof q.msg, "instruction %llu %s", (unsigned long long)r->seq, what);
  lt__policy_ask(p, &q);
}

/* kernels writes r's kernel names ("a+b") into buf. */
static void kernels(const lt_sched_t *s, const lt_instr_rec_t *r, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < r->nstages && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s%s", i ? "+" : "",
                     s->tmpl->kernels[r->stages[i].kernel]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* task_misses returns the entry counting the misses of r's task (NULL without memory). */
static dl_task_t *task_misses(dl_state_t *st, uint64_t task) {
  dl_task_t *t;
  HASH_FIND(hh, st->tasks, &task, sizeof task, t);
  if (t == NULL && (t = calloc(1, sizeof *t)) != NULL) {
    t->task = task;
    HASH_ADD(hh, st->tasks, task, sizeof t->task, t);
  }
  return t;
}

/* elsewhere tells whether a server other than idx takes work now, or soon may (its session
 * is being greeted: a server restarting, or one that lost its link; or a policy holds it back
 * for a while: a cool-down, another late server's): a task taken back waits for it rather
 * than failing for a fault of its server (the simulator's seeds 8290 and 3019804). */
static int elsewhere(const lt_sched_t *s, size_t idx) {
  for (size_t k = 0; k < s->nsrv; k++)
    if (k != idx &&
        (lt__server_takes(s, k) || lt__server_held(s, k) || s->srv[k].conn.state == LT_CONN_HELLO))
      return 1;
  return 0;
}

/* late starts (or doubles) server idx's cool-down, and takes back what waits there. */
static void late(lt_policy_t *p, size_t idx, int64_t now) {
  const lt_sched_t *s = p->s;
  dl_srv_t *v = lt__policy_server(p, idx);
  if (v->swept_ms == now) return;
  v->swept_ms = now;
  if (v->until_ms == 0) {
    ((dl_state_t *)p->state)->misses++;
    v->cool_ms = v->cool_ms ? v->cool_ms * 2 : COOL_FIRST_MS;
    if (v->cool_ms > COOL_MAX_MS) v->cool_ms = COOL_MAX_MS;
    v->until_ms = now + v->cool_ms;
    v->probation = 0;
    limit(p, idx, 0);
    lt__log(LT_LOG_WARN,
            "server %s: did not report an instruction past task_timeout_ms: no new "
            "work for %u s",
            s->srv[idx].conn.endpoint, v->cool_ms / 1000);
  }
  for (const lt_instr_rec_t *r = s->srv[idx].slot.out; r != NULL; r = r->out_next)
    if (r->run_ms < 0 && r->state != LT_IR_DROPPED) take_back(p, r, "waited on a late server");
}

/* overdue asks for r, which server idx held past its deadline: taken back, or its task
 * failed with LT_ETIMEDOUT when it missed its deadline often enough. */
static void overdue(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, int64_t now) {
  const lt_sched_t *s = p->s;
  dl_state_t *st = p->state;
  const char *ep = s->srv[idx].conn.endpoint;
  if (lt__rec_stale(r)) { /* its task is over or recomputed: only its place is freed */
    take_back(p, r, "of a task that is over, unreported");
    return;
  }
  dl_task_t *t = task_misses(st, r->job->num);
  uint32_t misses = t != NULL ? ++t->misses : 1;
  int away = elsewhere(s, idx); /* before late() asks for its limit */
  late(p, idx, now);
  if (away && misses <= s->opts->max_retries && !lt__fail_would_fail(s, r)) {
    char what[200];
    snprintf(what, sizeof what, "ran %lld ms (task_timeout_ms %u) unreported",
             (long long)(now - r->run_ms), s->opts->task_timeout_ms);
    take_back(p, r, what);
    return;
  }
  char names[160];
  kernels(s, r, names, sizeof names);
  lt_req_t q = {.kind = LT_REQ_FAIL, .seq = r->seq, .task = r->job->num, .err = LT_ETIMEDOUT};
  snprintf(q.msg, sizeof q.msg,
           "%s: ran longer than %u ms (task_timeout_ms) on %s, and the server did not report "
           "in time (%u time%s)",
           names, s->opts->task_timeout_ms, ep, misses, misses == 1 ? "" : "s");
  lt__policy_ask(p, &q);
  /* Its record is stale from now on: the next tick takes it back from there. */
}

/* prune forgets the misses of tasks that are over (all of them when `all`). */
static void prune(lt_policy_t *p, int all) {
  dl_state_t *st = p->state;
  dl_task_t *t, *tmp;
  HASH_ITER(hh, st->tasks, t, tmp) {
    lt_job_rec_t *j = NULL;
    if (!all) HASH_FIND(hh, p->s->jobs, &t->task, sizeof t->task, j);
    if (j != NULL && !j->finished) continue;
    HASH_DEL(st->tasks, t);
    free(t);
  }
}

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  const lt_sched_t *s = p->s;
  if (s->opts->task_timeout_ms == 0) return;
  for (size_t i = 0; i < s->nsrv; i++) {
    dl_srv_t *v = lt__policy_server(p, i);
    if (v->until_ms == 0 || now_ms < v->until_ms) continue;
    v->until_ms = 0;
    v->probation = 1;
    if (lt__server_alive(s, i)) limit(p, i, 1);
  }
  int64_t allow = allowance_ms(s->opts);
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->run_ms < 0 || now_ms - r->run_ms <= allow || !lt__server_alive(s, (size_t)r->conn))
      continue;
    const lt_load_t *load = &s->srv[r->conn].conn.load;
    if (load->queued + load->parked > 0 && now_ms - r->run_ms <= WAITING_X * allow) continue;
    /* A copy that lost to its twin elsewhere was cancelled there: still unreported, it only
     * shows the server late, and holds a thread there. */
    if (r->state == LT_IR_DROPPED)
      late(p, (size_t)r->conn, now_ms);
    else
      overdue(p, r, (size_t)r->conn, now_ms);
  }
  prune(p, 0);
}

/* A report of an instruction's end, result or failure, ends a server's probation. */
static void on_end(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                   const lt_completion_t *cp) {
  (void)r;
  if (cp == NULL || (why != LT_END_DONE && why != LT_END_FAILED) || idx >= p->s->nsrv) return;
  dl_srv_t *v = lt__policy_server(p, idx);
  if (!v->probation) return;
  v->probation = 0;
  v->cool_ms = 0;
  limit(p, idx, LT_NO_LIMIT);
}

/* An instruction taken back. */
static void on_applied(lt_policy_t *p, const lt_req_t *q) {
  if (q->kind == LT_REQ_TAKE_BACK) ((dl_state_t *)p->state)->overdue++;
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx == SIZE_MAX) {
    const dl_state_t *st = p->state;
    out[0] = (lt_stat_t){"deadline_misses", 0, st->misses};
    out[1] = (lt_stat_t){"overdue", 0, st->overdue};
    return 2;
  }
  const dl_srv_t *v = lt__policy_server(p, idx);
  out[0] = (lt_stat_t){"late", 1, v->until_ms != 0 || v->probation};
  return 1;
}

static void fini(lt_policy_t *p) {
  prune(p, 1);
}

const lt_policy_ops_t lt__policy_deadline = {
    .name = "deadline",
    .state_size = sizeof(dl_state_t),
    .server_size = sizeof(dl_srv_t),
    .on_end = on_end,
    .on_tick = on_tick,
    .on_applied = on_applied,
    .stats = stats,
    .fini = fini,
};
