/* scheduler.c: the dispatcher thread. Tasks become graph instances; fired nodes become
 * instruction records queued as fireable; each loop turn dispatches what the servers can
 * take (one `execute` per server per turn) and applies every completion that arrived.
 * Object ids are client-named ({client id, instruction seq}), so every output already has
 * its reference when it is dispatched. Dispatcher thread only, except the stats lock. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <lithium/error.h>
#include "buf.h"
#include "instance.h"
#include "log.h"
#include "scheduler.h"
#include "stats.h"

/* A submitted task while it runs: its instance and the instructions still out. */
typedef struct job {
  lt_task_t *task;
  lt_instance_t *inst;
  uint32_t live;  /* instruction records queued or in flight */
  int finished;   /* result delivered; free when live reaches 0 */
} job_t;

/* One instruction: what a frame of an instance needs run, queued or in flight on `conn`. */
typedef struct instr_rec {
  uint64_t seq; /* instruction id = sequence of its output 0's object id */
  job_t *job;
  lt_frame_t *frame;
  int conn;       /* -1 while queued */
  uint32_t tries; /* dispatches lost to a failed server */
  struct instr_rec *next;
  UT_hash_handle hh; /* in flight, by seq */
} instr_rec_t;

/* An execute message being assembled for one server in this turn. Inputs, outputs and
 * further stages of all instructions live in flat arrays; each instruction records where
 * its own start (in the pointer fields, as offsets) until batch_send points them there. */
typedef struct batch {
  lt_instr_t *instrs;
  uint32_t n, cap;
  lt_input_t *inputs;
  uint32_t ninputs, capinputs;
  lt_stage_t *stages;
  uint32_t nstages, capstages;
  lt_oid_t *outputs;
  uint32_t capoutputs;
  lt_value_t **values;
  uint32_t capvalues;
  lt_bytes_t *frames;
  uint32_t nframes, capframes;
} batch_t;

struct lt_sched {
  lt_eval_t *ev;
  void *zctx;
  lt_conn_t *conns;
  size_t nconns, capconns;
  size_t initial; /* hosts known at start: they answer lt_eval_start */
  instr_rec_t *fire_head, *fire_tail;
  instr_rec_t *inflight;
  uint64_t next_seq;
  uint32_t window; /* instructions in flight per server */
  lt_codec_limits_t limits;
  lt_rx_t rx;
  int64_t next_tick;
  size_t rr; /* round-robin start for placement */

