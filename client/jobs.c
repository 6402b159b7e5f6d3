/* jobs.c: tasks while they run. A task becomes a job around its graph instance; every
 * frame that fires becomes an instruction record in the fireable queue; completions are
 * applied to the instance (or, for instructions whose frame already went on under lazy
 * binding, only checked); results and errors go back to the evaluator; server-side values
 * nobody will read are released. Every end of a record goes through lt__sched_end, with a
 * reason. It owns the jobs and the fireable queue's producers; it may call the records, the
 * server table and the failure accounting (failures.c: it counts tries and restarts, and
 * says what a loss does to a task), never the loop, the links or a policy's state (only
 * their hooks). Dispatcher thread only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "buf.h"
#include "log.h"
#include "queue.h"
#include "exec.h"
#include "sched_failures.h"
#include "sched_jobs.h"
#include "sched_loop.h"
#include "sched_records.h"
#include "sched_servers.h"
#include "vec.h"

/* ---- jobs --------------------------------------------------------------------------- */

/* Jobs kept for reuse, at most. */
#define JOBS_KEPT 4096

void lt__sched_pools_clear(lt_sched_t *s) {
  lt__freelist_clear(&s->recs);
  lt__freelist_clear(&s->jobs_free);
}

static void job_release(lt_sched_t *s, lt_job_rec_t *j) {
  if (j->live > 0 || !j->finished) return;
  HASH_DEL(s->jobs, j);
  lt__instance_free(j->inst);
  lt__value_unref(j->input);
  lt__value_unref(j->input2);
  lt__freelist_put(&s->jobs_free, j);
}

/* drop_input lets go of the task's input, which lineage no longer needs (the instruction
 * records that still send it hold their own references). */
static void drop_input(lt_job_rec_t *j) {
  lt__value_unref(j->input);
  lt__value_unref(j->input2);
  j->input = j->input2 = NULL;
}

/* job_finish records the task's result (or error) once, for lt__sched_deliver. */
static void job_finish(lt_sched_t *s, lt_job_rec_t *j, lt_buf_t *b) {
  if (j->finished) {
    lt_buf_free(b);
    return;
  }
  j->finished = 1;
  drop_input(j); /* nothing is recomputed any more */
  if (b == NULL) b = lt__buf_fail(LT_ENOMEM, NULL);
  /* Results wait for the end of the loop turn: lt__sched_deliver hands them over together,
   * taking the evaluator's lock once. */
  lt_task_t *t = j->task;
  t->result = b;
  LT_QUEUE_PUSH(s->done_head, s->done_tail, t, next);
  j->task = NULL;
}

void lt__sched_deliver(lt_sched_t *s) {
  if (s->done_head == NULL) return;
  s->door->deliver(s->ev, s->done_head, LT_EVAL_SYNC_NOW);
  s->done_head = s->done_tail = NULL;
}

static void release_token(void *ud, const lt_token_t *t) {
  lt_sched_t *s = ud;
  if (lt__holder(s, t) >= 0) lt__server_release(s, lt__holder(s, t), t->id);
}

void lt__sched_job_result(lt_sched_t *s, lt_job_rec_t *j, lt_value_t *v) {
  job_finish(s, j, v != NULL ? lt__buf_ok(v) : lt__buf_fail(LT_ENOMEM, NULL));
  lt__value_unref(v);
}

void lt__sched_job_settle(lt_sched_t *s, lt_job_rec_t *j) {
  job_release(s, j);
}

void lt__sched_job_fail(lt_sched_t *s, lt_job_rec_t *j, int err, const char *msg) {
  if (j->finished) return;
  /* References the instance still holds name values nobody will read now. */
  lt__instance_tokens(j->inst, release_token, s);
  job_finish(s, j, lt__buf_fail(err, msg));
}

/* ---- records ----------------------------------------------------------------------------- */

/* release_kept releases the inputs r left where they are held: a copy that won (it ran
 * without LT_INSTR_RELEASE_INPUTS, since its twin might have needed them: its twin either
 * released them itself, having run, or never will, having been cancelled), or a record of
 * an older generation of its task that never read them (its task runs again from its input
 * under new ids: nobody reads the old values; a second release of one is a no-op). */
static void release_kept(lt_sched_t *s, const lt_instr_rec_t *r) {
  for (uint32_t i = 0; i < r->nins; i++)
    if (r->ins[i].value == NULL) release_token(s, &r->ins[i]);
}

