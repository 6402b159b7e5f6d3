/* requests.c: the loop's phase that applies what the policies asked (policy.h): copies of
 * stragglers, runs of a task again for a straggling inner stage, recalls of queued work
 * (migration), taking back what a server held too long, limits on a server, failing a task,
 * draining and retiring a server; and the core's own settle of what an ended session cost
 * (failures.c files it at a welcome). Each request is checked against the state now — the
 * record may have completed, the server died — and dropped when it no longer applies; the
 * policy that asked hears of each copy, run again, recall and take-back applied (its
 * on_applied hook), and counts them itself. The policies decide; this file acts; cancels go
 * out through the failure accounting (failures.c), their one sender. Dispatcher thread only. */
#include <stdio.h>
#include <stdlib.h>

#include <lithium/error.h>
#include "log.h"
#include "sched_failures.h"
#include "sched_jobs.h"
#include "sched_links.h"
#include "sched_loop.h"
#include "sched_records.h"
#include "sched_servers.h"

/* find_out returns the record `seq` while it is out, or NULL. */
static lt_instr_rec_t *find_out(lt_sched_t *s, uint64_t seq) {
  lt_instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &seq, sizeof seq, r);
  return r;
}

static lt_job_rec_t *find_job(lt_sched_t *s, uint64_t task) {
  lt_job_rec_t *j;
  HASH_FIND(hh, s->jobs, &task, sizeof task, j);
  return j;
}

/* copy runs a copy of r on server `to`: the two are twins, the first result wins. */
static void copy(lt_sched_t *s, const lt_req_t *q) {
  lt_instr_rec_t *r = find_out(s, q->seq);
  if (r == NULL || r->twin != NULL || r->state == LT_IR_DROPPED || lt__rec_stale(r) ||
      q->server >= s->nsrv || !lt__server_idle(s, q->server))
    return;
  lt_instr_rec_t *c = lt__rec_copy(s, r);
  if (c == NULL) return;
  c->twin = r;
  r->twin = c;
  int64_t now = lt__clock_ms();
  int64_t idle_ms = now - s->srv[q->server].slot.idle_ms;
  if (lt__sched_dispatch_to(s, c, (int)q->server) != LT_OK) {
    r->twin = NULL;
    lt__sched_rec_done(s, c);
    return;
  }
  lt__policies_applied(s, q);
  lt__log(LT_LOG_INFO, "instruction %llu: out %lld ms on %s, a copy goes to %s",
          (unsigned long long)r->seq, (long long)(now - r->sent_ms), s->srv[r->conn].conn.endpoint,
          s->srv[q->server].conn.endpoint);
  lt__log(LT_LOG_DEBUG, "instruction %llu: ran %lld ms%s; %s had been idle %lld ms",
          (unsigned long long)r->seq, (long long)(now - r->run_ms),
          r->state == LT_IR_MIGRATING ? " (a migration's cancel on its way)" : "",
          s->srv[q->server].conn.endpoint, (long long)idle_ms);
}

/* rerun runs r's task again from its input (unless lt__sched_rerun declines: done, no input
 * kept, run again before); the old run's records out on r's server are then cancelled
 * (those waiting there never run; one running completes and is dropped as stale). */
static void rerun(lt_sched_t *s, const lt_req_t *q) {
  lt_instr_rec_t *r = find_out(s, q->seq);
  if (r == NULL || r->job->num != q->task || lt__rec_stale(r) ||
      !lt__server_alive(s, (size_t)r->conn))
    return;
  size_t idx = (size_t)r->conn;
  lt_job_rec_t *j = r->job;
  uint32_t old = j->gen;
  int64_t out_ms = lt__clock_ms() - r->sent_ms;
  if (!lt__sched_rerun(s, j, "a stage of it straggles")) return;
  lt__policies_applied(s, q);
  lt__log(LT_LOG_INFO, "instruction %llu: out %lld ms on %s: its task runs again",
          (unsigned long long)q->seq, (long long)out_ms, s->srv[idx].conn.endpoint);
  for (lt_instr_rec_t *o = s->srv[idx].slot.out; o != NULL; o = o->out_next)
    if (o->job == j && o->gen == old && o->state == LT_IR_OUT) lt__fail_cancel(s, o);
}

/* recall cancels the queued records asked, one cancel per server, and marks them migrating:
 * only the server's ECANCELED puts one back for placement (instr.c). */