  pthread_mutex_t stats_mu; /* guards conns[] and the counters for stats readers */
  uint64_t instructions;
  uint64_t retries;
  uint64_t bytes_to_servers_closed; /* bytes of connections already closed */
  uint64_t bytes_from_servers_closed;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lt__sched_new(lt_sched_t **out, lt_eval_t *ev) {
  lt_sched_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  s->ev = ev;
  s->window = 1;
  s->next_seq = (uint64_t)LT_MAX_PARTS + 1;
  lt__codec_limits_default(&s->limits);
  pthread_mutex_init(&s->stats_mu, NULL);
  s->zctx = zmq_ctx_new();
  if (s->zctx == NULL) {
    lt__sched_free(s);
    return LT_EIO;
  }
  *out = s;
  return LT_OK;
}

void lt__sched_free(lt_sched_t *s) {
  if (s == NULL) return;
  if (s->zctx != NULL) zmq_ctx_term(s->zctx);
  pthread_mutex_destroy(&s->stats_mu);
  free(s->conns);
  free(s);
}

/* ---- jobs and results ------------------------------------------------------------- */

static void job_release(job_t *j) {
  if (j->live > 0 || !j->finished) return;
  lt__instance_free(j->inst);
  free(j);
}

/* job_finish delivers the task's result (or error) once. */
static void job_finish(lt_sched_t *s, job_t *j, lt_buf_t *b) {
  if (j->finished) {
    lt_buf_free(b);
    return;
  }
  j->finished = 1;
  if (b == NULL) b = lt__buf_fail(LT_ENOMEM, NULL);
  pthread_mutex_lock(&s->ev->mu);
  lt__eval_finish(s->ev, j->task, b);
  pthread_mutex_unlock(&s->ev->mu);
  j->task = NULL;
}

static void job_fail(lt_sched_t *s, job_t *j, int err, const char *msg) {
  job_finish(s, j, lt__buf_fail(err, msg));
}

/* ---- fireable queue --------------------------------------------------------------- */

static void push_fireable(lt_sched_t *s, instr_rec_t *r, int front) {
  r->conn = -1;
  r->next = NULL;
  if (s->fire_head == NULL) {
    s->fire_head = s->fire_tail = r;
  } else if (front) {
    r->next = s->fire_head;
    s->fire_head = r;
  } else {
    s->fire_tail->next = r;
    s->fire_tail = r;
  }
}

static instr_rec_t *pop_fireable(lt_sched_t *s) {
  instr_rec_t *r = s->fire_head;
  if (r != NULL) {
    s->fire_head = r->next;
    if (s->fire_head == NULL) s->fire_tail = NULL;
    r->next = NULL;
  }
  return r;
}

/* rec_done drops a record and lets its job go when nothing else is out. */
static void rec_done(instr_rec_t *r) {
  job_t *j = r->job;
  j->live--;
  free(r);
  job_release(j);
}

/* on_fire is the instance's callback: a frame needs an instruction, queue it. */
static void on_fire(void *ud, lt_instance_t *inst, lt_frame_t *frame) {
  lt_sched_t *s = ud;
  job_t *j = inst->user;
  instr_rec_t *r = calloc(1, sizeof *r);
  if (r == NULL) {
    job_fail(s, j, LT_ENOMEM, "out of memory queueing an instruction");
    return;
  }
  /* Output i of this instruction is named seq + i: ids are spaced for the most parts. */
  r->seq = s->next_seq;
  s->next_seq += (uint64_t)LT_MAX_PARTS + 1;
  r->job = j;
  r->frame = frame;
  j->live++;
  push_fireable(s, r, 0);
}

/* take_intake turns newly submitted tasks into instances. */
static void take_intake(lt_sched_t *s) {
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  lt_task_t *t = ev->intake_head;
  ev->intake_head = ev->intake_tail = NULL;
  pthread_mutex_unlock(&ev->mu);
  while (t != NULL) {
    lt_task_t *next = t->next;
    t->next = NULL;
    job_t *j = calloc(1, sizeof *j);
    int rc = j != NULL ? lt__instance_new(&j->inst, ev->tmpl, t->seq) : LT_ENOMEM;
    if (rc != LT_OK) {
      pthread_mutex_lock(&ev->mu);
      lt__eval_finish(ev, t, lt__buf_fail(rc, "cannot instantiate the program"));
      pthread_mutex_unlock(&ev->mu);
      free(j);
    } else {
      j->task = t;
      j->inst->user = j;
      j->live++; /* hold the job while feeding */
      lt__instance_feed(j->inst, t->input, on_fire, s);
      lt__value_unref(t->input);
      t->input = NULL;
      j->live--;
      job_release(j);
    }
    t = next;
  }
}

/* ---- connections ------------------------------------------------------------------ */

static void open_new_hosts(lt_sched_t *s) {
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  while (s->nconns < ev->nhosts) {
    if (s->nconns == s->capconns) {
      size_t cap = s->capconns ? s->capconns * 2 : 8;
      lt_conn_t *c = realloc(s->conns, cap * sizeof *c);
      if (c == NULL) break;
      s->conns = c;
      s->capconns = cap;
    }
    lt_conn_t *c = &s->conns[s->nconns];
    const char *ep = ev->hosts[s->nconns];
    s->nconns++;
    int rc = lt__conn_open(c, s->zctx, ep, ev->client_id, ev->tmpl->kernels, ev->tmpl->nkernels,
                           now_ms());
    if (rc != LT_OK) {
      lt__log(LT_LOG_WARN, "server %s: cannot open (%s)", ep, lt_strerror(rc));
      c->state = LT_CONN_DEAD;
      if (c->endpoint == NULL) c->endpoint = strdup(ep);
      if (s->nconns <= s->initial) ev->start_waiting--;
      pthread_cond_broadcast(&ev->cv_start);
    }
  }
  pthread_mutex_unlock(&ev->mu);
}

/* start_answered counts an initial host out of lt_eval_start's wait. */
static void start_answered(lt_sched_t *s, size_t idx, int ready) {
  if (idx >= s->initial) return;
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  ev->start_waiting--;
  ev->start_ready += ready;
  pthread_cond_broadcast(&ev->cv_start);
  pthread_mutex_unlock(&ev->mu);
}

/* conn_dead marks a server dead and re-queues its instructions elsewhere. */
static void conn_dead(lt_sched_t *s, size_t idx, const char *why) {
  lt_conn_t *c = &s->conns[idx];
  if (c->state == LT_CONN_DEAD) return;
  int was_hello = c->state == LT_CONN_HELLO;
  lt__log(LT_LOG_WARN, "server %s is dead: %s", c->endpoint, why);
  c->state = LT_CONN_DEAD;
  /* A dead link is closed at once: nothing more is read from it or sent to it. */
  if (c->sock != NULL) zmq_close(c->sock);
  c->sock = NULL;
  if (was_hello) start_answered(s, idx, 0);
  instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->conn != (int)idx) continue;
    HASH_DEL(s->inflight, r);
    c->inflight--;
    if (r->job->finished) {
      rec_done(r);
      continue;
    }
    r->tries++;
    s->retries++;
    if (r->tries > s->ev->opts.max_retries) {
      char msg[256];
      snprintf(msg, sizeof msg, "instruction lost %u times, last on %s (%s)", r->tries,
               c->endpoint, why);
      job_fail(s, r->job, LT_ELOST, msg);
      rec_done(r);
    } else {
      push_fireable(s, r, 1);
    }
  }
}