void lt__sched_rec_done(lt_sched_t *s, lt_instr_rec_t *r) {
  lt_job_rec_t *j = r->job;
  for (uint32_t i = 0; i < r->nins; i++)
    lt__value_unref(r->ins[i].value);
  lt__rec_ins_free(r);
  j->live--;
  lt__freelist_put(&s->recs, r);
  job_release(s, j);
}

/* fire queues an instruction of `inst` for frame, `chained` when its predecessor's
 * dispatch fired it: it then goes out in the same turn. */
static void fire(lt_sched_t *s, lt_instance_t *inst, lt_frame_t *frame, int chained) {
  lt_job_rec_t *j = inst->user;
  lt_instr_rec_t *r = lt__rec_new(s, j);
  if (r == NULL) {
    lt__sched_job_fail(s, j, LT_ENOMEM, "out of memory queueing an instruction");
    return;
  }
  r->frame = frame;
  r->chained = chained;
  lt__sched_push_fireable(s, r, chained);
}

void lt__sched_on_fire(void *ud, lt_instance_t *inst, lt_frame_t *frame) {
  fire(ud, inst, frame, 0);
}

void lt__sched_on_fire_chained(void *ud, lt_instance_t *inst, lt_frame_t *frame) {
  fire(ud, inst, frame, 1);
}

/* feed starts j's instance on its input, or, for a combine of the stream's reduce, on its
 * two inputs. */
static void feed(lt_sched_t *s, lt_job_rec_t *j) {
  j->epoch = UINT64_MAX; /* this run holds no value on a server yet (entries.c) */
  int rc = j->input2 != NULL
               ? lt__instance_feed_pair(j->inst, j->input, j->input2, lt__sched_on_fire, s)
               : lt__instance_feed(j->inst, j->input, lt__sched_on_fire, s);
  if (rc != LT_OK) lt__sched_job_fail(s, j, rc, "cannot start the task's graph");
}

void lt__sched_take_intake(lt_sched_t *s) {
  lt_task_t *t = s->door->take(s->ev, SIZE_MAX);
  while (t != NULL) {
    lt_task_t *next = t->next;
    t->next = NULL;
    if (s->jobs_free.size == 0) s->jobs_free = LT_FREELIST_INIT(sizeof(lt_job_rec_t), JOBS_KEPT);
    lt_job_rec_t *j = lt__freelist_get(&s->jobs_free);
    int rc = j != NULL ? lt__instance_new(&j->inst, s->tmpl, t->seq) : LT_ENOMEM;
    if (rc != LT_OK) {
      t->result = lt__buf_fail(rc, "cannot instantiate the program");
      s->door->deliver(s->ev, t, LT_EVAL_SYNC_NOW);
      if (j != NULL) lt__instance_free(j->inst);
      lt__freelist_put(&s->jobs_free, j);
    } else {
      j->task = t;
      j->inst->user = j;
      j->num = t->seq;
      HASH_ADD(hh, s->jobs, num, sizeof j->num, j);
      j->input = t->input; /* kept: a lost server's values are recomputed from it */
      j->input2 = t->input2;
      t->input = t->input2 = NULL;
      j->live++; /* hold the job while feeding */
      feed(s, j);
      j->live--;
      /* When every value comes back to the client nothing is ever recomputed: a lost
       * instruction is sent again with the values the client holds. */
      if (!lt__binding(s, NULL).outputs_stay) drop_input(j);
      job_release(s, j);
    }
    t = next;
  }
}

/* ---- completions ------------------------------------------------------------------------ */

/* release_left releases what r's completion `cp` left on server `conn` (its outputs, at
 * least one), when outputs stay on servers. */
static void release_left(lt_sched_t *s, const lt_instr_rec_t *r, size_t conn,
                         const lt_completion_t *cp) {
  if (!lt__binding(s, NULL).outputs_stay) return;
  uint32_t n = cp->noutputs > 0 ? cp->noutputs : 1;
  for (uint32_t i = 0; i < n; i++)
    lt__server_release(s, (int)conn, (lt_oid_t){s->client_id, r->seq + i});
}

/* ---- completions ------------------------------------------------------------------------ */

static void renew(lt_sched_t *s, lt_job_rec_t *j, const char *why);

