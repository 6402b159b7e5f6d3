/* status.c: lt_status_query, asking servers how they are (`lithium status`): a DEALER of its
 * own a server sends one STATUS and reads one STATUS_REPLY, all servers at once, no session
 * opened; and lt_status_json, the answers as JSON. It speaks the wire through proto's codec
 * and touches no evaluator. Any thread (each call makes its own ZeroMQ context). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include <lithium.h>
#include "clock.h"
#include "codec.h"
#include "json.h"
#include "lasterr.h"

/* A server asked: its public entry, its socket and its key. */
typedef struct ask {
  lt_server_status_t *st;
  void *sock;
  int done; /* an answer came, whatever it said */
  char key[LT_KEY_LEN + 1];
} ask_t;

static char *dup_str(const char *s) {
  return strdup(s != NULL ? s : "");
}

/* set_error replaces the entry's reason for not answering. */
__attribute__((format(printf, 2, 3))) static void set_error(lt_server_status_t *st, const char *fmt,
                                                            ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  char *e = strdup(why);
  if (e == NULL) return; /* the old reason stays */
  free(st->error);
  st->error = e;
}

/* take_modules copies the reply's module list into the entry. */
static void take_modules(lt_server_status_t *st, const lt_msg_t *m) {
  uint32_t nm = m->u.status_reply.nmodules;
  st->modules = calloc(nm ? nm : 1, sizeof *st->modules);
  for (uint32_t i = 0; st->modules != NULL && i < nm; i++) {
    st->modules[i].name = dup_str(m->u.status_reply.modules[i].name);
    st->modules[i].sha256 = dup_str(m->u.status_reply.modules[i].sha256);
    st->nmodules = i + 1;
  }
}

/* take_status records a STATUS_REPLY in the entry. */
static void take_status(lt_server_status_t *st, const lt_msg_t *m) {
  st->answered = 1;
  free(st->error);
  st->error = dup_str("");
  st->name = dup_str(m->u.status_reply.server_id);
  st->version = dup_str(m->u.status_reply.version);
  st->bound = dup_str(m->u.status_reply.endpoint);
  st->protocol = m->u.status_reply.protocol;
  st->cores = m->u.status_reply.cores;
  st->sessions = m->u.status_reply.sessions;
  st->draining = m->u.status_reply.draining;
  st->uptime_ms = m->u.status_reply.uptime_ms;
  st->value_bytes = m->u.status_reply.value_bytes;
  st->speed = m->u.status_reply.speed;
  st->incarnation = m->load.incarnation;
  st->threads = m->load.threads;
  st->active = m->load.active;
  st->queued = m->load.queued;
  st->parked = m->load.parked;
  st->completed = m->load.completed;
  st->cpu = m->load.cpu;
  st->values_held = m->load.values_held;
  st->stopping = m->load.stopping;
  st->peer_in = m->load.peer_in;
  st->peer_out = m->load.peer_out;
  st->shm_in = m->load.shm_in;
  st->shm_out = m->load.shm_out;
  st->shm_fallbacks = m->load.shm_fallbacks;
  take_modules(st, m);
}

/* take_reply reads one message from the socket of `a` and records what it says. */
static void take_reply(ask_t *a) {
  zmq_msg_t parts[8];
  lt_bytes_t fr[8];
  size_t n = 0;
  int more = 1;
  while (more) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, a->sock, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&part);
      break;
    }
    more = zmq_msg_more(&part);
    if (n < 8)
      parts[n++] = part;
    else
      zmq_msg_close(&part);
  }
  for (size_t i = 0; i < n; i++)
    fr[i] = (lt_bytes_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
  lt_msg_t m;
  int rc = n > 0 ? lt__msg_decode(&m, fr, n, NULL) : LT_EPROTO;
  a->done = 1;
  if (rc != LT_OK)
    set_error(a->st, "bad answer: %s", lt_strerror(rc));
  else if (m.type == LT_MSG_ERROR)
    set_error(a->st, "refused: %s", m.u.error.message);
  else if (m.type != LT_MSG_STATUS_REPLY)
    set_error(a->st, "unexpected %s answer", lt__msg_type_name(m.type));
  else
    take_status(a->st, &m);
  if (rc == LT_OK) lt__msg_clear(&m);
  for (size_t i = 0; i < n; i++)
    zmq_msg_close(&parts[i]);
}

/* send_status opens the socket of `a` and sends it the encoded STATUS `hdr`. Returns 1 when
 * sent; else the socket is closed and the entry says why. */
