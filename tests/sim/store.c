/* store.c: the simulated server's store (server.h): values by id, pending (an expected
 * output, a copy being fetched), set or failed; the fetches waiting here for a value, a
 * client's (an unknown id: LT_ENOENT at once) or a peer's (refused LT_EAUTH "not a value of
 * this session" without a live session of that client and its secret, as server.c's
 * may_touch; an unknown id waits GRACE_US, then LT_ENOENT, as fetch.c); and the asking
 * side of a peer fetch (peer.c): a copy kept while its readers need it, failed LT_ELOST by
 * the client's LOST or the fetch timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "server.h"

/* ---- the store -------------------------------------------------------------------------- */

sval_t *sv_find(sim_server_t *v, lt_oid_t id) {
  sval_t *e;
  HASH_FIND(hh, v->store, &id, sizeof id, e);
  return e;
}

sval_t *sv_put(sim_server_t *v, lt_oid_t id) {
  sval_t *e = sv_find(v, id);
  if (e != NULL) return e;
  e = calloc(1, sizeof *e);
  e->id = id;
  HASH_ADD(hh, v->store, id, sizeof e->id, e);
  return e;
}

void sv_drop(sim_server_t *v, sval_t *e) {
  HASH_DEL(v->store, e);
  lt__value_unref(e->v);
  free(e);
}

void sv_release(sim_server_t *v, lt_oid_t id) {
  sval_t *e = sv_find(v, id);
  if (e != NULL && !e->copy) sv_drop(v, e);
}

/* ---- fetches waiting here ------------------------------------------------------------------ */

typedef struct peer_ans {
  int asker, holder;
  uint64_t gen;
  lt_oid_t id;
  int status;
  char err[ERRLEN];
  lt_value_t *v;
} peer_ans_t;

static void on_peer_answer(sim_world_t *w, void *arg);

/* answer answers waiting fetch f with entry e (NULL: unknown) and drops the value after a
 * last reader's fetch. */
void sv_answer(sim_world_t *w, sim_server_t *v, wfetch_t *f, sval_t *e) {
  int status = e == NULL ? LT_ENOENT : e->state == V_SET ? LT_OK : e->status;
  char err[ERRLEN] = "";
  if (e == NULL)
    snprintf(err, sizeof err, "no object %llu:%llu on this server",
             (unsigned long long)f->id.client, (unsigned long long)f->id.seq);
  else if (status != LT_OK)
    sv_set_err(err, sizeof err, e->err);
  if (f->asker < 0) {
    if (!w->links[f->link]->open || sv_session(v, f->link) == NULL) return;
    lt_msg_t m = {.type = LT_MSG_VALUE};
    m.u.value.id = f->id;
    m.u.value.status = status;
    m.u.value.errmsg = err;
    m.u.value.frame = status == LT_OK ? 0 : -1;
    lt_bytes_t fr[1];
    lt_value_t *vals[1] = {status == LT_OK ? e->v : NULL};
    if (status == LT_OK) {
      fr[0] = (lt_bytes_t){e->v->data, e->v->len};
      m.frames = fr;
      m.nframes = 1;
    }
    sv_send(w, v, f->link, &m, vals);
  } else {
    peer_ans_t *a = calloc(1, sizeof *a);
    *a = (peer_ans_t){
        .asker = f->asker, .holder = v->idx, .gen = f->asker_gen, .id = f->id, .status = status};
    sv_set_err(a->err, sizeof a->err, err);
    if (status == LT_OK) {
      a->v = lt__value_ref(e->v);
      w->peer_bytes += e->v->len;
    }
    sim_at(w, w->now + sim_delay(w), on_peer_answer, a);
  }
  if (e != NULL && f->release && !e->copy && sv_find(v, f->id) == e)
    sv_drop(v, e); /* not a refusal's */
}