/* lt__sched_restart_lost recomputes a task whose values were lost with a server (the
 * session of dead entry `lost`, -1 when not known): the instance starts again from the
 * task's input (kernels are functions of their inputs), under a new generation, so records
 * of the old one are dropped as they come back; values the old one left on live servers are
 * released. After max_retries restarts the task fails; restarts owed to a session that may
 * have crashed are held, not counted (failures.c). */
void lt__sched_restart_lost(lt_sched_t *s, lt_job_rec_t *j, long lost, const char *why) {
  if (j->finished) return;
  if (j->input == NULL) { /* not kept, as lineage should never need it (drop_input) */
    char msg[256];
    snprintf(msg, sizeof msg, "a value the task needed was lost (%s), and its input is gone", why);
    lt__sched_job_fail(s, j, LT_ELOST, msg);
    return;
  }
  if (lt__fail_restarts_spent(s, j)) {
    char msg[256];
    snprintf(msg, sizeof msg, "values the task needed were lost %u times (%s)",
             lt__fail_restarts_counted(j) + 1, why);
    lt__sched_job_fail(s, j, LT_ELOST, msg);
    return;
  }
  lt__log(LT_LOG_INFO, "task %llu: recomputing (%s)", (unsigned long long)j->inst->task, why);
  lt__fail_restart(s, j, lost);
  renew(s, j, why);
}

int lt__sched_rerun(lt_sched_t *s, lt_job_rec_t *j, const char *why) {
  if (j->finished || j->input == NULL || j->reruns > 0) return 0;
  lt__log(LT_LOG_INFO, "task %llu: running it again (%s)", (unsigned long long)j->inst->task, why);
  j->reruns++;
  renew(s, j, why);
  return 1;
}

/* renew starts task j again from its input under a new generation: records of the old one
 * are stale (dropped as they come back, touching no frame), and values it left on live
 * servers are released. */
static void renew(lt_sched_t *s, lt_job_rec_t *j, const char *why) {
  lt__trace_recompute(s->trace, j->inst->task, why);
  lt__instance_tokens(j->inst, release_token, s);
  lt_instance_t *inst = NULL;
  if (lt__instance_new(&inst, s->tmpl, j->inst->task) != LT_OK) {
    lt__sched_job_fail(s, j, LT_ENOMEM, "out of memory recomputing a task");
    return;
  }
  lt__instance_free(j->inst);
  j->inst = inst;
  inst->user = j;
  j->gen++;
  j->live++;
  feed(s, j);
  j->live--;
}

void lt__sched_restart(lt_sched_t *s, lt_job_rec_t *j, const char *why) {
  lt__sched_restart_lost(s, j, -1, why);
}

/* lost puts back r, lost on `endpoint`, for placement elsewhere, or recomputes or fails its
 * task, as the failure accounting's rule says (lt__fail_loss_outcome); `charge` counts the
 * loss toward max_retries (a server that stops gracefully is not charged). */
static void lost(lt_sched_t *s, lt_instr_rec_t *r, const char *endpoint, const char *why,
                 int charge) {
  lt__trace_instr_lost(s->trace, r, endpoint, why);
  lt_job_rec_t *j = r->job;
  if (lt__rec_stale(r)) {
    release_kept(s, r);
    lt__sched_rec_done(s, r);
    return;
  }
  if (charge) lt__fail_charge_try(s, r);
  /* Lost with its server's session (or a value of a dead one): a restart it causes is owed
   * to that session. */
  long dead = r->conn >= 0 && lt__server_gone(s, (size_t)r->conn)
                  ? r->conn
                  : lt__fail_dead_holder(s, r->ins, r->nins);
  lt_loss_outcome_t outcome = lt__fail_loss_outcome(s, r, 0);
  if (outcome != LT_LOSS_AGAIN) {
    char msg[256];
    if (endpoint[0] != '\0')
      snprintf(msg, sizeof msg, "instruction lost on %s (%s)", endpoint, why);
    else /* it was never out: its input was lost */
      snprintf(msg, sizeof msg, "%s", why);
    /* Its frame's inputs live on in r alone (dropped from the frame at dispatch): the
     * task's end or its new generation reads none of them, so they are released where
     * they are held (a second release of one its server read and dropped is a no-op). */
    release_kept(s, r);
    if (outcome == LT_LOSS_FAILS) {
      lt__sched_job_fail(s, j, LT_ELOST, msg);
      lt__sched_rec_done(s, r);
      return;
    }
    lt__sched_rec_done(s, r);
    lt__sched_restart_lost(s, j, dead, msg);
    return;
  }
  lt__sched_push_fireable(s, r, 1);
}

