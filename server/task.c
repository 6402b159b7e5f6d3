/* task.c: instructions on the server (see task.h). A task is accepted or refused when its
 * EXECUTE arrives, then moves PARKED (waiting in the store for REF inputs) -> EXEC (queued
 * or running on the executor, which runs at most the session's thread window of them at
 * once) -> finished, or to FAILING (queued on srv->failq, finished by
 * the server's settle) when an input fails, it is canceled or the server stops. Failures go
 * through the queue so that a chain of parked dependants fails iteratively, not by
 * recursion. Every instruction has one output id: a SEQ's single output, or the first part
 * of a SPLIT/DCSTEP, whose part i is {client, seq + i}.
 *
 * A packed instruction (lt_instr_t.pack = k > 1, op SEQ) is one task of k members: k output
 * ids, k * n inputs, one executor job (one slot of the session's window) that runs the chain
 * once per member in member order, and k completions queued together (one wire entry).
 * Each member has its own outcome: a kernel failure, or an input that fails, fails it alone
 * (the others still run); a cancel, a stop or a refusal fails every member alike. The pack is known
 * by its instruction seq (member 0's output seq): a CANCEL naming it cancels the whole pack while
 * it has not started; the other members' seqs name no task here and are ignored. A member that
 * overruns the session's deadline fails with LT_ETIMEDOUT, the members before it keep their
 * results and those after it never run (LT_ECANCELED). Loop thread only. */
#include "task.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "bufpool.h"
#include "queue.h"
#include "exec.h"
#include "log.h"
#include "oid.h"
#include "peer.h"
#include "quota.h"
#include "vec.h"

enum { TASK_NEW = 0, TASK_PARKED, TASK_EXEC, TASK_FAILING };

typedef struct task_input {
  lt_waiter_t w; /* first: the waiter callback casts back */
  lt_task_t *task;
  uint32_t idx;
  lt_input_kind_t kind;
  lt_oid_t id;
  bool parked;  /* w is linked in the store */
  bool has_msg; /* msg holds an INLINE payload frame */
  bool copy;    /* a reader of a copy fetched from a peer (lt__peer_unref when done) */
  bool told;    /* lt__peer_need has told the holder what this reader is */
  bool granted; /* its value left the store and its buffer is t->grant[idx] (grant_inputs) */
  char *holder; /* REF held by another server: its endpoint; else NULL */
  char *key;    /* its announced public key ("" when none), with holder */
  zmq_msg_t msg;
  lt_value_t *val; /* REF, once ready */
} task_input_t;

struct lt_task {
  lt_job_t job;
  UT_hash_handle hh;
  bool oom;
  uint64_t seq; /* key in sess->tasks */
  lt_server_t *srv;
  lt_session_t *sess; /* NULL once orphaned */
  uint32_t op;        /* lt_op_t */
  uint32_t nstages;
  lt_exec_stage_t *stages; /* params point into `params`, names into `prog` */
  uint32_t *kidx;          /* each stage's kernel index in `prog` */
  void **params;
  lt_program_t *prog; /* a reference to the kernel table the instruction was made under */
  uint32_t flags;
  int state;
  bool ran;
  bool input_failed; /* an input failed: the task can never run */
  uint32_t ninputs;
  task_input_t *inputs;
  lt_bytes_t *in; /* what the kernel sees */
  void **grant;   /* NULL, or per input the buffer its kernel may write over (grant_inputs):
                     owned, freed here unless the kernel took it as an output */
  uint32_t nwait;
  lt_oid_t out;    /* the output id (SEQ), or the id of part 0 (SPLIT, DCSTEP) */
  uint64_t secret; /* its session's secret: what its fetches from peers present */
  int fail_status;
  char *fail_msg;
  lt_task_t *fail_next;     /* failq, or a private list while dropping */
  uint64_t timeout_us;      /* its session's deadline when it was submitted; 0: none */
  bool timed_out;           /* answered LT_ETIMEDOUT while its kernel still runs */
  uint32_t pack;            /* its members: 1, or k of a packed instruction */
  lt_oid_t *outs;           /* each member's output id (outs[0] is `out`) */
  lt_job_member_t *members; /* a pack's: what each member's run made (job.pack) */
  uint32_t nskipped;        /* its members failed by an input before they ran */
};

/* kept tells whether the outputs go into the store (not only back to the client). */
static bool kept(const lt_task_t *t) {
  return !(t->flags & LT_INSTR_RETURN) || (t->flags & LT_INSTR_KEEP);
}

/* expected tells whether the output id is registered as pending before the run: only for
 * SEQ, whose one output id is known; the number of parts of a split is not. */
static bool expected(const lt_task_t *t) {
  return lt__op(t->op)->outputs == LT_OP_OUT_ONE && kept(t);
}

static void task_free(lt_server_t *srv, lt_task_t *t) {
  for (uint32_t i = 0; t->inputs != NULL && i < t->ninputs; i++) {
    task_input_t *in = &t->inputs[i];
    if (in->parked) lt__store_unpark(srv->store, &in->w);
    if (in->has_msg) zmq_msg_close(&in->msg);
    lt__value_unref(in->val);
    if (in->copy) lt__peer_unref(srv, in->id);
    free(in->holder);
    free(in->key);
  }
  for (uint32_t i = 0; t->grant != NULL && i < t->ninputs; i++)
    lt__bufpool_free(t->grant[i]);
  free(t->grant);
  if (t->ran) lt__exec_result_clear(&t->job.result);
  for (uint32_t i = 0; t->members != NULL && i < t->pack; i++) {
    lt__bufpool_free(t->members[i].out);
    free(t->members[i].errmsg);
  }
  lt__program_unref(t->prog);
  free(t->fail_msg);
  free(t); /* its arrays and parameters live in the same block (task_alloc) */
}

static void detach(lt_task_t *t) {
  if (t->sess == NULL) return;
  if (t->state == TASK_EXEC) t->sess->nexec -= t->pack;
  HASH_DEL(t->sess->tasks, t);
  t->sess = NULL;
}