static int live_servers(const lt_sched_t *s) {
  int n = 0;
  for (size_t i = 0; i < s->nconns; i++) n += s->conns[i].state != LT_CONN_DEAD;
  return n;
}

/* ---- completions ------------------------------------------------------------------ */

static void on_completion(lt_sched_t *s, size_t idx, const lt_completion_t *cp,
                          const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &cp->seq, sizeof cp->seq, r);
  if (r == NULL || r->conn != (int)idx) {
    lt__log(LT_LOG_DEBUG, "server %s: stray completion %llu", c->endpoint,
            (unsigned long long)cp->seq);
    return;
  }
  HASH_DEL(s->inflight, r);
  c->inflight--;
  c->completed++;
  job_t *j = r->job;
  if (j->finished) {
    rec_done(r);
    return;
  }
  if (cp->status == LT_ESHUTDOWN || cp->status == LT_ECANCELED) {
    /* The server refused it without running it: it may run elsewhere. */
    push_fireable(s, r, 1);
    return;
  }
  if (cp->status != LT_OK) {
    job_fail(s, j, cp->status, cp->errmsg);
    rec_done(r);
    return;
  }
  if (cp->noutputs > LT_MAX_PARTS) {
    job_fail(s, j, LT_EPROTO, "server returned too many outputs");
    rec_done(r);
    return;
  }
  lt_value_t **vals = calloc(cp->noutputs ? cp->noutputs : 1, sizeof *vals);
  int rc = vals != NULL ? LT_OK : LT_ENOMEM;
  for (uint32_t i = 0; rc == LT_OK && i < cp->noutputs; i++) {
    if (cp->outputs[i].frame < 0) {
      rc = LT_EPROTO; /* plain mode asks every value back */
      break;
    }
    const lt_bytes_t *f = &m->frames[cp->outputs[i].frame];
    if ((vals[i] = lt__value_copy(f->data, f->len)) == NULL) rc = LT_ENOMEM;
  }
  char err[256] = "";
  if (rc == LT_OK)
    rc = lt__instance_complete(j->inst, r->frame, cp->answer, vals, cp->noutputs, on_fire, s, err,
                               sizeof err);
  for (uint32_t i = 0; vals != NULL && i < cp->noutputs; i++) lt__value_unref(vals[i]);
  free(vals);
  if (rc != LT_OK) {
    job_fail(s, j, rc, err[0] ? err : "server returned an unusable completion");
  } else if (j->inst->done) {
    job_finish(s, j, lt__buf_ok(j->inst->result.value));
  }
  rec_done(r);
}

static void on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  lt_conn_t *c = &s->conns[idx];
  if (m->has_load) c->load = m->load;
  switch (m->type) {
  case LT_MSG_WELCOME:
    if (c->state != LT_CONN_HELLO) break;
    if (m->u.welcome.version != LT_PROTO_VERSION) {
      conn_dead(s, idx, "protocol version mismatch");
      break;
    }
    free(c->server_id);
    c->server_id = strdup(m->u.welcome.server_id);
    c->threads = m->u.welcome.threads;
    c->state = LT_CONN_READY;
    lt__log(LT_LOG_INFO, "server %s (%s) ready, %u threads", c->endpoint, m->u.welcome.server_id,
            c->threads);
    start_answered(s, idx, 1);
    break;
  case LT_MSG_DONE:
    for (uint32_t i = 0; i < m->u.done.ncompl; i++)
      on_completion(s, idx, &m->u.done.compl[i], m);
    break;
  case LT_MSG_ERROR:
    lt__log(LT_LOG_WARN, "server %s refused a message: %s (%s)", c->endpoint,
            m->u.error.message, lt_strerror(m->u.error.code));
    if (c->state == LT_CONN_HELLO) conn_dead(s, idx, m->u.error.message);
    break;
  case LT_MSG_HEARTBEAT:
    break;
  default:
    lt__log(LT_LOG_DEBUG, "server %s: unexpected %s", c->endpoint, lt__msg_type_name(m->type));
    break;
  }
}