/* output_tokens turns a completion's outputs into tokens: references to values left on
 * server `conn`, with the value too when it came back (small enough, under lazy binding),
 * or values alone (plain mode: nothing stays on the server). */
static int output_tokens(lt_sched_t *s, const lt_instr_rec_t *r, int conn,
                         const lt_completion_t *cp, const lt_msg_t *m, lt_token_t *toks) {
  for (uint32_t i = 0; i < cp->noutputs; i++) {
    lt_token_t *t = &toks[i];
    memset(t, 0, sizeof *t);
    t->id = (lt_oid_t){s->client_id, r->seq + i};
    t->size = cp->outputs[i].size;
    lt__holder_set(s, t, conn);
    lt__entries_held_by(s, r->job);
    if (cp->outputs[i].frame >= 0) {
      const lt_bytes_t *f = &m->frames[cp->outputs[i].frame];
      if (!lt__binding(s, NULL).outputs_stay) t->at = 0; /* no holder */
      if ((t->value = lt__rx_value(&s->rx, f)) == NULL) return LT_ENOMEM;
    }
  }
  return LT_OK;
}

/* deliver_final delivers the result of a job whose final instruction just completed. */
static void deliver_final(lt_sched_t *s, lt_job_rec_t *j, const lt_completion_t *cp,
                          const lt_msg_t *m) {
  if (cp->noutputs != 1 || cp->outputs[0].frame < 0) {
    lt__sched_job_fail(s, j, LT_EPROTO, "server did not return the task's result");
    return;
  }
  const lt_bytes_t *f = &m->frames[cp->outputs[0].frame];
  lt__sched_job_result(s, j, lt__rx_value(&s->rx, f));
}

/* fetch_due notes that job j ended on a value on a server: its result is fetched in the
 * loop's next fetch phase (fetch.c). */
static void fetch_due(lt_sched_t *s, lt_job_rec_t *j) {
  lt_due_t *d = LT_VEC_PUSH(s->due, s->ndue, s->capdue);
  if (d == NULL) {
    lt__sched_job_fail(s, j, LT_ENOMEM, "out of memory fetching the result");
    return;
  }
  *d = (lt_due_t){j->num, j->gen};
}

/* apply gives a completed instruction's outputs to the instance. */
static void apply(lt_sched_t *s, lt_instr_rec_t *r, int conn, const lt_completion_t *cp,
                  const lt_msg_t *m) {
  lt_job_rec_t *j = r->job;
  lt_token_t *toks = calloc(cp->noutputs ? cp->noutputs : 1, sizeof *toks);
  int rc = toks != NULL ? output_tokens(s, r, conn, cp, m, toks) : LT_ENOMEM;
  char err[256] = "";
  /* A divided dc step leaves its input to nobody: the parts replace it. */
  if (rc == LT_OK && lt__op(r->op)->divides && cp->answer == 0 && r->nins == 1)
    release_token(s, &r->ins[0]);
  if (rc == LT_OK)
    rc = lt__instance_complete(j->inst, r->frame, cp->answer, toks, cp->noutputs, lt__sched_on_fire,
                               s, err, sizeof err);
  for (uint32_t i = 0; toks != NULL && i < cp->noutputs; i++)
    lt__value_unref(toks[i].value);
  free(toks);
  if (rc != LT_OK)
    lt__sched_job_fail(s, j, rc, err[0] ? err : "server returned an unusable completion");
  else if (j->inst->done && j->inst->result.value != NULL)
    job_finish(s, j, lt__buf_ok(j->inst->result.value));
  else if (j->inst->done) /* it ended on a value made before, still on its server */
    fetch_due(s, j);
}

/* check_moves fails the tasks of readers that were sent, before r's outputs had a size, to
 * a server whose frame limit the value now cannot fit: their fetch could never succeed. A
 * scan of what is out, done only when some live server's limit is below an output. */