/* unpark_all takes every parked input of t out of the store. */
static void unpark_all(lt_server_t *srv, lt_task_t *t) {
  for (uint32_t i = 0; i < t->ninputs; i++) {
    task_input_t *in = &t->inputs[i];
    if (!in->parked) continue;
    lt__store_unpark(srv->store, &in->w);
    in->parked = false;
  }
  if (t->state == TASK_PARKED) {
    srv->parked--;
    if (t->sess != NULL) t->sess->nparked--;
  }
  t->state = TASK_NEW;
}

/* fail_later queues t to be finished with `status` by lt__task_run_failq. t must be
 * neither parked nor on the executor. */
static void fail_later(lt_server_t *srv, lt_task_t *t, int status, const char *msg) {
  t->state = TASK_FAILING;
  t->fail_status = status;
  free(t->fail_msg);
  t->fail_msg = msg != NULL ? strdup(msg) : NULL;
  LT_QUEUE_PUSH(srv->failq, srv->failq_tail, t, fail_next);
}

/* queue_job keeps t's job for the executor until the EXECUTE being taken ends: alone, or
 * riding with the gang of its instruction group; false without memory. */
static bool queue_job(lt_server_t *srv, lt_task_t *t) {
  if (srv->ganging && srv->gang_tail != NULL) {
    srv->gang_tail->gang = &t->job;
    srv->gang_tail = &t->job;
    return true;
  }
  if (LT_VEC_RESERVE(srv->subq, srv->capsubq, (size_t)srv->nsubq + 1) != LT_OK) return false;
  srv->subq[srv->nsubq++] = &t->job;
  srv->gang_tail = srv->ganging ? &t->job : NULL;
  return true;
}

/* grant_inputs gives t's kernel, when it is declared to write in place (LT_KERNEL_IN_PLACE:
 * any other keeps its inputs readable until it has run, so that a copy of it elsewhere may
 * still fetch them), the inputs it may write over (lt_call_output_from_input): t is their
 * last reader (LT_INSTR_RELEASE_INPUTS, one run, an op that does not pass its
 * inputs on), and each is a kernel's output buffer (LT_VALUE_POOL) held on this server by
 * nobody but the store and t (no other reader, no send in flight). Such a value leaves the
 * store now rather than when t ends, and its buffer becomes t's; from then on a CANCEL
 * cannot take t back before it runs (exec_cancel), since a retry elsewhere would find its
 * input gone. Without memory for the array nothing is granted. */
static void grant_inputs(lt_server_t *srv, lt_task_t *t) {
  if (!(t->flags & LT_INSTR_RELEASE_INPUTS) || t->pack > 1 || lt__op(t->op)->keeps_inputs ||
      t->nstages == 0 || !t->prog->in_place[t->kidx[0]])
    return;
  for (uint32_t i = 0; i < t->ninputs; i++) {
    task_input_t *in = &t->inputs[i];
    lt_value_t *v = in->val;
    if (in->kind != LT_INPUT_REF || v == NULL || in->copy || in->holder != NULL ||
        v->kind != LT_VALUE_POOL || atomic_load(&v->refs) != 2)
      continue;
    if (t->grant == NULL && (t->grant = calloc(t->ninputs, sizeof *t->grant)) == NULL) return;
    /* Loop thread: nobody can take a new reference between the count and the release. */
    lt__store_release(srv->store, in->id);
    t->grant[i] = lt__value_take_pooled(v);
    in->val = NULL;
    in->granted = true;
  }
}

/* submit hands t to the executor, in its session's group: the executor runs at most the
 * session's window of them at once. While an EXECUTE is taken, t waits for its end. */
static void submit(lt_server_t *srv, lt_task_t *t) {
  grant_inputs(srv, t);
  t->job.grant = t->grant;
  t->job.op = t->op;
  t->job.stages = t->stages;
  t->job.nstages = t->nstages;
  t->job.inputs = t->in;
  t->job.ninputs = t->ninputs;
  t->job.data = t;
  t->job.group = t->sess != NULL ? &t->sess->group : NULL;
  t->job.owner = t->sess != NULL ? t->sess->client_id : 0;
  t->job.seq = t->seq;
  t->job.npack = t->pack > 1 ? t->pack : 0;
  t->job.pack = t->members;
  t->timeout_us = t->sess != NULL ? (uint64_t)t->sess->timeout_ms * 1000u : 0;
  if (t->sess != NULL) t->sess->nexec += t->pack;
  t->state = TASK_EXEC;
  srv->inexec++;
  t->job.gang = NULL;
  if (!srv->batching || !queue_job(srv, t)) lt__executor_submit(srv->ex, &t->job);
}

/* flush_jobs hands what the EXECUTE fired to the executor. */
static void flush_jobs(lt_server_t *srv) {
  lt__executor_submit_list(srv->ex, srv->subq, srv->nsubq);
  srv->nsubq = 0;
  srv->gang_tail = NULL;
  srv->batching = srv->ganging = false;
}

/* fire runs a task whose inputs are all bound. A kernel that did not resolve fails it
 * now, when it would run, as in the sequential evaluator: had an input failed first, the
 * task would have failed with that input's error instead. */
static void fire(lt_server_t *srv, lt_task_t *t) {
  if (srv->stopping) {
    fail_later(srv, t, LT_ESHUTDOWN, "server shutting down");
    return;
  }
  for (uint32_t i = 0; i < t->nstages; i++) {
    if (t->stages[i].fn != NULL) continue;
    uint32_t k = t->kidx[i];
    fail_later(srv, t, t->prog->status[k], t->prog->err[k]);
    return;
  }
  submit(srv, t);
}

/* bound_one counts a parked input of t as bound (or, for a member that failed, done with);
 * the last one fires t. */
static void bound_one(lt_server_t *srv, lt_task_t *t) {
  if (--t->nwait > 0) return;
  srv->parked--;
  if (t->sess != NULL) t->sess->nparked--;
  fire(srv, t);
}

/* exec_cancel takes a queued t off the executor; false when a worker has it already, or, for
 * a client that would run it again elsewhere (`retry`), when t holds granted inputs: they are
 * nowhere else now, so it runs here. */
