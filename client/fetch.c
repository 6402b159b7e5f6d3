/* fetch.c: bringing a task's result back when the task ends on a value that already sits
 * on a server. Under lazy binding a task's last instruction normally returns its output
 * with its completion; but a task can end at a completion, on a value made earlier (a while
 * whose condition fails: its result is the previous round's, already on its holder). The
 * holder is then asked with a FETCH that also releases the value, and its VALUE finishes
 * the task. A holder lost meanwhile, or a fetch that fails, recomputes the task; an answer
 * for a task that was recomputed or ended meanwhile is dropped. The loop asks for the results
 * due once a turn (jobs.c notes them). It owns the fetches; it may call the jobs and the
 * server table. Dispatcher thread only. */
#include <stdio.h>
#include <stdlib.h>

#include <lithium/error.h>
#include "clock.h"
#include "log.h"
#include "sched_failures.h"
#include "sched_jobs.h"
#include "vec.h"

/* A FETCH on its way: the value's sequence number is the key. */
struct lt_fetch {
  uint64_t seq;
  uint64_t job; /* the task number */
  uint32_t gen; /* the job's generation when asked */
  int conn;
  UT_hash_handle hh;
};

/* fetch_result asks the holder of j's result for it (a failure to ask recomputes or fails
 * the task). */
static int fetch_result(lt_sched_t *s, lt_job_rec_t *j) {
  const lt_token_t *t = &j->inst->result;
  int idx = lt__holder(s, t);
  if (idx < 0 || (size_t)idx >= s->nsrv || !lt__server_alive(s, (size_t)idx)) {
    lt__sched_restart_lost(s, j, lt__fail_dead_holder(s, t, 1),
                           "its result was on a server that is gone");
    return LT_OK;
  }
  lt_fetch_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    lt__sched_job_fail(s, j, LT_ENOMEM, "out of memory fetching the result");
    return LT_ENOMEM;
  }
  *f = (lt_fetch_t){.seq = t->id.seq, .job = j->num, .gen = j->gen, .conn = idx};
  lt_msg_t m = {.type = LT_MSG_FETCH};
  m.u.fetch.id = t->id;
  m.u.fetch.release = true;
  int rc = lt__conn_send(&s->srv[idx].conn, &m, NULL, lt__clock_ms());
  if (rc != LT_OK) {
    free(f);
    lt__sched_restart(s, j, "its result could not be fetched");
    return rc;
  }
  HASH_ADD(hh, s->fetches, seq, sizeof f->seq, f);
  return LT_OK;
}

/* fetch_job returns the job f was asked for while it still waits for it, NULL when it was
 * recomputed or ended meanwhile. */
static lt_job_rec_t *fetch_job(lt_sched_t *s, const lt_fetch_t *f) {
  lt_job_rec_t *j = NULL;
  HASH_FIND(hh, s->jobs, &f->job, sizeof f->job, j);
  return j != NULL && j->gen == f->gen && !j->finished ? j : NULL;
}

void lt__sched_on_value(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_fetch_t *f = NULL;
  uint64_t seq = m->u.value.id.seq;
  if (m->u.value.id.client != s->client_id) return;
  HASH_FIND(hh, s->fetches, &seq, sizeof seq, f);
  if (f == NULL || f->conn != (int)idx) {
    lt__log(LT_LOG_WARN, "server %s: a value nobody asked for (id %llu)", s->srv[idx].conn.endpoint,
            (unsigned long long)seq);
    return;
  }
  HASH_DEL(s->fetches, f);
  lt_job_rec_t *j = fetch_job(s, f);
  free(f);
  if (j == NULL) return;
  int32_t fr = m->u.value.frame;
  if (m->u.value.status != LT_OK || fr < 0 || (uint32_t)fr >= m->nframes) {
    char why[256];
    snprintf(why, sizeof why, "fetching its result failed: %s",
             m->u.value.status != LT_OK && m->u.value.errmsg != NULL ? m->u.value.errmsg
                                                                     : "no value in the answer");
    lt__sched_restart(s, j, why);
  } else {
    lt__sched_job_result(s, j, lt__rx_value(&s->rx, &m->frames[fr]));
  }
  lt__sched_job_settle(s, j); /* finished (or failed for good): nothing of it is left */
}

void lt__sched_fetches_lost(lt_sched_t *s, size_t idx) {
  lt_fetch_t *f, *tmp;
  HASH_ITER(hh, s->fetches, f, tmp) {
    if (f->conn != (int)idx) continue;
    HASH_DEL(s->fetches, f);
    lt_job_rec_t *j = fetch_job(s, f);
    free(f);
    if (j == NULL) continue;
    lt__sched_restart_lost(s, j, (long)idx, "its result was on a server that died");
    lt__sched_job_settle(s, j);
  }
}

void lt__sched_fetch_results(lt_sched_t *s) {
  for (size_t k = 0; k < s->ndue; k++) {
    lt_job_rec_t *j;
    HASH_FIND(hh, s->jobs, &s->due[k].job, sizeof s->due[k].job, j);
    if (j == NULL || j->finished || j->gen != s->due[k].gen) continue;
    fetch_result(s, j);
    lt__sched_job_settle(s, j);
  }
  s->ndue = 0;
}

void lt__sched_fetches_free(lt_sched_t *s) {
  LT_VEC_FREE(s->due, s->ndue, s->capdue);
  lt_fetch_t *f, *tmp;
  HASH_ITER(hh, s->fetches, f, tmp) {
    HASH_DEL(s->fetches, f);
    free(f);
  }
}
