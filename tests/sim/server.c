/* server.c: the simulator's model of lithium-server (sim.h). Not the server's code: its
 * observable behaviour towards one client, as the real-process protocol tests pin it
 * (tests/server/test_protocol.c: sessions, execute, packs, parking, release, cancel, fetch,
 * stop; tests/server/test_peer.c: peer fetches, a holder without the client's session
 * (LT_ELOST), "no object on peer", LOST). What it keeps:
 *   - sessions by client link: a hello opens one (a hello of the same client on another
 *     link replaces the old one), a bye or a replacement drops it and every value of its
 *     client; a message other than hello on a link without a session is refused LT_ESTATE;
 *   - one store of values by id: pending (an expected output, a copy being fetched), set,
 *     or failed; copies fetched from peers live while their readers do;
 *   - tasks: parked until their inputs exist, queued, running (at most the threads and the
 *     session's window), finished into one DONE each, with the load report;
 *   - fetches: a client's (an unknown id: LT_ENOENT at once), a peer's (LT_ELOST when no
 *     session of that client is here, as after a restart; LT_EAUTH "not a value of this
 *     session" when one is, with another secret; an unknown id waits 2 s, then LT_ENOENT);
 *   - the process: kill (all gone), graceful stop, pause, restart as a new incarnation.
 * Kernels run for real (mdf's lt__exec_run); their time is virtual. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "codec.h"
#include "server.h"

int sv_server_of(const sim_world_t *w, const char *ep) {
  for (uint32_t i = 0; i < w->nsrv; i++)
    if (strcmp(w->eps[i], ep) == 0) return (int)i;
  return -2;
}

/* ---- sending ------------------------------------------------------------------------------ */

sess_t *sv_session(sim_server_t *v, int link) {
  for (sess_t *s = v->sessions; s != NULL; s = s->next)
    if (s->link == link) return s;
  return NULL;
}

static void load(sim_server_t *v, lt_msg_t *m) {
  uint32_t queued = 0, parked = 0;
  for (stask_t *t = v->tasks; t != NULL; t = t->next) {
    queued += t->state == T_QUEUED;
    parked += t->state == T_PARKED;
  }
  m->has_load = true;
  m->load = (lt_load_t){.active = v->running,
                        .queued = queued,
                        .parked = parked,
                        .completed = v->completed,
                        .cpu = (float)v->running,
                        .values_held = HASH_COUNT(v->store),
                        .threads = v->threads,
                        .incarnation = v->incarnation,
                        .stopping = v->stopping};
}

void sv_send(sim_world_t *w, sim_server_t *v, int link, lt_msg_t *m, lt_value_t *const *vals) {
  load(v, m);
  sim_to_client(w, w->links[link], sim_msg_encode(m, vals));
}

static void send_error(sim_world_t *w, sim_server_t *v, int link, int code, const char *msg) {
  lt_msg_t m = {.type = LT_MSG_ERROR};
  m.u.error.code = code;
  m.u.error.message = msg;
  sv_send(w, v, link, &m, NULL);
}

/* ---- sessions and messages ------------------------------------------------------------- */

/* drop_session ends session s: its waiting work goes, its running work is orphaned, and
 * every value of its client leaves the store. */