static int send_status(void *ctx, ask_t *a, const char *pub, const char *sec, const void *hdr,
                       size_t hlen) {
  int zero = 0;
  a->sock = zmq_socket(ctx, ZMQ_DEALER);
  if (a->sock == NULL) return 0;
  zmq_setsockopt(a->sock, ZMQ_LINGER, &zero, sizeof zero);
  if (strchr(a->st->endpoint, '[') != NULL) {
    int on = 1;
    zmq_setsockopt(a->sock, ZMQ_IPV6, &on, sizeof on);
  }
  if (a->key[0] != '\0' && sec[0] == '\0') {
    set_error(a->st, "auth refused: the server has a CURVE key, we have none (--curve-key)");
  } else if (a->key[0] != '\0' && (zmq_setsockopt(a->sock, ZMQ_CURVE_SERVERKEY, a->key, 40) != 0 ||
                                   zmq_setsockopt(a->sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
                                   zmq_setsockopt(a->sock, ZMQ_CURVE_SECRETKEY, sec, 40) != 0)) {
    set_error(a->st, "cannot use CURVE: %s", zmq_strerror(zmq_errno()));
  } else if (zmq_connect(a->sock, a->st->endpoint) != 0) {
    set_error(a->st, "cannot connect: %s", zmq_strerror(zmq_errno()));
  } else if (zmq_send(a->sock, hdr, hlen, ZMQ_DONTWAIT) < 0) {
    set_error(a->st, "cannot send: %s", zmq_strerror(zmq_errno()));
  } else {
    return 1;
  }
  zmq_close(a->sock);
  a->sock = NULL;
  return 0;
}

/* collect polls the sockets for answers until each came or `timeout_ms` passed. */
static void collect(ask_t *asks, size_t n, int timeout_ms) {
  zmq_pollitem_t *items = calloc(n ? n : 1, sizeof *items);
  size_t *idx = calloc(n ? n : 1, sizeof *idx);
  int64_t deadline = lt__clock_ms() + timeout_ms;
  while (items != NULL && idx != NULL) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (asks[i].sock == NULL || asks[i].done) continue;
      items[k] = (zmq_pollitem_t){.socket = asks[i].sock, .events = ZMQ_POLLIN};
      idx[k++] = i;
    }
    int64_t left = deadline - lt__clock_ms();
    if (k == 0 || left <= 0) break;
    int got = zmq_poll(items, (int)k, (long)left);
    if (got < 0 && zmq_errno() != EINTR) break;
    for (size_t j = 0; got > 0 && j < k; j++)
      if (items[j].revents & ZMQ_POLLIN) take_reply(&asks[idx[j]]);
  }
  free(items);
  free(idx);
}

/* ask_all sends STATUS to every server and collects the answers. LT_EIO when no ZeroMQ
 * context can be made. */
static int ask_all(ask_t *asks, size_t n, const char *pub, const char *sec, int timeout_ms) {
  void *ctx = zmq_ctx_new();
  if (ctx == NULL) return LT_EIO;
  lt_msg_t q;
  memset(&q, 0, sizeof q);
  q.type = LT_MSG_STATUS;
  void *hdr;
  size_t hlen;
  int rc = lt__msg_encode(&q, &hdr, &hlen);
  if (rc != LT_OK) {
    zmq_ctx_term(ctx);
    return rc;
  }
  size_t waiting = 0;
  for (size_t i = 0; i < n; i++)
    waiting += (size_t)send_status(ctx, &asks[i], pub, sec, hdr, hlen);
  free(hdr);
  if (waiting > 0) collect(asks, n, timeout_ms);
  for (size_t i = 0; i < n; i++) {
    if (asks[i].sock != NULL) zmq_close(asks[i].sock);
    asks[i].sock = NULL;
  }
  zmq_ctx_term(ctx);
  return LT_OK;
}

/* add_entry appends server `ep` with public key `key` (NULL: none) to the entries unless
 * that endpoint is there already. LT_EINVAL for a NULL endpoint, LT_ENOMEM. */
static int add_entry(lt_server_status_t *st, ask_t *asks, size_t *n, const char *ep,
                     const char *key) {
  if (ep == NULL) return LT_EINVAL;
  for (size_t i = 0; i < *n; i++)
    if (strcmp(st[i].endpoint, ep) == 0) return LT_OK;
  lt_server_status_t *e = &st[*n];
  e->endpoint = strdup(ep);
  e->error = strdup("no answer");
  asks[*n] = (ask_t){.st = e};
  snprintf(asks[*n].key, sizeof asks[*n].key, "%s", key != NULL ? key : "");
  (*n)++;
  return e->endpoint != NULL && e->error != NULL ? LT_OK : LT_ENOMEM;
}