static bool exec_cancel(lt_server_t *srv, lt_task_t *t, bool retry) {
  if ((retry && t->grant != NULL) || !lt__executor_cancel(srv->ex, &t->job)) return false;
  srv->inexec--;
  if (t->sess != NULL) t->sess->nexec -= t->pack;
  t->state = TASK_NEW;
  return true;
}

/* on_input is the store's waiter callback for a parked REF input. */
/* input_error words the failure of a task's input `idx`: a value that failed in its
 * producer passes the producer's own message on unchanged (the task fails for the reason
 * the kernel gave, wherever it ran, as with the sequential evaluator); a missing, cancelled
 * or lost value names the input and its id. */
static void input_error(char *msg, size_t len, uint32_t idx, lt_oid_t id, int status,
                        const char *errmsg) {
  int transport =
      status == LT_ENOENT || status == LT_ECANCELED || status == LT_ELOST || status == LT_ESHUTDOWN;
  if (!transport && errmsg != NULL && errmsg[0] != '\0') {
    snprintf(msg, len, "%s", errmsg);
    return;
  }
  char ids[48];
  snprintf(msg, len, "input %u (%s): %s", idx, lt__oid_format(id, ids, sizeof ids),
           errmsg != NULL && errmsg[0] ? errmsg
           : status == LT_ENOENT       ? "no such object on this server"
                                       : lt_strerror(status));
}

/* member_fail words the failure of t's input `idx` into msg and, in a pack, fails the member
 * that reads it alone (once; it will not run) and returns true while another member is left
 * to run. false: t fails as a whole with msg (the members already failed keep their own). */
static bool member_fail(lt_task_t *t, uint32_t idx, lt_oid_t id, int status, const char *errmsg,
                        char *msg, size_t len) {
  uint32_t n = t->pack > 1 ? t->ninputs / t->pack : t->ninputs;
  input_error(msg, len, t->pack > 1 ? idx % n : idx, id, status, errmsg);
  if (t->pack <= 1) return false;
  lt_job_member_t *m = &t->members[idx / n];
  if (!m->skip) {
    m->skip = true;
    m->status = status;
    m->errmsg = strdup(msg);
    t->nskipped++;
  }
  return t->nskipped < t->pack;
}

static void on_input(lt_waiter_t *w, lt_oid_t id, int status, lt_value_t *v, const char *errmsg) {
  task_input_t *in = (task_input_t *)w;
  lt_task_t *t = in->task;
  lt_server_t *srv = t->srv;
  in->parked = false;
  if (status == LT_OK) {
    in->val = lt__value_ref(v);
    t->in[in->idx] = (lt_bytes_t){v->data, v->len};
    bound_one(srv, t);
    return;
  }
  char msg[LT_KERNEL_ERRMSG_MAX + 96];
  if (member_fail(t, in->idx, id, status, errmsg, msg, sizeof msg)) {
    bound_one(srv, t);
    return;
  }
  unpark_all(srv, t);
  t->input_failed = true;
  fail_later(srv, t, status, msg);
}

/* release_expected drops the ids t was to produce (its session is gone). */
static void release_expected(lt_server_t *srv, lt_task_t *t) {
  for (uint32_t i = 0; expected(t) && i < t->pack; i++)
    lt__store_release(srv->store, t->outs[i]);
}

/* release_range drops the REF inputs from..to of t from the store; a remote one never asked
 * for (an earlier one failed) is dropped by its holder. */
static void release_range(lt_server_t *srv, lt_task_t *t, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; i++) {
    task_input_t *in = &t->inputs[i];
    if (in->kind != LT_INPUT_REF || in->granted) continue; /* a granted one left already */
    lt__store_release(srv->store, in->id);
    if (in->holder != NULL && !in->told)
      lt__peer_release(srv, in->holder, in->key, t->secret, in->id);
  }
}

/* release_members drops the REF inputs of the last reader (LT_INSTR_RELEASE_INPUTS) for t's
 * members before `upto` and those an input failed: they are done with them. */
static void release_members(lt_server_t *srv, lt_task_t *t, uint32_t upto) {
  if (!(t->flags & LT_INSTR_RELEASE_INPUTS)) return;
  uint32_t n = t->ninputs / t->pack;
  for (uint32_t i = 0; i < t->pack; i++)
    if (i < upto || (t->members != NULL && t->members[i].skip))
      release_range(srv, t, i * n, i * n + n);
}

/* release_inputs drops the REF inputs of the last reader (LT_INSTR_RELEASE_INPUTS) once it
 * ran, or once an input failed, since then it never will: its other inputs are not needed
 * any more either. A canceled or shut down one keeps them for a retry (a pack's members
 * that an input failed excepted). */
static void release_inputs(lt_server_t *srv, lt_task_t *t) {
  release_members(srv, t, t->ran || t->input_failed ? t->pack : 0);
}

/* store_outputs wraps the `n` outputs out[0..n) (of outlen[] bytes; taken: each is set to
 * NULL) into vals[] and, when they are kept, stores them under {first.client, first.seq +
 * i}. Returns LT_OK or an error with its message in err. */
static int store_outputs(lt_server_t *srv, lt_task_t *t, lt_oid_t first, uint32_t n, void **out,
                         const size_t *outlen, lt_value_t **vals, char *err, size_t errlen) {
  for (uint32_t i = 0; i < n; i++) {
    vals[i] = lt__value_pooled(out[i], outlen[i]);
    out[i] = NULL; /* taken, also when wrapping failed */
    if (vals[i] == NULL) {
      snprintf(err, errlen, "out of memory for output %u", i);
      return LT_ENOMEM;
    }
  }
  if (!kept(t)) return LT_OK;
  uint64_t more = 0;
  for (uint32_t i = 0; i < n; i++)
    more += vals[i]->len;
  uint64_t held = lt__quota_held(srv, first.client), max = lt__quota_max_bytes(srv);
  if (more > 0 && held + more > max) {
    snprintf(err, errlen,
             "session over its quota of values held (--max-session-bytes %llu): holds %llu "
             "bytes, the outputs add %llu",
             (unsigned long long)max, (unsigned long long)held, (unsigned long long)more);
    return LT_EQUOTA;
  }
  int room = lt__quota_server_room(srv, more, n - 1, err, errlen);
  if (room != LT_OK) return room;
  /* Outputs beyond the first (parts of a split) are new ids: the first was expected. */
  uint64_t nids = lt__quota_ids(srv, first.client), maxids = lt__quota_max_values(srv);
  if (n > 1 && nids + n - 1 > maxids) {
    snprintf(err, errlen,
             "session over its quota of values (--max-session-values %llu): holds %llu, the "
             "outputs add %u",
             (unsigned long long)maxids, (unsigned long long)nids, n - 1);
    return LT_EQUOTA;
  }
  for (uint32_t i = 0; i < n; i++) {
    lt_oid_t id = {first.client, first.seq + i};
    int rc = lt__store_set(srv->store, id, vals[i]);
    if (rc != LT_OK) {
      char ids[48];
      snprintf(err, errlen, "output %u (%s): %s", i, lt__oid_format(id, ids, sizeof ids),
               rc == LT_EEXIST ? "already set (duplicate output id)" : lt_strerror(rc));
      return rc;
    }
  }
  return LT_OK;
}