static void drop_session(sim_world_t *w, sim_server_t *v, sess_t *s) {
  for (sess_t **p = &v->sessions; *p != NULL; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  for (stask_t *t = v->tasks; t != NULL;) {
    stask_t *next = t->next;
    if (t->link == s->link && t->state == T_RUNNING) {
      t->link = -1;
    } else if (t->link == s->link) {
      sv_task_unlink(v, t);
      sv_task_free(t);
    }
    t = next;
  }
  for (wfetch_t **p = &v->waits; *p != NULL;) {
    wfetch_t *f = *p;
    if (f->asker < 0 && f->link == s->link) {
      *p = f->next;
      free(f);
    } else {
      p = &f->next;
    }
  }
  sval_t *e, *tmp;
  HASH_ITER(hh, v->store, e, tmp) {
    if (e->id.client == s->client) sv_drop(v, e);
  }
  free(s);
  (void)w;
}

static void hello(sim_world_t *w, sim_server_t *v, int link, const lt_msg_t *m) {
  if (m->u.hello.version != LT_PROTO_VERSION) {
    send_error(w, v, link, LT_EVERSION, "protocol version not supported");
    return;
  }
  sess_t *o = sv_session(v, link);
  if (o != NULL) drop_session(w, v, o);
  for (sess_t *x = v->sessions, *nx; x != NULL; x = nx) {
    nx = x->next;
    if (x->client == m->u.hello.client_id) drop_session(w, v, x); /* replaced */
  }
  sess_t *s = calloc(1, sizeof *s);
  *s = (sess_t){.link = link,
                .client = m->u.hello.client_id,
                .secret = m->u.hello.secret,
                .inline_max = m->u.hello.inline_max,
                .next = v->sessions};
  v->sessions = s;
  char id[32];
  snprintf(id, sizeof id, "sim-%d", v->idx);
  lt_msg_t r = {.type = LT_MSG_WELCOME};
  r.u.welcome.version = LT_PROTO_VERSION;
  r.u.welcome.server_id = id;
  r.u.welcome.cores = v->threads;
  r.u.welcome.threads = v->threads;
  r.u.welcome.speed = v->speed;
  r.u.welcome.now_us = (uint64_t)w->now;
  r.u.welcome.incarnation = v->incarnation;
  if (v->crashed_incarnation != 0) { /* told once, to the next session (lt__crashlog_take) */
    r.u.welcome.crash_signal = 11;
    r.u.welcome.crashed_incarnation = v->crashed_incarnation;
    r.u.welcome.crash_culprit = v->crash_culprit;
    r.u.welcome.crashed = v->crashed;
    r.u.welcome.ncrashed = v->ncrashed;
  }
  sv_send(w, v, link, &r, NULL);
  if (v->crashed_incarnation != 0) {
    free(v->crashed);
    v->crashed = NULL;
    v->ncrashed = 0;
    v->crash_culprit = v->crashed_incarnation = 0;
  }
}

static void trace(sim_world_t *w, sim_server_t *v, int link, const lt_msg_t *m, const char *how) {
  char b[400] = "";
  size_t n = 0;
  if (m->type == LT_MSG_EXECUTE)
    for (uint32_t i = 0; i < m->u.execute.ninstrs && n < sizeof b - 24; i++) {
      const lt_instr_t *x = &m->u.execute.instrs[i];
      n += (size_t)snprintf(b + n, sizeof b - n, " %llu/op%u/f%u(", ID(x->seq), x->op, x->flags);
      for (uint32_t j = 0; j < x->ninputs && n < sizeof b - 24; j++) {
        const lt_input_t *in = &x->inputs[j];
        if (in->kind == LT_INPUT_INLINE)
          n += (size_t)snprintf(b + n, sizeof b - n, "%sv", j ? "," : "");
        else
          n += (size_t)snprintf(b + n, sizeof b - n, "%s%llu.%llu@%d", j ? "," : "", ID(in->id.seq),
                                PART(in->id.seq), in->holder[0] ? sv_server_of(w, in->holder) : -1);
      }
      n += (size_t)snprintf(b + n, sizeof b - n, ")");
    }
  if (m->type == LT_MSG_RELEASE)
    for (uint32_t i = 0; i < m->u.release.nids && n < sizeof b - 24; i++)
      n += (size_t)snprintf(b + n, sizeof b - n, " %llu.%llu", ID(m->u.release.ids[i].seq),
                            PART(m->u.release.ids[i].seq));
  if (m->type == LT_MSG_FETCH)
    snprintf(b, sizeof b, " %llu.%llu%s", ID(m->u.fetch.id.seq), PART(m->u.fetch.id.seq),
             m->u.fetch.release ? " release" : "");
  if (m->type == LT_MSG_CANCEL)
    for (uint32_t i = 0; i < m->u.cancel.nseqs && n < sizeof b - 24; i++)
      n += (size_t)snprintf(b + n, sizeof b - n, " %llu", ID(m->u.cancel.seqs[i]));
  sim_note(w, "server %d <- link %d: %s%s%s", v->idx, link, lt__msg_type_name(m->type), b, how);
}

static void handle(sim_world_t *w, sim_server_t *v, int link, const lt_msg_t *m) {
  if (m->type != LT_MSG_HEARTBEAT && w->p.verbose) trace(w, v, link, m, "");
  if (m->type == LT_MSG_HELLO) {
    hello(w, v, link, m);
    return;
  }
  sess_t *s = sv_session(v, link);
  if (s == NULL) {
    send_error(w, v, link, LT_ESTATE, "send hello first");
    return;
  }
  switch (m->type) {
  case LT_MSG_EXECUTE:
    sv_execute(w, v, s, m);
    break;
  case LT_MSG_FETCH: {
    wfetch_t f = {.asker = -1, .link = link, .id = m->u.fetch.id, .release = m->u.fetch.release};
    if (m->u.fetch.id.client != s->client) {
      sval_t fake = {.state = V_FAILED, .status = LT_EAUTH};
      snprintf(fake.err, sizeof fake.err, "not a value of this session");
      sv_answer(w, v, &f, &fake);
    } else if (sv_find(v, f.id) == NULL) {
      sv_answer(w, v, &f, NULL);
    } else {
      sv_wait_fetch(w, v, f);
    }
    break;
  }
  case LT_MSG_RELEASE:
    for (uint32_t i = 0; i < m->u.release.nids; i++)
      if (m->u.release.ids[i].client == s->client) sv_release(v, m->u.release.ids[i]);
    break;
  case LT_MSG_CANCEL:
    for (uint32_t i = 0; i < m->u.cancel.nseqs; i++)
      for (stask_t *t = v->tasks; t != NULL; t = t->next)
        if (t->link == link && t->seq == m->u.cancel.seqs[i] && t->state != T_RUNNING) {
          sv_fail_all(w, v, t, LT_ECANCELED, "canceled");
          break;
        }
    break;
  case LT_MSG_HEARTBEAT: {
    lt_msg_t h = {.type = LT_MSG_HEARTBEAT};
    h.u.heartbeat.seq = m->u.heartbeat.seq;
    h.u.heartbeat.now_us = (uint64_t)w->now;
    h.u.heartbeat.dones = s->dones;
    sv_send(w, v, link, &h, NULL);
    break;
  }
  case LT_MSG_BYE:
    drop_session(w, v, s);
    break;
  case LT_MSG_LOST: {
    sval_t *e, *tmp;
    v->in_recheck = 1; /* what the failures wake is looked at after them */
    for (uint32_t i = 0; i < m->u.lost.nholders; i++) {
      int h = sv_server_of(w, m->u.lost.holders[i]);
      HASH_ITER(hh, v->store, e, tmp) {
        if (e->copy && e->holder == h && e->state == V_PENDING)
          sv_fail(w, v, e, LT_ELOST, "the holder was lost");
      }
    }
    v->in_recheck = 0;
    sv_recheck(w, v);
    break;
  }
  default: /* PROGRAM: the kernels are the world's; MODULE: none are shipped */
    break;
  }
}

static void hold(sim_server_t *v, int link, sim_msg_t *m) {
  struct held *h = malloc(sizeof *h);
  *h = (struct held){link, m, NULL};
  if (v->held_tail != NULL)
    v->held_tail->next = h;
  else
    v->held = h;
  v->held_tail = h;
}

/* receive decodes message m (taken) of link l and handles it. */
static void receive(sim_world_t *w, sim_server_t *v, sim_link_t *l, sim_msg_t *m) {
  lt_msg_t msg;
  lt_codec_limits_t lim;
  lt__codec_limits_default(&lim);
  if (lt__msg_decode(&msg, m->frames, m->n, &lim) != LT_OK) {
    sim_violation(w, "server %d: the client sent a message the codec refuses", v->idx);
  } else if (!l->open) { /* its link was closed while the message waited for the process */
    if (w->p.verbose) trace(w, v, l->id, &msg, " (dropped: its link is closed)");
    lt__msg_clear(&msg);
  } else {
    handle(w, v, l->id, &msg);
    lt__msg_clear(&msg);
  }
  sim_msg_free(m);
}

void sim_server_deliver(sim_world_t *w, int srv, sim_link_t *l, sim_msg_t *m) {
  sim_server_t *v = sv_of(w, srv);
  if (w->tearing || !l->open) {
    sim_msg_free(m);
    return;
  }
  if (!v->up || w->now < v->paused_until || v->held != NULL) {
    hold(v, l->id, m); /* the process that answers next reads it, in order */
    return;
  }
  receive(w, v, l, m);
}

/* run_held reads what waited for the process, in order. */
static void run_held(sim_world_t *w, sim_server_t *v) {
  while (v->up && w->now >= v->paused_until && v->held != NULL) {
    struct held *h = v->held;
    v->held = h->next;
    if (v->held == NULL) v->held_tail = NULL;
    sim_link_t *l = w->links[h->link];
    sim_msg_t *m = h->m;
    free(h);
    receive(w, v, l, m);
  }
}

/* ---- the process -------------------------------------------------------------------------- */

int sim_server_new(sim_world_t *w, int idx, double speed, uint32_t threads) {
  sim_server_t *v = calloc(1, sizeof *v);
  if (v == NULL) return LT_ENOMEM;
  v->idx = idx;
  v->speed = speed;
  v->threads = threads;
  w->srv[idx] = v;
  v->up = 1;
  v->gen = 1;
  v->incarnation = sim_rand(&w->rng) | 1;
  return LT_OK;
}

static void clear(sim_server_t *v) {
  while (v->sessions != NULL) {
    sess_t *s = v->sessions;
    v->sessions = s->next;
    free(s);
  }
  while (v->tasks != NULL) {
    stask_t *t = v->tasks;
    v->tasks = t->next;
    sv_task_free(t);
  }
  while (v->waits != NULL) {
    wfetch_t *f = v->waits;
    v->waits = f->next;
    free(f);
  }
  sval_t *e, *tmp;
  HASH_ITER(hh, v->store, e, tmp) sv_drop(v, e);
  v->running = 0;
  v->ndoomed = 0;
}

void sim_server_free(sim_server_t *v) {
  if (v == NULL) return;
  clear(v);
  free(v->crashed);
  while (v->held != NULL) {
    struct held *h = v->held;
    v->held = h->next;
    sim_msg_free(h->m);
    free(h);
  }
  free(v);
}

void sim_server_kill(sim_world_t *w, int srv) {
  sim_server_t *v = sv_of(w, srv);
  if (!v->up) return;
  clear(v);
  v->up = 0;
  v->stopping = v->exiting = 0;
  v->paused_until = 0;
  v->gen++;
  sim_link_lost(w, srv);
}

void sim_server_restart(sim_world_t *w, int srv) {
  sim_server_t *v = sv_of(w, srv);
  if (v->up) return;
  v->up = 1;
  v->gen++;
  v->incarnation = sim_rand(&w->rng) | 1;
  run_held(w, v);
}

void sim_server_stop(sim_world_t *w, int srv) {
  sim_server_t *v = sv_of(w, srv);
  if (!v->up || v->stopping) return;
  v->stopping = 1;
  for (sess_t *s = v->sessions; s != NULL; s = s->next) {
    lt_msg_t h = {.type = LT_MSG_HEARTBEAT};
    h.u.heartbeat.dones = s->dones;
    sv_send(w, v, s->link, &h, NULL);
  }
  v->in_recheck = 1; /* what the failures wake is looked at after them */
  for (stask_t *t = v->tasks; t != NULL;) {
    stask_t *next = t->next;
    if (t->state != T_RUNNING) sv_fail_all(w, v, t, LT_ESHUTDOWN, "the server is shutting down");
    t = next;
  }
  v->in_recheck = 0;
  while (v->waits != NULL) {
    wfetch_t *f = v->waits;
    v->waits = f->next;
    sval_t down = {.state = V_FAILED, .status = LT_ESHUTDOWN};
    snprintf(down.err, sizeof down.err, "the server is shutting down");
    sv_answer(w, v, f, &down);
    free(f);
  }
  sv_recheck(w, v);
}

static void on_supervised(sim_world_t *w, void *arg) {
  uint64_t *a = arg;
  if (!w->tearing && !sim_server_up(w, (int)a[0]) && sv_of(w, (int)a[0])->gen == a[1]) {
    sim_note(w, "server %d: its supervisor starts it again", (int)a[0]);
    sim_server_restart(w, (int)a[0]);
  }
  free(a);
}

void sim_server_crash(sim_world_t *w, int srv, uint64_t culprit) {
  sim_server_t *v = sv_of(w, srv);
  free(v->crashed);
  v->crashed = NULL;
  v->ncrashed = 0;
  for (stask_t *t = v->tasks; t != NULL; t = t->next)
    for (uint32_t i = 0; t->state == T_RUNNING && t->link >= 0 && i < (t->pack > 1 ? t->pack : 1);
         i++) {
      v->crashed = realloc(v->crashed, (v->ncrashed + 1) * sizeof *v->crashed);
      v->crashed[v->ncrashed++] = t->outs[i].seq;
    }
  v->crash_culprit = culprit;
  v->crashed_incarnation = v->incarnation;
  sim_note(w, "server %d: crashed (SIGSEGV) running %llu, %u of the client's running", srv,
           ID(culprit), v->ncrashed);
  sim_server_kill(w, srv);
  uint64_t *a = malloc(2 * sizeof *a);
  a[0] = (uint64_t)srv;
  a[1] = v->gen;
  sim_at(w, w->now + 200 + (int64_t)sim_below(&w->rng, 5000), on_supervised, a);
}

static void on_resume(sim_world_t *w, void *arg) {
  uint64_t *a = arg;
  sim_server_t *v = sv_of(w, (int)a[0]);
  if (v->up && v->gen == a[1] && !w->tearing && w->now >= v->paused_until) {
    run_held(w, v);
    sv_recheck(w, v);
  }
  free(a);
}

void sim_server_pause(sim_world_t *w, int srv, int64_t until) {
  sim_server_t *v = sv_of(w, srv);
  if (!v->up) return;
  v->paused_until = until;
  uint64_t *a = malloc(2 * sizeof *a);
  a[0] = (uint64_t)srv;
  a[1] = v->gen;
  sim_at(w, until, on_resume, a);
}

int sim_server_up(const sim_world_t *w, int srv) {
  return w->srv[srv]->up;
}

double sim_server_speed(const sim_world_t *w, int srv) {
  return w->srv[srv]->speed;
}

int sim_server_stopping(const sim_world_t *w, int srv) {
  return w->srv[srv]->up && w->srv[srv]->stopping;
}

size_t sim_server_values(const sim_world_t *w, int srv, char *first, size_t len) {
  const sim_server_t *v = w->srv[srv];
  size_t n = 0, at = 0;
  const sval_t *e, *tmp;
  HASH_ITER(hh, v->store, e, tmp) {
    if (e->copy || e->id.client != w->client_id) continue;
    if (n++ < 4 && first != NULL && at < len)
      at += (size_t)snprintf(first + at, len - at, "%s%llu.%llu (%s)", n > 1 ? ", " : "",
                             ID(e->id.seq), PART(e->id.seq),
                             e->state == V_SET       ? "set"
                             : e->state == V_PENDING ? "pending"
                                                     : "failed");
  }
  return n;
}

int sim_server_holds(const sim_world_t *w, int srv) {
  return w->srv[srv]->up && w->srv[srv]->held != NULL;
}

size_t sim_server_tasks(const sim_world_t *w, int srv) {
  size_t n = 0;
  for (const stask_t *t = w->srv[srv]->tasks; t != NULL; t = t->next)
    n++;
  return n;
}