static void check_moves(lt_sched_t *s, const lt_instr_rec_t *r, int holder,
                        const lt_completion_t *cp) {
  uint64_t most = 0;
  for (uint32_t i = 0; i < cp->noutputs; i++)
    if (cp->outputs[i].size > most) most = cp->outputs[i].size;
  if (most <= lt__server_least_frame(s)) return;
  lt_instr_rec_t *q, *tmp;
  HASH_ITER(hh, s->inflight, q, tmp) {
    if (q->conn == holder || lt__rec_stale(q)) continue;
    uint64_t lim = s->srv[q->conn].conn.max_frame;
    for (uint32_t k = 0; k < q->nins; k++) {
      const lt_token_t *t = &q->ins[k];
      if (t->value != NULL || lt__holder(s, t) != holder || t->id.client != s->client_id ||
          t->id.seq < r->seq || t->id.seq >= r->seq + cp->noutputs)
        continue;
      uint64_t size = cp->outputs[t->id.seq - r->seq].size;
      if (lim == 0 || size <= lim) continue;
      char msg[256];
      snprintf(msg, sizeof msg,
               "a value of %llu bytes cannot move to server %s: over its frame limit of %llu "
               "bytes",
               (unsigned long long)size, s->srv[q->conn].conn.endpoint, (unsigned long long)lim);
      lt__sched_job_fail(s, q->job, LT_ETOOBIG, msg);
      break;
    }
  }
}

/* end_of tells why a completion ended its record, from its status. */
static lt_end_t end_of(int status) {
  switch (status) {
  case LT_OK:
    return LT_END_DONE;
  case LT_ESHUTDOWN: /* a server stopping gracefully, or a cancel: it never ran */
  case LT_ECANCELED:
    return LT_END_NOT_RUN;
  default:
    return LT_END_FAILED;
  }
}

/* completed applies r's completion cp (in m) from server idx: its outputs to the instance,
 * its result to the task, or its kernel's failure. */
static void completed(lt_sched_t *s, lt_instr_rec_t *r, size_t idx, const lt_completion_t *cp,
                      const lt_msg_t *m) {
  lt_job_rec_t *j = r->job;
  /* Outputs left on the server that nobody will read: the job is over, or was recomputed,
   * or failed here. A value lost with a peer server makes the task recompute. */
  if (lt__rec_stale(r) || cp->status != LT_OK) {
    release_left(s, r, idx, cp);
    if (!lt__rec_stale(r) && lt__status_lost(cp->status))
      lt__sched_restart_lost(s, j, lt__fail_dead_holder(s, r->ins, r->nins), cp->errmsg);
    else if (!lt__rec_stale(r))
      lt__sched_job_fail(s, j, cp->status, cp->errmsg);
  } else if (r->final) {
    deliver_final(s, j, cp, m);
  } else if (!r->moved) {
    apply(s, r, (int)idx, cp, m);
  } else {
    check_moves(s, r, (int)idx, cp);
  }
  if (r->kept_inputs) release_kept(s, r);
  lt__sched_rec_done(s, r);
}

/* note_lag tells server idx's pace how much later than its service time r's completion
 * came after the client saw r start there (instr.c, run_ms): the delays of the trip back
 * and of threads waiting for a CPU on either side. Only for an instruction whose inputs all
 * went with it: one that read a reference may have waited for a predecessor or a fetch,
 * which is no delay of the machine's. The client's clock reads milliseconds here, so a
 * millisecond of it is no measured delay. */
static void note_lag(lt_sched_t *s, size_t idx, const lt_instr_rec_t *r,
                     const lt_completion_t *cp) {
  if (r->run_ms < 0) return;
  for (uint32_t i = 0; i < r->nins; i++)
    if (r->ins[i].value == NULL) return;
  int64_t now = lt__clock_ms();
  double lag_us = (double)(now - r->run_ms - 1) * 1000.0 - (double)cp->service_us;
  if (lag_us > 0) lt__pace_noise(&s->srv[idx].pace, lag_us, now);
}