#define COMPLETE_FEW 4 /* outputs of a completion listed without allocating */

/* One completion to make: its seq and first output id, outcome, run and outputs. */
typedef struct outcome {
  uint64_t seq;
  lt_oid_t id;
  int status;
  const char *errmsg;
  const lt_ran_t *ran; /* NULL: it never ran */
  int answer;
  uint32_t n; /* outputs out[0..n) of outlen[] bytes, taken */
  void **out;
  const size_t *outlen;
} outcome_t;

/* complete stores or fails the outputs of one completion of t and queues it in s's done:
 * returned when asked for, or small enough to travel anyway; a failure fails the expected
 * output id in the store. */
static void complete(lt_server_t *srv, lt_session_t *s, lt_task_t *t, outcome_t o) {
  char err[LT_KERNEL_ERRMSG_MAX + 128];
  if (o.status == LT_OK && (t->flags & LT_INSTR_RETURN) && o.n > LT_DONE_MAX_FRAMES) {
    snprintf(err, sizeof err, "%u returned outputs exceed the %d frames of a message", o.n,
             LT_DONE_MAX_FRAMES);
    o.status = LT_ETOOBIG;
    o.errmsg = err;
  }
  uint32_t n = o.status == LT_OK ? o.n : 0;
  /* A completion's few outputs (a stage's one) are listed on the stack; a split's many on
   * the heap. */
  lt_value_t *vals_few[COMPLETE_FEW] = {0}, *ret_few[COMPLETE_FEW];
  uint64_t sizes_few[COMPLETE_FEW];
  bool few = n <= COMPLETE_FEW;
  lt_value_t **vals = few ? vals_few : NULL;
  uint64_t *sizes = few ? sizes_few : NULL;
  lt_value_t **ret = few ? ret_few : NULL;
  if (n > 0) {
    if (!few) {
      vals = calloc(n, sizeof *vals);
      ret = calloc(n, sizeof *ret);
      sizes = calloc(n, sizeof *sizes);
    }
    if (vals == NULL || ret == NULL || sizes == NULL) {
      o.status = LT_ENOMEM;
      o.errmsg = "out of memory for the outputs";
    } else if ((o.status = store_outputs(srv, t, o.id, n, o.out, o.outlen, vals, err,
                                         sizeof err)) != LT_OK) {
      o.errmsg = err;
    }
  }
  if (o.status == LT_OK) {
    for (uint32_t i = 0; i < n; i++) {
      sizes[i] = vals[i]->len;
      /* Returned: asked for, or small enough to travel with done anyway (it stays stored
       * too, for readers that already hold its reference). */
      int small = s->inline_max > 0 && vals[i]->len <= s->inline_max && n <= LT_DONE_MAX_FRAMES;
      ret[i] = (t->flags & LT_INSTR_RETURN) || small ? vals[i] : NULL;
    }
    lt__session_done_add(srv, s, o.seq, LT_OK, "", o.ran, o.answer, n, sizes, ret);
  } else {
    const char *errmsg = o.errmsg;
    if (errmsg == NULL || errmsg[0] == '\0') errmsg = lt_strerror(o.status);
    if (expected(t)) {
      lt__store_fail(srv->store, o.id, o.status, errmsg);
      /* The client runs a canceled or shut down instruction again, here or elsewhere, under
       * the same output id, and releases only the output of the run that completes: once
       * local readers have seen the failure, nobody would drop this entry. */
      if (o.status == LT_ECANCELED || o.status == LT_ESHUTDOWN) lt__store_release(srv->store, o.id);
    }
    lt__session_done_add(srv, s, o.seq, o.status, errmsg, o.ran, -1, 0, NULL, NULL);
  }
  for (uint32_t i = 0; vals != NULL && i < n; i++)
    lt__value_unref(vals[i]);
  if (few) return;
  free(vals);
  free(ret);
  free(sizes);
}

/* job_ran returns when, how long and where t's job ran. */
static lt_ran_t job_ran(const lt_task_t *t) {
  return (lt_ran_t){t->job.service_us, t->job.start_us, t->job.cpu_us, t->job.worker};
}

/* member_outcome is member i's completion: with `own`, its run's outcome when it ran (its
 * times in *mine, on the pack's worker); else, or when it never ran, its input's failure or
 * `status`, on the worker of `ran` (NULL: the pack never ran). Without `own` only what the
 * loop thread wrote of the member is read (its worker may be running it). */
static outcome_t member_outcome(lt_task_t *t, uint32_t i, bool own, lt_ran_t *mine,
                                const lt_ran_t *ran, int status, const char *errmsg) {
  lt_job_member_t *m = &t->members[i];
  outcome_t o = {t->outs[i].seq, t->outs[i], status, errmsg, NULL, -1, 0, NULL, NULL};
  if (ran != NULL) { /* not its own run: none, on the pack's worker */
    *mine = (lt_ran_t){0, 0, 0, ran->worker};
    o.ran = mine;
  }
  if (m->skip) { /* an input failed it: its own failure (written before the job ran) */
    o.status = m->status;
    o.errmsg = m->errmsg != NULL ? m->errmsg : "";
  }
  if (!own || !m->ran) return o;
  *mine = (lt_ran_t){m->service_us, m->start_us, m->cpu_us, t->job.worker};
  o.ran = mine;
  o.status = m->status;
  o.errmsg = m->errmsg != NULL ? m->errmsg : "";
  o.n = m->status == LT_OK ? 1 : 0;
  o.out = &m->out;
  o.outlen = &m->outlen;
  return o;
}