/* wake answers the waiting fetches whose value is there, failed, or overdue. */
void sv_wake(sim_world_t *w, sim_server_t *v) {
  for (wfetch_t **p = &v->waits; *p != NULL;) {
    wfetch_t *f = *p;
    sval_t *e = sv_find(v, f->id);
    int ready = e != NULL ? e->state != V_PENDING : f->deadline <= w->now;
    if (!ready) {
      p = &f->next;
      continue;
    }
    *p = f->next;
    sv_answer(w, v, f, e);
    free(f);
  }
}

static void on_grace(sim_world_t *w, void *arg) {
  uint64_t *a = arg; /* server, gen */
  sim_server_t *v = sv_of(w, (int)a[0]);
  if (v->up && v->gen == a[1] && w->now >= v->paused_until) sv_wake(w, v);
  free(a);
}

void sv_wait_fetch(sim_world_t *w, sim_server_t *v, wfetch_t f) {
  wfetch_t *n = malloc(sizeof *n);
  *n = f;
  n->next = v->waits;
  v->waits = n;
  if (f.deadline > 0) {
    uint64_t *a = malloc(2 * sizeof *a);
    a[0] = (uint64_t)v->idx;
    a[1] = v->gen;
    sim_at(w, f.deadline, on_grace, a);
  }
  sv_wake(w, v);
}

/* has_client: a session of the value's client lives on the holder. */
static int has_client(const sim_server_t *v, lt_oid_t id) {
  for (const sess_t *s = v->sessions; s != NULL; s = s->next)
    if (s->client == id.client) return 1;
  return 0;
}

/* may_touch: a peer reads a value only for a live session of its client with its secret. */
static int may_touch(const sim_server_t *v, lt_oid_t id, uint64_t secret) {
  for (const sess_t *s = v->sessions; s != NULL; s = s->next)
    if (s->client == id.client && s->secret == secret && secret != 0) return 1;
  return 0;
}

typedef struct peer_ask {
  int holder, asker;
  uint64_t asker_gen;
  lt_oid_t id;
  uint64_t secret;
  int release;
} peer_ask_t;

/* on_peer_fetch: a peer's FETCH reaches its holder (the process there now). */
static void on_peer_fetch(sim_world_t *w, void *arg) {
  peer_ask_t *a = arg;
  sim_server_t *h = sv_of(w, a->holder);
  if (!h->up || w->now < h->paused_until || w->tearing) {
    /* The asker's DEALER keeps it for the process that answers there next. */
    if (!w->tearing && sim_server_up(w, a->asker) && sv_of(w, a->asker)->gen == a->asker_gen) {
      int64_t at = h->up ? h->paused_until : w->now + 100000;
      sim_at(w, at, on_peer_fetch, a);
      return;
    }
    free(a);
    return;
  }
  if (!has_client(h, a->id) || !may_touch(h, a->id, a->secret)) {
    /* No session of the client here (a restart, a session ended): its values are lost,
     * LT_ELOST (server.c, handle_fetch); a session with another secret: LT_EAUTH. */
    int lost = !has_client(h, a->id);
    sim_note(w, "server %d refused a peer fetch of %llu (%s)", a->holder,
             (unsigned long long)a->id.seq, lost ? "no session of its client" : "not its own");
    peer_ans_t *r = calloc(1, sizeof *r);
    *r = (peer_ans_t){.asker = a->asker,
                      .holder = a->holder,
                      .gen = a->asker_gen,
                      .id = a->id,
                      .status = lost ? LT_ELOST : LT_EAUTH};
    snprintf(r->err, sizeof r->err, "%s",
             lost ? "no session of its client on this server: its values are lost"
                  : "not a value of this session");
    sim_at(w, w->now + sim_delay(w), on_peer_answer, r);
  } else {
    sval_t *e = sv_find(h, a->id);
    sv_wait_fetch(w, h,
                  (wfetch_t){.asker = a->asker,
                             .asker_gen = a->asker_gen,
                             .link = -1,
                             .id = a->id,
                             .release = a->release,
                             .deadline = e == NULL ? w->now + GRACE_US : 0});
  }
  free(a);
}