static void drain_conn(lt_sched_t *s, size_t idx) {
  for (;;) {
    lt_conn_t *c = &s->conns[idx];
    if (c->sock == NULL) return;
    int rc = lt__conn_recv(c, &s->rx, &s->limits, now_ms());
    if (rc == LT_EAGAIN) return;
    if (rc != LT_OK) {
      lt__log(LT_LOG_WARN, "server %s: dropped a malformed message (%s)", c->endpoint,
              lt_strerror(rc));
      if (rc == LT_EIO) return;
      continue;
    }
    on_message(s, idx, &s->rx.msg);
    lt__rx_clear(&s->rx);
  }
}

/* ---- dispatch --------------------------------------------------------------------- */

/* pick_conn returns the ready server with a free window slot and the fewest instructions
 * in flight (round-robin among equals), or -1. */
static int pick_conn(lt_sched_t *s) {
  int best = -1;
  for (size_t k = 0; k < s->nconns; k++) {
    size_t i = (s->rr + k) % s->nconns;
    lt_conn_t *c = &s->conns[i];
    if (c->state != LT_CONN_READY || c->inflight >= s->window) continue;
    if (best < 0 || c->inflight < s->conns[best].inflight) best = (int)i;
  }
  if (best >= 0) s->rr = (size_t)best + 1;
  return best;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return LT_OK;
  uint32_t n = *cap ? *cap : 4;
  while (n < need) n *= 2;
  void *q = realloc(*p, (size_t)n * elem);
  if (q == NULL) return LT_ENOMEM;
  *p = q;
  *cap = n;
  return LT_OK;
}

/* batch_add appends the instruction of `r` to `b`, its input values as payload frames. */
static int batch_add(lt_sched_t *s, batch_t *b, instr_rec_t *r) {
  lt_fire_t fi;
  lt__frame_fire_info(r->frame, &fi);
  uint32_t more = fi.nstages - 1;
  if (grow((void **)&b->instrs, &b->cap, b->n + 1, sizeof *b->instrs) != LT_OK ||
      grow((void **)&b->outputs, &b->capoutputs, b->n + 1, sizeof *b->outputs) != LT_OK ||
      grow((void **)&b->inputs, &b->capinputs, b->ninputs + fi.ninputs, sizeof *b->inputs) != LT_OK ||
      grow((void **)&b->stages, &b->capstages, b->nstages + more, sizeof *b->stages) != LT_OK ||
      grow((void **)&b->frames, &b->capframes, b->nframes + fi.ninputs, sizeof *b->frames) != LT_OK ||
      grow((void **)&b->values, &b->capvalues, b->nframes + fi.ninputs, sizeof *b->values) != LT_OK)
    return LT_ENOMEM;
  lt_instr_t *ins = &b->instrs[b->n];
  memset(ins, 0, sizeof *ins);
  ins->seq = r->seq;
  ins->op = fi.op;
  ins->kernel = fi.stages[0].kernel;
  ins->param.data = fi.stages[0].param;
  ins->param.len = fi.stages[0].param_len;
  /* Offsets into the flat arrays; batch_send turns them into pointers. */
  ins->more = (lt_stage_t *)(uintptr_t)b->nstages;
  ins->nmore = more;
  for (uint32_t k = 1; k < fi.nstages; k++) {
    lt_stage_t *st = &b->stages[b->nstages++];
    st->kernel = fi.stages[k].kernel;
    st->param.data = fi.stages[k].param;
    st->param.len = fi.stages[k].param_len;
  }
  ins->inputs = (lt_input_t *)(uintptr_t)b->ninputs;
  ins->ninputs = fi.ninputs;
  for (uint32_t k = 0; k < fi.ninputs; k++) {
    lt_input_t *inp = &b->inputs[b->ninputs++];
    memset(inp, 0, sizeof *inp);
    inp->kind = LT_INPUT_INLINE;
    inp->frame = b->nframes;
    inp->holder = "";
    lt_value_t *v = fi.inputs[k].value;
    b->frames[b->nframes].data = v->data;
    b->frames[b->nframes].len = v->len;
    b->values[b->nframes++] = v;
  }
  b->outputs[b->n].client = s->ev->client_id;
  b->outputs[b->n].seq = r->seq;
  ins->noutputs = 1;
  ins->flags = LT_INSTR_RETURN;
  b->n++;
  return LT_OK;
}