/* complete_members queues the completions of members from..to of pack t, in order: with
 * `own` those that ran with their own outcomes, the others with `status`. */
static void complete_members(lt_server_t *srv, lt_session_t *s, lt_task_t *t, uint32_t from,
                             uint32_t to, bool own, const lt_ran_t *ran, int status,
                             const char *errmsg) {
  for (uint32_t i = from; i < to; i++) {
    lt_ran_t mine;
    complete(srv, s, t, member_outcome(t, i, own, &mine, ran, status, errmsg));
  }
}

/* finish ends t with `status`: stores or fails its outputs, queues its completion (a pack:
 * its members' k completions, as one entry) and frees it. For an orphan only the store is
 * cleaned up. */
static void finish(lt_server_t *srv, lt_task_t *t, int status, const char *errmsg) {
  lt_session_t *s = t->sess;
  detach(t);
  if (s == NULL) {
    /* An orphan: dropping its session released every id of its client already, and a new
     * session of the same client may have made those ids again since; the orphan's ids are
     * not its own to release any more. */
    task_free(srv, t);
    return;
  }
  lt_ran_t ran = job_ran(t);
  if (t->pack > 1) {
    uint32_t first = 0;
    lt__session_done_room(srv, s, t->pack, &first);
    complete_members(srv, s, t, 0, t->pack, true, t->ran ? &ran : NULL, status, errmsg);
    lt__session_done_pack(s, first, t->pack);
  } else {
    char err[160];
    lt_exec_result_t *r = &t->job.result;
    uint32_t n = status == LT_OK && t->ran ? r->nout : 0;
    const lt_op_desc_t *op = lt__op(t->op);
    int answer = op->answers && status == LT_OK && t->ran ? r->answer : -1;
    if (status == LT_OK && op->outputs == LT_OP_OUT_ONE && n != 1) {
      snprintf(err, sizeof err, "kernel made %u outputs, expected 1", n);
      status = LT_EKERNEL;
      errmsg = err;
    }
    complete(srv, s, t,
             (outcome_t){t->seq, t->out, status, errmsg, t->ran ? &ran : NULL, answer, n, r->out,
                         r->outlen});
  }
  release_inputs(srv, t);
  task_free(srv, t);
}

/* check_kernel checks one stage's kernel index against the session's program. A kernel
 * that did not resolve is not checked here: its instruction fails when it would run. */
static int check_kernel(const lt_session_t *s, uint32_t k, char *err, size_t errlen) {
  uint32_t n = s->prog != NULL ? s->prog->n : 0;
  if (k >= n) {
    snprintf(err, errlen, "kernel index %u not in program (%u kernels)", k, n);
    return LT_ENOKERNEL;
  }
  return LT_OK;
}

/* check refuses an instruction that cannot be accepted: LT_OK, or an error with `err`. */
static int check(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m, const lt_instr_t *ins,
                 char *err, size_t errlen) {
  int rc;
  if (srv->stopping) {
    snprintf(err, errlen, "server shutting down");
    return LT_ESHUTDOWN;
  }
  if (!lt__op_valid(ins->op, ins->nmore + 1)) {
    snprintf(err, errlen, "malformed instruction: op %u with %u stages", ins->op, ins->nmore + 1);
    return LT_EPROTO;
  }
  uint32_t k = ins->pack > 1 ? ins->pack : 1;
  if (ins->noutputs != k) {
    snprintf(err, errlen, "malformed instruction: %u output ids, expected %u", ins->noutputs, k);
    return LT_EPROTO;
  }
  if (k > 1 && (ins->op != LT_OP_SEQ || k > LT_MAX_PACK || ins->ninputs % k != 0)) {
    snprintf(err, errlen, "malformed instruction: a pack of %u with op %u and %u inputs", k,
             ins->op, ins->ninputs);
    return LT_EPROTO;
  }
  /* A pack counts as its k tasks, or packing would multiply the quota by LT_MAX_PACK. */
  if (s->nexec + (k - 1) >= lt__quota_max_queued(srv)) {
    snprintf(err, errlen,
             "session over its quota of instructions queued or running (--max-queued %u)",
             lt__quota_max_queued(srv));
    return LT_EQUOTA;
  }
  if (lt__quota_ids(srv, s->client_id) + (k - 1) >= lt__quota_max_values(srv)) {
    snprintf(err, errlen, "session over its quota of values (--max-session-values %u)",
             lt__quota_max_values(srv));
    return LT_EQUOTA;
  }
  int room = lt__quota_server_room(srv, 0, k, err, errlen);
  if (room != LT_OK) return room;
  /* Sessions are isolated: an instruction names outputs in its own session's id space
   * only and reads only its own session's values. (An id that exists is never overwritten
   * either: the store's single assignment fails the second producer with LT_EEXIST.) */
  char cid[12];
  for (uint32_t i = 0; i < k; i++) {
    if (ins->outputs[i].client == s->client_id) continue;
    snprintf(err, errlen, "output id of client %s is not in this session's id space",
             lt__short_id(ins->outputs[i].client, cid));
    return LT_EAUTH;
  }
  if ((rc = check_kernel(s, ins->kernel, err, errlen)) != LT_OK) return rc;
  for (uint32_t j = 0; j < ins->nmore; j++)
    if ((rc = check_kernel(s, ins->more[j].kernel, err, errlen)) != LT_OK) return rc;
  lt_task_t *dup = NULL;
  HASH_FIND(hh, s->tasks, &ins->seq, sizeof ins->seq, dup);
  if (dup != NULL) {
    snprintf(err, errlen, "instruction %llu is already in flight", (unsigned long long)ins->seq);
    return LT_EEXIST;
  }
  for (uint32_t j = 0; j < ins->ninputs; j++) {
    const lt_input_t *in = &ins->inputs[j];
    if (in->kind == LT_INPUT_INLINE) {
      if (in->frame >= m->nframes) {
        snprintf(err, errlen, "input %u: frame %u not in message (%u frames)", j, in->frame,
                 m->nframes);
        return LT_EPROTO;
      }
    } else if (in->kind == LT_INPUT_REF) {
      /* A value held elsewhere is fetched from its holder: a tcp:// endpoint this server
       * may connect to. */
      if (lt__peer_remote(srv, in->holder) && !lt__peer_endpoint_ok(in->holder)) {
        snprintf(err, errlen,
                 "input %u: holder '%.64s' is not a tcp:// endpoint of at most %d bytes", j,
                 in->holder, LT_PEER_EP_MAX);
        return LT_EINVAL;
      }
      if (in->id.client != s->client_id) {
        snprintf(err, errlen, "input %u: a value of client %s is not this session's", j,
                 lt__short_id(in->id.client, cid));
        return LT_EAUTH;
      }
      /* This server connects only where the session's client says its servers are. */
      if (lt__peer_remote(srv, in->holder) && !lt__session_peer(s, in->holder, NULL)) {
        snprintf(err, errlen, "input %u: holder '%.64s' is not one of this session's servers", j,
                 in->holder);
        return LT_EAUTH;
      }
    } else {
      snprintf(err, errlen, "input %u: unknown kind %d", j, (int)in->kind);
      return LT_EPROTO;
    }
  }
  return LT_OK;
}