/* on_peer_release: a peer's RELEASE of a value it read reaches the holder. */
static void on_peer_release(sim_world_t *w, void *arg) {
  peer_ask_t *a = arg;
  sim_server_t *h = sv_of(w, a->holder);
  if (!w->tearing && h->up && w->now < h->paused_until) {
    sim_at(w, h->paused_until, on_peer_release, a); /* read once it runs again */
    return;
  }
  if (!w->tearing && h->up && has_client(h, a->id) && may_touch(h, a->id, a->secret)) {
    sim_note(w, "server %d <- peer %d: release %llu", a->holder, a->asker,
             (unsigned long long)a->id.seq);
    sv_release(h, a->id);
  }
  free(a);
}

void sv_release_at(sim_world_t *w, sim_server_t *v, lt_oid_t id, int holder, uint64_t secret) {
  peer_ask_t *a = malloc(sizeof *a);
  *a = (peer_ask_t){holder, v->idx, v->gen, id, secret, 1};
  sim_at(w, w->now + sim_delay(w), on_peer_release, a);
}

void sv_last_reader(sim_world_t *w, sim_server_t *v, sval_t *e, uint64_t secret) {
  if (e->state == V_PENDING) {
    e->want_release = 1;
    e->secret = secret;
  } else
    sv_release_at(w, v, e->id, e->holder, secret);
}

static void on_peer_answer(sim_world_t *w, void *arg) {
  peer_ans_t *a = arg;
  sim_server_t *v = sv_of(w, a->asker);
  sval_t *e = v->up && v->gen == a->gen && !w->tearing ? sv_find(v, a->id) : NULL;
  if (e != NULL && e->copy && e->state == V_PENDING) {
    if (a->status == LT_OK) {
      if (e->want_release) sv_release_at(w, v, e->id, e->holder, e->secret);
      sv_set(w, v, e, a->v);
    } else {
      char msg[ERRLEN];
      if (a->status == LT_ENOENT)
        snprintf(msg, sizeof msg, "no object %llu on peer %s", (unsigned long long)a->id.seq,
                 w->eps[a->holder]);
      else
        sv_set_err(msg, sizeof msg, a->err);
      sv_fail(w, v, e, a->status, msg);
    }
  }
  lt__value_unref(a->v);
  free(a);
}

/* ---- values appear, fail, go ---------------------------------------------------------------- */

void sv_set(sim_world_t *w, sim_server_t *v, sval_t *e, lt_value_t *val) {
  lt__value_unref(e->v);
  e->v = lt__value_ref(val);
  e->state = V_SET;
  sv_recheck(w, v);
}

void sv_fail(sim_world_t *w, sim_server_t *v, sval_t *e, int status, const char *err) {
  lt__value_unref(e->v);
  e->v = NULL;
  e->state = V_FAILED;
  e->status = status;
  sv_set_err(e->err, sizeof e->err, err);
  sv_recheck(w, v);
}

typedef struct ftimeout {
  int srv;
  uint64_t gen;
  lt_oid_t id;
} ftimeout_t;

static void on_fetch_timeout(sim_world_t *w, void *arg) {
  ftimeout_t *f = arg;
  sim_server_t *v = sv_of(w, f->srv);
  sval_t *e = v->up && v->gen == f->gen && !w->tearing ? sv_find(v, f->id) : NULL;
  if (e != NULL && e->copy && e->state == V_PENDING)
    sv_fail(w, v, e, LT_ELOST, "the fetch from the holder timed out");
  free(f);
}

void sv_fetch_from(sim_world_t *w, sim_server_t *v, lt_oid_t id, int holder, uint64_t secret,
                   int release) {
  sval_t *e = sv_put(v, id);
  e->copy = 1;
  e->holder = holder;
  e->readers = 1;
  peer_ask_t *a = malloc(sizeof *a);
  *a = (peer_ask_t){holder, v->idx, v->gen, id, secret, release};
  sim_at(w, w->now + sim_delay(w), on_peer_fetch, a);
  ftimeout_t *ft = malloc(sizeof *ft);
  *ft = (ftimeout_t){v->idx, v->gen, id};
  sim_at(w, w->now + w->fetch_timeout_us, on_fetch_timeout, ft);
}