static void recall(lt_sched_t *s, const lt_req_t *reqs, size_t n) {
  for (size_t i = 0; i < s->nsrv; i++) {
    uint64_t seqs[64];
    uint32_t k = 0;
    for (size_t q = 0; q < n; q++) {
      if (reqs[q].kind != LT_REQ_RECALL) continue;
      lt_instr_rec_t *r = find_out(s, reqs[q].seq);
      if (r == NULL || r->conn != (int)i || r->state != LT_IR_OUT || r->twin != NULL ||
          lt__rec_stale(r) || !lt__server_alive(s, i))
        continue;
      lt__rec_to(r, LT_IR_MIGRATING);
      lt__policies_applied(s, &reqs[q]);
      seqs[k++] = r->seq;
      if (k == sizeof seqs / sizeof seqs[0]) {
        lt__fail_cancel_seqs(s, i, seqs, k);
        k = 0;
      }
    }
    if (k > 0) {
      lt__fail_cancel_seqs(s, i, seqs, k);
      lt__log(LT_LOG_DEBUG, "cancelling %u queued instruction%s on %s to move them", k,
              k == 1 ? "" : "s", s->srv[i].conn.endpoint);
    }
  }
}

/* take_back cancels r on its server and places it again now, charged as a loss. */
static void take_back(lt_sched_t *s, const lt_req_t *q) {
  lt_instr_rec_t *r = find_out(s, q->seq);
  if (r == NULL || r->state == LT_IR_DROPPED || !lt__server_alive(s, (size_t)r->conn)) return;
  size_t idx = (size_t)r->conn;
  /* One of a task that is over only frees its place there. */
  lt__log(lt__rec_stale(r) ? LT_LOG_DEBUG : LT_LOG_WARN, "server %s: %s: %s",
          s->srv[idx].conn.endpoint, q->msg, lt__rec_stale(r) ? "dropped" : "running it elsewhere");
  lt__fail_cancel(s, r);
  lt__policies_applied(s, q);
  lt__sched_end(s, r, LT_END_TAKEN_BACK, NULL, NULL, LT_ELOST, q->msg);
}

/* fail fails a task for a policy (and cancels its record asked about, if out). */
static void fail(lt_sched_t *s, const lt_req_t *q) {
  lt_job_rec_t *j = find_job(s, q->task);
  if (j == NULL || j->finished) return;
  lt_instr_rec_t *r = find_out(s, q->seq);
  if (r != NULL && r->job == j && lt__server_alive(s, (size_t)r->conn)) lt__fail_cancel(s, r);
  lt__log(LT_LOG_WARN, "task %llu: %s", (unsigned long long)q->task, q->msg);
  lt__sched_job_fail(s, j, q->err, q->msg);
}

void lt__sched_apply_requests(lt_sched_t *s) {
  lt_req_queue_t *rq = &s->requests;
  /* Requests made while these are applied (by hooks they trigger) wait for the next turn. */
  lt_req_t *reqs = rq->reqs;
  size_t n = rq->n, cap = rq->cap;
  rq->reqs = NULL;
  rq->n = rq->cap = 0;
  int recalls = 0;
  for (size_t k = 0; k < n; k++) {
    const lt_req_t *q = &reqs[k];
    switch (q->kind) {
    case LT_REQ_COPY:
      copy(s, q);
      break;
    case LT_REQ_RECALL:
      recalls = 1;
      break;
    case LT_REQ_TAKE_BACK:
      take_back(s, q);
      break;
    case LT_REQ_LIMIT:
      if (q->server < s->nsrv) lt__server_limit(s, q->server, q->policy, q->n);
      break;
    case LT_REQ_FAIL:
      fail(s, q);
      break;
    case LT_REQ_SETTLE: /* the core's own: a policy does not count */
      if (q->policy == LT_REQ_CORE && q->server < s->nsrv) lt__fail_settle(s, q->server, q->n != 0);
      break;
    case LT_REQ_DRAIN:
      if (q->server < s->nsrv) lt__link_drain(s, q->server);
      break;
    case LT_REQ_RETIRE:
      if (q->server < s->nsrv) lt__link_retire(s, q->server);
      break;
    case LT_REQ_RERUN:
      rerun(s, q);
      break;
    }
  }
  if (recalls) recall(s, reqs, n);
  if (rq->reqs == NULL) { /* keep the array for the next turn */
    rq->reqs = reqs;
    rq->cap = cap;
  } else {
    free(reqs);
  }
}