/* set_stage fills stage i from kernel index k and a copy of `param`. */
/* set_stage fills stage i with kernel k and a copy of `param` at *room, which it moves on. */
static void set_stage(lt_task_t *t, const lt_session_t *s, uint32_t i, uint32_t k, lt_bytes_t param,
                      char **room) {
  t->params[i] = *room;
  if (param.len) memcpy(*room, param.data, param.len);
  *room += param.len;
  t->kidx[i] = k;
  t->stages[i].fn = s->prog->fns[k];
  t->stages[i].name = s->prog->names[k];
  t->stages[i].param = (lt_bytes_t){t->params[i], param.len};
}

/* ALIGN rounds n up to a multiple of the strictest alignment a member may need. */
#define ALIGN(n) (((n) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

/* task_alloc allocates a zeroed task for `ins` with its arrays and a copy of its parameters
 * in one block (one malloc per instruction); *room gets where the parameters go. */
static lt_task_t *task_alloc(const lt_instr_t *ins, char **room) {
  size_t nin = ins->ninputs ? ins->ninputs : 1, nst = (size_t)ins->nmore + 1;
  size_t k = ins->pack > 1 ? ins->pack : 1, nmem = k > 1 ? k : 0;
  size_t params = ins->param.len;
  for (uint32_t j = 0; j < ins->nmore; j++)
    params += ins->more[j].param.len;
  size_t o_inputs = ALIGN(sizeof(lt_task_t));
  size_t o_in = o_inputs + ALIGN(nin * sizeof(task_input_t));
  size_t o_stages = o_in + ALIGN(nin * sizeof(lt_bytes_t));
  size_t o_params = o_stages + ALIGN(nst * sizeof(lt_exec_stage_t));
  size_t o_kidx = o_params + ALIGN(nst * sizeof(void *));
  size_t o_outs = o_kidx + ALIGN(nst * sizeof(uint32_t));
  size_t o_members = o_outs + ALIGN(k * sizeof(lt_oid_t));
  size_t o_room = o_members + ALIGN(nmem * sizeof(lt_job_member_t));
  char *p = calloc(1, o_room + params + 1);
  if (p == NULL) return NULL;
  lt_task_t *t = (lt_task_t *)p;
  t->inputs = (task_input_t *)(p + o_inputs);
  t->in = (lt_bytes_t *)(p + o_in);
  t->stages = (lt_exec_stage_t *)(p + o_stages);
  t->params = (void **)(p + o_params);
  t->kidx = (uint32_t *)(p + o_kidx);
  t->outs = (lt_oid_t *)(p + o_outs);
  t->members = nmem ? (lt_job_member_t *)(p + o_members) : NULL;
  *room = p + o_room;
  return t;
}

static lt_task_t *task_new(lt_server_t *srv, lt_session_t *s, const lt_instr_t *ins) {
  char *room;
  lt_task_t *t = task_alloc(ins, &room);
  if (t == NULL) return NULL;
  t->srv = srv;
  t->seq = ins->seq;
  t->op = ins->op;
  t->flags = ins->flags;
  t->out = ins->outputs[0];
  t->pack = ins->pack > 1 ? ins->pack : 1;
  for (uint32_t i = 0; i < t->pack; i++) {
    t->outs[i] = ins->outputs[i];
    if (t->members != NULL) t->members[i].seq = ins->outputs[i].seq;
  }
  t->secret = s->secret;
  t->ninputs = ins->ninputs;
  t->nstages = ins->nmore + 1;
  t->prog = lt__program_ref(s->prog);
  set_stage(t, s, 0, ins->kernel, ins->param, &room);
  for (uint32_t j = 0; j < ins->nmore; j++)
    set_stage(t, s, j + 1, ins->more[j].kernel, ins->more[j].param, &room);
  for (uint32_t j = 0; j < ins->ninputs; j++) {
    t->inputs[j].task = t;
    t->inputs[j].idx = j;
    t->inputs[j].kind = ins->inputs[j].kind;
    t->inputs[j].id = ins->inputs[j].id;
    t->inputs[j].w.cb = on_input;
    t->inputs[j].w.data = t;
    const char *key = "";
    if (ins->inputs[j].kind == LT_INPUT_REF && lt__peer_remote(srv, ins->inputs[j].holder) &&
        (!lt__session_peer(s, ins->inputs[j].holder, &key) ||
         (t->inputs[j].holder = strdup(ins->inputs[j].holder)) == NULL ||
         (t->inputs[j].key = strdup(key)) == NULL)) {
      task_free(srv, t);
      return NULL;
    }
  }
  HASH_ADD(hh, s->tasks, seq, sizeof t->seq, t);
  if (t->oom) {
    task_free(srv, t);
    return NULL;
  }
  t->sess = s;
  return t;
}