static void batch_send(lt_sched_t *s, size_t idx, batch_t *b) {
  for (uint32_t i = 0; i < b->n; i++) {
    lt_instr_t *ins = &b->instrs[i];
    ins->inputs = b->inputs + (uintptr_t)ins->inputs;
    ins->more = ins->nmore ? b->stages + (uintptr_t)ins->more : NULL;
    ins->outputs = &b->outputs[i];
  }
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = b->n;
  m.u.execute.instrs = b->instrs;
  m.nframes = b->nframes;
  m.frames = b->frames;
  int rc = lt__conn_send(&s->conns[idx], &m, b->values, now_ms());
  if (rc != LT_OK) conn_dead(s, idx, lt_strerror(rc));
}

static void dispatch(lt_sched_t *s) {
  if (s->fire_head == NULL || s->nconns == 0) return;
  batch_t *batches = calloc(s->nconns, sizeof *batches);
  if (batches == NULL) return;
  while (s->fire_head != NULL) {
    int idx = pick_conn(s);
    if (idx < 0) break;
    instr_rec_t *r = pop_fireable(s);
    if (r->job->finished) {
      rec_done(r);
      continue;
    }
    if (batch_add(s, &batches[idx], r) != LT_OK) {
      push_fireable(s, r, 1);
      break;
    }
    r->conn = idx;
    HASH_ADD(hh, s->inflight, seq, sizeof r->seq, r);
    s->conns[idx].inflight++;
    s->instructions++;
  }
  for (size_t i = 0; i < s->nconns; i++) {
    batch_t *b = &batches[i];
    if (b->n > 0) batch_send(s, i, b);
    free(b->instrs);
    free(b->inputs);
    free(b->stages);
    free(b->outputs);
    free(b->values);
    free(b->frames);
  }
  free(batches);
}

/* fail_unplaceable fails queued instructions when no server is left to run them. */
static void fail_unplaceable(lt_sched_t *s) {
  if (s->fire_head == NULL || live_servers(s) > 0) return;
  instr_rec_t *r;
  while ((r = pop_fireable(s)) != NULL) {
    if (!r->job->finished) job_fail(s, r->job, LT_ENOSERVER, "no live server to run the task");
    rec_done(r);
  }
}

/* ---- heartbeats ------------------------------------------------------------------- */

static void tick(lt_sched_t *s, int64_t now) {
  const lt_options_t *o = &s->ev->opts;
  for (size_t i = 0; i < s->nconns; i++) {
    lt_conn_t *c = &s->conns[i];
    if (c->state == LT_CONN_HELLO && now - c->opened_ms > (int64_t)o->connect_timeout_ms) {
      conn_dead(s, i, "no welcome in time");
    } else if (c->state == LT_CONN_READY) {
      if (now - c->last_recv_ms > 3 * (int64_t)o->heartbeat_ms) {
        conn_dead(s, i, "missed 3 heartbeats");
      } else if (now - c->last_send_ms >= (int64_t)o->heartbeat_ms ||
                 now - c->last_recv_ms >= (int64_t)o->heartbeat_ms) {
        lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
        hb.u.heartbeat.seq = (uint64_t)now;
        lt__conn_send(c, &hb, NULL, now);
      }
    }
  }
}

/* ---- the loop --------------------------------------------------------------------- */

static int should_stop(lt_sched_t *s) {
  pthread_mutex_lock(&s->ev->mu);
  int stop = s->ev->stop;
  pthread_mutex_unlock(&s->ev->mu);
  return stop;
}

static void shutdown_all(lt_sched_t *s) {
  instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    HASH_DEL(s->inflight, r);
    push_fireable(s, r, 0);
  }
  while ((r = pop_fireable(s)) != NULL) {
    if (!r->job->finished) job_fail(s, r->job, LT_ECANCELED, "evaluator freed");
    rec_done(r);
  }
  pthread_mutex_lock(&s->stats_mu);
  for (size_t i = 0; i < s->nconns; i++) lt__conn_close(&s->conns[i]);
  s->nconns = 0;
  pthread_mutex_unlock(&s->stats_mu);
  lt__rx_free(&s->rx);
}

