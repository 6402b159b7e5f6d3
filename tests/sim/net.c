/* net.c: the simulator's clock, event queue, random source and in-memory network (sim.h).
 * The network is the dispatcher's transport door (conn.h, lt_net_ops_t): a client link is
 * what a DEALER is under ZeroMQ, with what ZeroMQ guarantees and no more: the messages of
 * one link arrive in the order sent, each after a delay drawn by the seed, and links are
 * independent. A message in flight when its server's process dies is lost; one sent while
 * the server is down waits for the process that comes back on the endpoint (a DEALER
 * reconnects by itself). Messages are encoded and decoded by the real codec both ways. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "codec.h"
#include "sim.h"

/* ---- the random source: splitmix64 ----------------------------------------------------- */

uint64_t sim_rand(sim_rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t sim_below(sim_rng_t *r, uint64_t n) {
  return n == 0 ? 0 : sim_rand(r) % n;
}

int sim_chance(sim_rng_t *r, uint64_t num, uint64_t den) {
  return sim_below(r, den) < num;
}

/* ---- the event queue: a binary heap by (time, order scheduled) ------------------------- */

typedef struct ev {
  int64_t at;
  uint64_t order;
  sim_fn fn;
  void *arg;
} ev_t;

static int ev_before(const ev_t *a, const ev_t *b) {
  return a->at < b->at || (a->at == b->at && a->order < b->order);
}

void sim_at(sim_world_t *w, int64_t at, sim_fn fn, void *arg) {
  if (w->nheap == w->capheap) {
    size_t cap = w->capheap ? w->capheap * 2 : 256;
    ev_t *h = realloc(w->heap, cap * sizeof *h);
    if (h == NULL) abort(); /* the simulator has no use for a run without memory */
    w->heap = h;
    w->capheap = cap;
  }
  ev_t *h = w->heap;
  size_t i = w->nheap++;
  h[i] = (ev_t){at < w->now ? w->now : at, w->next_ev++, fn, arg};
  while (i > 0 && ev_before(&h[i], &h[(i - 1) / 2])) {
    ev_t t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

int64_t sim_next_at(const sim_world_t *w) {
  return w->nheap > 0 ? ((const ev_t *)w->heap)[0].at : INT64_MAX;
}

static ev_t pop(sim_world_t *w) {
  ev_t *h = w->heap;
  ev_t top = h[0];
  h[0] = h[--w->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < w->nheap && ev_before(&h[l], &h[m])) m = l;
    if (r < w->nheap && ev_before(&h[r], &h[m])) m = r;
    if (m == i) break;
    ev_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
  return top;
}

size_t sim_run_due(sim_world_t *w) {
  size_t n = 0;
  while ((!w->violated || w->tearing) && w->nheap > 0 && ((ev_t *)w->heap)[0].at <= w->now) {
    ev_t e = pop(w);
    e.fn(w, e.arg);
    n++;
    w->events++;
  }
  return n;
}

void sim_events_free(sim_world_t *w) {
  /* An event's arg is the world's or a message: run none of them, free what they own. */
  ev_t *h = w->heap;
  for (size_t i = 0; i < w->nheap; i++)
    if (h[i].fn == NULL) free(h[i].arg);
  free(w->heap);
  w->heap = NULL;
  w->nheap = w->capheap = 0;
}

/* ---- messages ---------------------------------------------------------------------------- */

sim_msg_t *sim_msg_encode(const lt_msg_t *m, lt_value_t *const *values) {
  void *hdr;
  size_t hdrlen;
  if (lt__msg_encode(m, &hdr, &hdrlen) != LT_OK) abort();
  sim_msg_t *s = calloc(1, sizeof *s);
  s->n = (size_t)m->nframes + 1;
  s->frames = calloc(s->n, sizeof *s->frames);
  s->frames[0] = (lt_bytes_t){hdr, hdrlen};
  for (uint32_t i = 0; i < m->nframes; i++) {
    const void *src = values != NULL && values[i] != NULL ? values[i]->data : m->frames[i].data;
    size_t len = values != NULL && values[i] != NULL ? values[i]->len : m->frames[i].len;
    void *b = malloc(len ? len : 1);
    if (len) memcpy(b, src, len);
    s->frames[i + 1] = (lt_bytes_t){b, len};
  }
  return s;
}

void sim_msg_free(sim_msg_t *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->n; i++)
    free((void *)m->frames[i].data);
  free(m->frames);
  free(m);
}

int64_t sim_delay(sim_world_t *w) {
  /* Mostly short, sometimes long: a loaded network and a loaded host. */
  int64_t base = 20 + (int64_t)sim_below(&w->rng, 200);
  if (sim_chance(&w->rng, 1, 20)) base += (int64_t)sim_below(&w->rng, (uint64_t)w->delay_max);
  return base;
}

/* ---- the client's links ------------------------------------------------------------------ */

typedef struct to_srv {
  int link;
  sim_msg_t *m;
} to_srv_t;

static void arrive(sim_world_t *w, void *arg) {
  to_srv_t *t = arg;
  sim_link_t *l = w->links[t->link];
  w->in_transit--;
  sim_server_deliver(w, l->srv, l, t->m); /* the server judges whether it is up */
  free(t);
}

static int nopen(void *ctx, lt_conn_t *c, const char *endpoint, const lt_conn_auth_t *auth) {
  (void)auth;
  sim_world_t *w = ctx;
  int srv = -1;
  for (uint32_t i = 0; i < w->nsrv; i++)
    if (strcmp(w->eps[i], endpoint) == 0) srv = (int)i;
  if (srv < 0) return LT_EINVAL;
  if (w->nlinks == w->caplinks) {
    w->caplinks = w->caplinks ? 2 * w->caplinks : 64;
    w->links = realloc(w->links, w->caplinks * sizeof *w->links);
  }
  sim_link_t *l = calloc(1, sizeof *l);
  l->id = (int)w->nlinks;
  l->srv = srv;
  l->open = 1;
  w->links[w->nlinks++] = l;
  c->sock = l;
  return LT_OK;
}

static int nsend(lt_conn_t *c, zmq_msg_t *parts, size_t n) {
  sim_link_t *l = c->sock;
  sim_world_t *w = c->net->ctx;
  w->handled++;
  sim_msg_t *m = calloc(1, sizeof *m);
  m->n = n;
  m->frames = calloc(n, sizeof *m->frames);
  for (size_t i = 0; i < n; i++) {
    size_t len = zmq_msg_size(&parts[i]);
    void *b = malloc(len ? len : 1);
    if (len) memcpy(b, zmq_msg_data(&parts[i]), len);
    m->frames[i] = (lt_bytes_t){b, len};
    zmq_msg_close(&parts[i]);
  }
  int64_t at = w->now + sim_delay(w);
  if (at < l->last_to_srv) at = l->last_to_srv;
  l->last_to_srv = at;
  m->at = at;
  to_srv_t *t = malloc(sizeof *t);
  *t = (to_srv_t){l->id, m};
  w->in_transit++;
  sim_at(w, at, arrive, t);
  return LT_OK;
}

void sim_to_client(sim_world_t *w, sim_link_t *l, sim_msg_t *m) {
  if (!l->open) {
    sim_msg_free(m);
    return;
  }
  int64_t at = w->now + sim_delay(w);
  /* A stalled link (a mute fault) delivers nothing until it flows again, then in order. */
  if (at < w->mute_until[l->srv]) at = w->mute_until[l->srv] + (at - w->now);
  if (at < l->last_to_cli) at = l->last_to_cli;
  l->last_to_cli = at;
  m->at = at;
  m->next = NULL;
  if (l->in_tail != NULL)
    l->in_tail->next = m;
  else
    l->in = m;
  l->in_tail = m;
}

/* The part being read of the link's head message. */
static size_t reading;

static int nrecv(lt_conn_t *c, zmq_msg_t *part, int first, int *more) {
  sim_link_t *l = c->sock;
  sim_world_t *w = c->net->ctx;
  sim_msg_t *m = l->in;
  if (m == NULL || m->at > w->now) return first ? LT_EAGAIN : LT_EIO;
  if (first) reading = 0;
  w->handled += first;
  const lt_bytes_t *f = &m->frames[reading];
  zmq_msg_close(part);
  if (zmq_msg_init_size(part, f->len) != 0) return LT_EIO;
  if (f->len) memcpy(zmq_msg_data(part), f->data, f->len);
  reading++;
  *more = reading < m->n;
  if (!*more) {
    l->in = m->next;
    if (l->in == NULL) l->in_tail = NULL;
    sim_msg_free(m);
  }
  return LT_OK;
}

static int nreadable(lt_conn_t *c) {
  sim_link_t *l = c->sock;
  sim_world_t *w = c->net->ctx;
  return l->in != NULL && l->in->at <= w->now;
}

static lt_conn_event_t nmonitor(lt_conn_t *c) {
  sim_link_t *l = c->sock;
  sim_world_t *w = c->net->ctx;
  if (!l->disconnected || l->disc_at > w->now) return LT_CONN_EV_NONE;
  l->disconnected = 0;
  return LT_CONN_EV_DISCONNECTED;
}

static void drop_in(sim_link_t *l) {
  while (l->in != NULL) {
    sim_msg_t *m = l->in;
    l->in = m->next;
    sim_msg_free(m);
  }
  l->in_tail = NULL;
}

static void nclose(lt_conn_t *c, int linger_ms) {
  (void)linger_ms; /* what was sent is in flight already */
  sim_link_t *l = c->sock;
  l->open = 0;
  drop_in(l);
  c->sock = NULL;
  c->mon = NULL;
}

const lt_net_ops_t sim_net_ops = {
    .open = nopen,
    .send = nsend,
    .recv = nrecv,
    .readable = nreadable,
    .monitor = nmonitor,
    .close = nclose,
};

void sim_link_lost(sim_world_t *w, int srv) {
  for (size_t i = 0; i < w->nlinks; i++) {
    sim_link_t *l = w->links[i];
    if (l->srv != srv || !l->open || l->disconnected) continue;
    l->disconnected = 1;
    l->disc_at = w->now + sim_delay(w);
  }
}

int sim_net_quiet(const sim_world_t *w) {
  if (w->in_transit > 0) return 0;
  for (size_t i = 0; i < w->nlinks; i++)
    if (w->links[i]->open && w->links[i]->in != NULL) return 0;
  return 1;
}

void sim_links_free(sim_world_t *w) {
  for (size_t i = 0; i < w->nlinks; i++) {
    drop_in(w->links[i]);
    free(w->links[i]);
  }
  free(w->links);
  w->links = NULL;
  w->nlinks = w->caplinks = 0;
}