/* resolve_inputs binds every input: INLINE frames are kept zero copy, REF inputs are got
 * from the store or parked there; a REF held by another server is first fetched into the
 * store (peer.c), so that it resolves like a local one. On a failed or unknown input the
 * task is queued to fail. */
static void resolve_inputs(lt_server_t *srv, lt_task_t *t, zmq_msg_t *payloads,
                           const lt_instr_t *ins) {
  for (uint32_t j = 0; j < t->ninputs; j++) {
    task_input_t *in = &t->inputs[j];
    if (t->members != NULL && t->members[j / (t->ninputs / t->pack)].skip)
      continue; /* its member failed by an earlier input: it will not run */
    if (in->kind == LT_INPUT_INLINE) {
      zmq_msg_init(&in->msg);
      in->has_msg = true;
      zmq_msg_copy(&in->msg, &payloads[ins->inputs[j].frame]);
      t->in[j] = (lt_bytes_t){zmq_msg_data(&in->msg), zmq_msg_size(&in->msg)};
      continue;
    }
    lt_value_t *v = NULL;
    const char *em = NULL;
    char perr[400];
    int rc = LT_OK;
    if (in->holder != NULL) {
      rc = lt__peer_need(srv, in->holder, in->key, t->secret, in->id,
                         (t->flags & LT_INSTR_RELEASE_INPUTS) != 0, &in->copy, perr, sizeof perr);
      in->told = rc == LT_OK;
      /* Only the store parks a reader: a peer that cannot take the fetch fails it. */
      if (rc == LT_EAGAIN) rc = LT_ELOST;
    }
    if (rc != LT_OK)
      em = perr;
    else
      rc = lt__store_get(srv->store, in->id, &v, &in->w, &em);
    if (rc == LT_OK) {
      in->val = v;
      t->in[j] = (lt_bytes_t){v->data, v->len};
    } else if (rc == LT_EAGAIN) {
      in->parked = true;
      t->nwait++;
    } else {
      char msg[LT_KERNEL_ERRMSG_MAX + 96];
      if (member_fail(t, j, in->id, rc, em, msg, sizeof msg)) continue;
      unpark_all(srv, t);
      t->nwait = 0;
      t->input_failed = true;
      fail_later(srv, t, rc, msg);
      return;
    }
  }
  if (t->nwait > 0 && t->sess != NULL && t->sess->nparked >= lt__quota_max_parked(srv)) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "session over its quota of instructions waiting for inputs (--max-parked %u)",
             lt__quota_max_parked(srv));
    unpark_all(srv, t);
    t->nwait = 0;
    fail_later(srv, t, LT_EQUOTA, msg);
    return;
  }
  if (t->nwait > 0) {
    t->state = TASK_PARKED;
    srv->parked++;
    if (t->sess != NULL) t->sess->nparked++;
  } else {
    fire(srv, t);
  }
}

/* refuse answers an instruction that was not accepted: a well-formed pack with a completion
 * per member (one entry), anything else with one. */
static void refuse(lt_server_t *srv, lt_session_t *s, const lt_instr_t *ins, int rc,
                   const char *err) {
  uint32_t k = ins->pack > 1 && ins->noutputs == ins->pack ? ins->pack : 1, first = 0;
  if (k == 1) {
    lt__session_done_add(srv, s, ins->seq, rc, err, NULL, -1, 0, NULL, NULL);
    return;
  }
  lt__session_done_room(srv, s, k, &first);
  for (uint32_t i = 0; i < k; i++)
    lt__session_done_add(srv, s, ins->outputs[i].seq, rc, err, NULL, -1, 0, NULL, NULL);
  lt__session_done_pack(s, first, k);
}

void lt__task_execute(lt_server_t *srv, lt_session_t *s, const lt_msg_t *m, zmq_msg_t *payloads) {
  /* The latest EXECUTE sets the window; one that widens it starts waiting tasks at once,
   * before this message's own (which queue behind them). */
  lt__executor_set_limit(srv->ex, &s->group, m->u.execute.max_active);
  s->timeout_ms = m->u.execute.timeout_ms;
  srv->batching = true;
  uint32_t left = 0; /* instructions left in the current group, this one included */
  for (uint32_t i = 0; i < m->u.execute.ninstrs; i++) {
    const lt_instr_t *ins = &m->u.execute.instrs[i];
    if (left == 0) {
      left = ins->group > 1 ? ins->group : 1;
      srv->ganging = left > 1;
      srv->gang_tail = NULL;
    }
    left--;
    char err[600];
    int rc = check(srv, s, m, ins, err, sizeof err);
    lt_task_t *t = NULL;
    if (rc == LT_OK && (t = task_new(srv, s, ins)) == NULL) {
      rc = LT_ENOMEM;
      snprintf(err, sizeof err, "out of memory for the instruction");
    }
    if (rc != LT_OK) {
      lt__log(LT_LOG_DEBUG, "session %s: instruction %llu refused: %s", s->name,
              (unsigned long long)ins->seq, err);
      refuse(srv, s, ins, rc, err);
      continue;
    }
    for (uint32_t j = 0; expected(t) && rc == LT_OK && j < t->pack; j++)
      rc = lt__store_expect(srv->store, t->outs[j]);
    if (rc != LT_OK) {
      fail_later(srv, t, rc, "cannot register the output in the store");
      continue;
    }
    resolve_inputs(srv, t, payloads, ins);
  }
  flush_jobs(srv);
}

void lt__task_cancel(lt_server_t *srv, lt_session_t *s, const uint64_t *seqs, uint32_t n) {
  /* A pack is found by its instruction seq and canceled whole (each member LT_ECANCELED);
   * its other members' seqs find nothing, as a finished instruction's. */
  for (uint32_t i = 0; i < n; i++) {
    lt_task_t *t = NULL;
    HASH_FIND(hh, s->tasks, &seqs[i], sizeof seqs[i], t);
    if (t == NULL) continue;
    if (t->state == TASK_PARKED) {
      unpark_all(srv, t);
    } else if (t->state != TASK_EXEC || !exec_cancel(srv, t, true)) {
      continue; /* running, or already failing */
    }
    fail_later(srv, t, LT_ECANCELED, "canceled by the client");
  }
}