void lt__sched_end(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp,
                   const lt_msg_t *m, int err, const char *msg) {
  /* A queued record ends from the head of the fireable queue, or after it was taken; one of
   * an older generation of its task (recomputed, or over) just goes. */
  if (r->state == LT_IR_QUEUED && r == s->fire_head) lt__sched_pop_fireable(s);
  if (r->state == LT_IR_QUEUED && lt__rec_stale(r)) {
    lt__sched_rec_done(s, r);
    return;
  }
  size_t idx = r->conn >= 0 ? (size_t)r->conn : SIZE_MAX;
  const char *ep = idx != SIZE_MAX ? s->srv[idx].conn.endpoint : "";
  /* A record lost with its server's session: what the loss costs is held (failures.c). */
  if (why == LT_END_LOST && idx != SIZE_MAX) lt__fail_note_loss(s, idx, r);
  /* The policies hear of every end of a record out on a server (a dropped twin is none). */
  if (r->state != LT_IR_QUEUED && r->state != LT_IR_DROPPED) lt__policies_end(s, r, idx, why, cp);
  lt_settle_t st = lt__rec_settle(s, r, why, cp);
  if (st == LT_SETTLE_REQUEUED) return; /* it moves to a faster server */
  if (st == LT_SETTLE_DROP) {
    /* Its copy won, or carries on: this one only releases what it left. */
    if (cp != NULL && cp->status == LT_OK) release_left(s, r, idx, cp);
    lt__sched_rec_done(s, r);
    return;
  }
  if (cp != NULL) {
    lt_conn_t *c = &s->srv[idx].conn;
    c->completed++;
    s->completions++;
    c->cpu_s += (double)cp->cpu_us / 1e6;
    if (cp->status == LT_OK) {
      lt__pace_service(&s->srv[idx].pace, r->stages, (double)cp->service_us, (double)cp->cpu_us);
      r->job->work_us += (double)cp->service_us;
      note_lag(s, idx, r, cp);
    }
  }
  switch (why) {
  case LT_END_DONE:
  case LT_END_FAILED:
    completed(s, r, idx, cp, m);
    break;
  case LT_END_NOT_RUN: /* not the task's fault */
    lost(s, r, ep, lt_strerror(cp != NULL ? cp->status : LT_ECANCELED), 0);
    break;
  case LT_END_LOST:
  case LT_END_TAKEN_BACK:
    lost(s, r, ep, msg, 1);
    break;
  case LT_END_ABORTED:
    lt__sched_job_fail(s, r->job, err, msg);
    lt__sched_rec_done(s, r);
    break;
  }
}

void lt__sched_on_completion(lt_sched_t *s, size_t idx, const lt_completion_t *cp,
                             const lt_msg_t *m) {
  lt_conn_t *c = &s->srv[idx].conn;
  lt_instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &cp->seq, sizeof cp->seq, r);
  if (r == NULL || r->conn != (int)idx || cp->noutputs > LT_MAX_PARTS) {
    /* Not running there for us: taken back as overdue, or a server that is wrong. Values it
     * says it kept, or failed, are released (ids of our own space only). */
    s->stray++;
    lt__log(s->stray == 1 ? LT_LOG_WARN : LT_LOG_DEBUG,
            "server %s: completion of instruction %llu, which it was not running for us "
            "(%llu so far)",
            c->endpoint, (unsigned long long)cp->seq, (unsigned long long)s->stray);
    /* A failed one too: its output stays there as a failed value for readers until its
     * client drops it (the simulator's seed 1020363). */
    uint32_t n = cp->noutputs > 0 ? cp->noutputs : 1;
    if (lt__binding(s, NULL).outputs_stay && n <= LT_MAX_PARTS)
      for (uint32_t i = 0; i < n; i++)
        lt__server_release(s, (int)idx, (lt_oid_t){s->client_id, cp->seq + i});
    return;
  }
  lt__trace_completion(s->trace, s, idx, r, cp);
  lt__sched_end(s, r, end_of(cp->status), cp, m, cp->status, cp->errmsg);
}

void lt__sched_fail_all(lt_sched_t *s, int err, const char *msg) {
  lt_instr_rec_t *r, *tmp;
  while ((r = s->fire_head) != NULL)
    lt__sched_end(s, r, LT_END_ABORTED, NULL, NULL, err, msg);
  HASH_ITER(hh, s->inflight, r, tmp) {
    lt__sched_end(s, r, LT_END_ABORTED, NULL, NULL, err, msg);
  }
  /* Jobs with no instruction left: waiting for their result's fetch. */
  lt_job_rec_t *j, *jtmp;
  HASH_ITER(hh, s->jobs, j, jtmp) {
    lt__sched_job_fail(s, j, err, msg);
    job_release(s, j);
  }
}