void *lt__sched_main(void *arg) {
  lt_sched_t *s = arg;
  lt_eval_t *ev = s->ev;
  pthread_mutex_lock(&ev->mu);
  s->initial = ev->nhosts;
  pthread_mutex_unlock(&ev->mu);
  pthread_mutex_lock(&s->stats_mu);
  open_new_hosts(s);
  pthread_mutex_unlock(&s->stats_mu);
  s->next_tick = now_ms() + ev->opts.heartbeat_ms;

  zmq_pollitem_t *items = NULL;
  size_t capitems = 0;
  for (;;) {
    if (capitems < s->nconns + 1) {
      capitems = (s->nconns + 1) * 2;
      zmq_pollitem_t *n = realloc(items, capitems * sizeof *items);
      if (n == NULL) break;
      items = n;
    }
    items[0] = (zmq_pollitem_t){.fd = ev->wake_fd, .events = ZMQ_POLLIN};
    size_t npolled = s->nconns;
    for (size_t i = 0; i < npolled; i++) {
      lt_conn_t *c = &s->conns[i];
      if (c->sock != NULL)
        items[i + 1] = (zmq_pollitem_t){.socket = c->sock, .events = ZMQ_POLLIN};
      else
        items[i + 1] = (zmq_pollitem_t){.fd = -1};
    }
    long timeout = (long)(s->next_tick - now_ms());
    if (timeout < 0) timeout = 0;
    int n = zmq_poll(items, (int)npolled + 1, timeout);
    if (n < 0 && errno != EINTR) {
      lt__log(LT_LOG_ERROR, "dispatcher: zmq_poll: %s", zmq_strerror(errno));
      break;
    }
    pthread_mutex_lock(&s->stats_mu);
    if (n > 0 && (items[0].revents & ZMQ_POLLIN)) {
      uint64_t junk;
      ssize_t rd = read(ev->wake_fd, &junk, sizeof junk);
      (void)rd;
      open_new_hosts(s);
      take_intake(s);
    }
    for (size_t i = 0; n > 0 && i < npolled; i++)
      if (items[i + 1].revents & ZMQ_POLLIN) drain_conn(s, i);
    int64_t now = now_ms();
    if (now >= s->next_tick) {
      tick(s, now);
      s->next_tick = now + ev->opts.heartbeat_ms / 4 + 1;
    }
    dispatch(s);
    fail_unplaceable(s);
    pthread_mutex_unlock(&s->stats_mu);
    if (should_stop(s)) break;
  }
  free(items);
  shutdown_all(s);
  return NULL;
}

/* ---- stats ------------------------------------------------------------------------ */

int lt__sched_stats_json(lt_sched_t *s, lt_json_t *j) {
  pthread_mutex_lock(&s->stats_mu);
  uint64_t to = 0, from = 0;
  for (size_t i = 0; i < s->nconns; i++) {
    to += s->conns[i].bytes_out;
    from += s->conns[i].bytes_in;
  }
  lt__json_u64(j, "instructions", s->instructions);
  lt__json_u64(j, "bytes_to_servers", to + s->bytes_to_servers_closed);
  lt__json_u64(j, "bytes_from_servers", from + s->bytes_from_servers_closed);
  lt__json_u64(j, "retries", s->retries);
  lt__json_str(j, "mode", "plain");
  lt__json_array_open(j, "servers");
  for (size_t i = 0; i < s->nconns; i++) {
    const lt_conn_t *c = &s->conns[i];
    lt__json_object_open(j, NULL);
    lt__json_str(j, "endpoint", c->endpoint);
    lt__json_str(j, "server_id", c->server_id != NULL ? c->server_id : "");
    lt__json_bool(j, "alive", c->state != LT_CONN_DEAD);
    lt__json_u64(j, "completed", c->completed);
    lt__json_u64(j, "inflight", c->inflight);
    lt__json_u64(j, "active_threads", c->load.active);
    lt__json_u64(j, "threads", c->threads);
    lt__json_u64(j, "window", s->window);
    lt__json_double(j, "speed", 1.0);
    lt__json_u64(j, "bytes_to", c->bytes_out);
    lt__json_u64(j, "bytes_from", c->bytes_in);
    lt__json_u64(j, "bytes_peer_in", 0);
    lt__json_u64(j, "bytes_peer_out", 0);
    lt__json_u64(j, "values_held", c->load.values_held);
    lt__json_object_close(j);
  }
  lt__json_array_close(j);
  pthread_mutex_unlock(&s->stats_mu);
  return LT_OK;
}