/* kernel_names writes the instruction's kernels ("a" or "a+b+c") into buf. */
static void kernel_names(const lt_task_t *t, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < t->nstages && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s%s", i ? "+" : "", t->stages[i].name);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* time_out answers a running instruction with LT_ETIMEDOUT and orphans it: its worker
 * thread keeps the task's memory until the kernel returns, and the result is dropped. In a
 * pack it is member m that overran (the executor runs no member after it): the members before
 * it are answered with their results, those after it, which never run, with LT_ECANCELED (the
 * client places them again), all in one entry. With LT_INSTR_RELEASE_INPUTS the inputs of
 * the members up to m go: the client sees them finished, and the kernel keeps reading its
 * own through the task's references. */
static void time_out(lt_server_t *srv, lt_task_t *t, uint32_t m) {
  t->timed_out = true;
  lt_session_t *s = t->sess;
  if (s == NULL) return;
  char names[200], msg[360], member[48] = "", later[120];
  kernel_names(t, names, sizeof names);
  unsigned long long ms = (unsigned long long)(t->timeout_us / 1000u);
  if (t->pack > 1) snprintf(member, sizeof member, ", member %u of %u", m, t->pack);
  snprintf(msg, sizeof msg, "%s: ran longer than %llu ms (task_timeout_ms)%s", names, ms, member);
  lt__log(LT_LOG_WARN, "session %s: instruction %llu: %s", s->name, (unsigned long long)t->seq,
          msg);
  detach(t);
  lt__executor_detach(srv->ex, &t->job);
  if (t->pack <= 1) {
    complete(srv, s, t, (outcome_t){t->seq, t->out, LT_ETIMEDOUT, msg, NULL, -1, 0, NULL, NULL});
  } else {
    snprintf(later, sizeof later, "not run: member %u of its pack ran longer than %llu ms", m, ms);
    /* Members run on one worker; the one running and those after it share it too. */
    lt_ran_t none = {0, 0, 0, m > 0 ? t->job.worker : 0};
    uint32_t first = 0;
    lt__session_done_room(srv, s, t->pack, &first);
    complete_members(srv, s, t, 0, m, true, &none, LT_OK, ""); /* final since the cut */
    complete_members(srv, s, t, m, m + 1, false, &none, LT_ETIMEDOUT, msg);
    complete_members(srv, s, t, m + 1, t->pack, false, &none, LT_ECANCELED, later);
    lt__session_done_pack(s, first, t->pack);
  }
  release_members(srv, t, m + 1);
}

bool lt__task_deadline(lt_server_t *srv, const lt_job_running_t *run, uint64_t now_us,
                       uint64_t recycle_ms) {
  lt_task_t *t = run->job->data;
  if (t->timeout_us == 0 || now_us < run->since_us) return false;
  uint64_t ran = now_us - run->since_us;
  if (!t->timed_out && ran > t->timeout_us) {
    /* A pack's member that finished meanwhile is not cut: the next tick sees the next. */
    if (t->pack <= 1 || lt__executor_cut(srv->ex, run->job, run->member))
      time_out(srv, t, t->pack > 1 ? run->member : 0);
  }
  return t->timed_out && ran > t->timeout_us + recycle_ms * 1000u;
}

void lt__task_on_done(lt_executor_t *ex, lt_job_t *done, void *data) {
  (void)ex;
  lt_server_t *srv = data;
  lt_job_t *next;
  for (lt_job_t *j = done; j != NULL; j = next) {
    next = j->next;
    lt_task_t *t = j->data;
    srv->inexec--;
    srv->completed += t->pack; /* tasks: a pack's members each */
    t->ran = true;
    /* Past its deadline before the timer saw it run (between ticks): it fails as the timer
     * would have failed it. A pack is timed member by member by the ticks alone. */
    if (!t->timed_out && t->pack <= 1 && t->timeout_us != 0 && j->service_us > t->timeout_us)
      time_out(srv, t, 0);
    finish(srv, t, j->result.status, j->result.status == LT_OK ? "" : j->result.errmsg);
  }
  srv->settle(srv);
}

void lt__task_run_failq(lt_server_t *srv) {
  lt_task_t *t;
  for (;;) {
    LT_QUEUE_POP(srv->failq, srv->failq_tail, t, fail_next);
    if (t == NULL) break;
    finish(srv, t, t->fail_status, t->fail_msg != NULL ? t->fail_msg : "");
  }
}

void lt__task_drop_session(lt_server_t *srv, lt_session_t *s) {
  lt_task_t *t, *tmp, *dead = NULL;
  /* First detach everything without a callback running; then release the outputs, which
   * may wake (other sessions') readers. */
  HASH_ITER(hh, s->tasks, t, tmp) {
    HASH_DEL(s->tasks, t);
    t->sess = NULL;
    if (t->state == TASK_PARKED || t->state == TASK_NEW) {
      unpark_all(srv, t);
    } else if (t->state != TASK_EXEC || !exec_cancel(srv, t, false)) {
      /* Running or failing: finished as an orphan later, out of the session's group. */
      if (t->state == TASK_EXEC) lt__executor_detach(srv->ex, &t->job);
      continue;
    }
    t->fail_next = dead;
    dead = t;
  }
  while ((t = dead) != NULL) {
    dead = t->fail_next;
    release_expected(srv, t);
    task_free(srv, t);
  }
}

void lt__task_shutdown(lt_server_t *srv) {
  lt_session_t *s, *stmp;
  HASH_ITER(hh, srv->sessions, s, stmp) {
    lt_task_t *t, *tmp;
    HASH_ITER(hh, s->tasks, t, tmp) {
      if (t->state == TASK_PARKED) {
        unpark_all(srv, t);
      } else if (t->state != TASK_EXEC || !exec_cancel(srv, t, false)) {
        continue;
      }
      fail_later(srv, t, LT_ESHUTDOWN, "server shutting down");
    }
  }
}