LT_API int lt_status_query(lt_server_status_t **out, size_t *nout, const char *const *endpoints,
                           const char *const *keys, size_t n, const char *pub, const char *sec,
                           int timeout_ms) {
  if (out == NULL || nout == NULL || (endpoints == NULL && n > 0))
    return lt__fail_null("lt_status_query",
                         out == NULL    ? "out"
                         : nout == NULL ? "nout"
                                        : "endpoints",
                         0);
  *out = NULL;
  *nout = 0;
  lt_server_status_t *st = calloc(n ? n : 1, sizeof *st);
  ask_t *asks = calloc(n ? n : 1, sizeof *asks);
  size_t m = 0;
  int rc = st != NULL && asks != NULL ? LT_OK : LT_ENOMEM;
  for (size_t i = 0; rc == LT_OK && i < n; i++)
    rc = add_entry(st, asks, &m, endpoints[i], keys != NULL ? keys[i] : NULL);
  if (rc == LT_OK)
    rc = ask_all(asks, m, pub != NULL ? pub : "", sec != NULL ? sec : "", timeout_ms);
  free(asks);
  if (rc != LT_OK) {
    lt_status_free(st, m);
    return lt__fail(rc, "lt_status_query: %s",
                    rc == LT_EINVAL ? "an endpoint of endpoints is NULL"
                    : rc == LT_EIO  ? "no ZeroMQ context can be made"
                                    : lt_strerror(rc));
  }
  *out = st;
  *nout = m;
  return LT_OK;
}

/* entry_json writes one entry as an object. */
static void entry_json(lt_json_t *j, const lt_server_status_t *w) {
  lt__json_object_open(j, NULL);
  lt__json_str(j, "endpoint", w->endpoint);
  lt__json_bool(j, "answered", w->answered);
  if (!w->answered) {
    lt__json_str(j, "error", w->error);
    lt__json_object_close(j);
    return;
  }
  char inc[20];
  snprintf(inc, sizeof inc, "%016llx", (unsigned long long)w->incarnation);
  lt__json_str(j, "name", w->name);
  lt__json_str(j, "version", w->version);
  lt__json_u64(j, "protocol", w->protocol);
  lt__json_str(j, "bound", w->bound);
  lt__json_str(j, "incarnation", inc);
  lt__json_u64(j, "uptime_ms", w->uptime_ms);
  lt__json_u64(j, "threads", w->threads);
  lt__json_u64(j, "cores", w->cores);
  lt__json_double(j, "speed", w->speed);
  lt__json_u64(j, "sessions", w->sessions);
  lt__json_u64(j, "draining", w->draining);
  lt__json_u64(j, "active", w->active);
  lt__json_u64(j, "queued", w->queued);
  lt__json_u64(j, "parked", w->parked);
  lt__json_u64(j, "completed", w->completed);
  lt__json_double(j, "cpu", w->cpu);
  lt__json_u64(j, "values_held", w->values_held);
  lt__json_u64(j, "value_bytes", w->value_bytes);
  lt__json_u64(j, "bytes_peer_in", w->peer_in);
  lt__json_u64(j, "bytes_peer_out", w->peer_out);
  lt__json_u64(j, "bytes_shm_in", w->shm_in);
  lt__json_u64(j, "bytes_shm_out", w->shm_out);
  lt__json_u64(j, "shm_fallbacks", w->shm_fallbacks);
  lt__json_bool(j, "stopping", w->stopping);
  lt__json_array_open(j, "modules");
  for (size_t k = 0; k < w->nmodules; k++) {
    lt__json_object_open(j, NULL);
    lt__json_str(j, "name", w->modules[k].name);
    lt__json_str(j, "sha256", w->modules[k].sha256);
    lt__json_object_close(j);
  }
  lt__json_array_close(j);
  lt__json_object_close(j);
}

LT_API char *lt_status_json(const lt_server_status_t *st, size_t n) {
  lt_json_t j = {0};
  lt__json_array_open(&j, NULL);
  for (size_t i = 0; st != NULL && i < n; i++)
    entry_json(&j, &st[i]);
  lt__json_array_close(&j);
  return lt__json_take(&j);
}

LT_API void lt_status_free(lt_server_status_t *st, size_t n) {
  for (size_t i = 0; st != NULL && i < n; i++) {
    free(st[i].endpoint);
    free(st[i].error);
    free(st[i].name);
    free(st[i].version);
    free(st[i].bound);
    for (size_t k = 0; k < st[i].nmodules; k++) {
      free(st[i].modules[k].name);
      free(st[i].modules[k].sha256);
    }
    free(st[i].modules);
  }
  free(st);
}
