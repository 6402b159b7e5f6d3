/* peer.c: the asking side of server-to-server lazy binding (see peer.h). Each link is a
 * DEALER connected to a holder's ROUTER and watched by the zmq_uv glue; it opens with a
 * HELLO (this server's random peer id, name LT_PEER_NAME_PREFIX + own endpoint) and then
 * carries FETCH, RELEASE and HEARTBEAT one way and WELCOME, VALUE, HEARTBEAT and ERROR the
 * other. A fetched value lands in the local store under its own id, kept in the received
 * message itself (no copy: copying a large value on this thread would hold up every
 * heartbeat for as long as it took); what the network sends is checked first (only
 * asked-for ids, a payload frame for a value, a negative status for an error). A timer
 * heartbeats links with pending fetches, fails a fetch with LT_ELOST when nothing about its
 * id came for --fetch-timeout and all of a link's when the peer stays silent that long, and
 * drops links not welcomed in time. Loop thread only; it never touches tasks, only the
 * store, whose waiters move them on. */
#include "peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "log.h"
#include "oid.h"
#include "shm.h"

/* Parts of a message from a peer: a VALUE has two (header, value); more are dropped. */
#define PEER_MAX_PARTS 8
#define PEER_SNDHWM    100000

/* One fetch under way: the local store holds a pending entry for `id` meanwhile. */
typedef struct pfetch {
  UT_hash_handle hh;
  bool oom;
  lt_oid_t id;        /* key */
  uint64_t secret;    /* the secret of the session it is fetched for (the holder checks it) */
  bool asked_release; /* the FETCH asked the holder to drop the value once sent */
  bool want_release;  /* a last reader came later: send a RELEASE once the value is here */
  bool unsent;        /* the FETCH did not go out (send queue full): retried on every tick */
  uint64_t since;     /* uv_now when it was made */
  uint64_t alive;     /* uv_now of the request, or of the holder's last "still pending" about
                         it: the fetch fails --fetch-timeout after it */
} pfetch_t;

/* A copy fetched into the local store (pending while its fetch is under way) and the
 * local readers that hold on to it. */
typedef struct lt_copy {
  UT_hash_handle hh;
  bool oom;
  lt_oid_t id; /* key */
  uint32_t readers;
} lt_copy_t;

struct lt_peer {
  UT_hash_handle hh;
  bool oom;
  char ep[LT_PEER_EP_MAX + 1]; /* key: the holder's endpoint as instructions name it */
  lt_server_t *srv;
  void *sock;
  lt_zuv_t zuv;
  pfetch_t *fetches; /* uthash by id */
  uint32_t nfetches;
  uint64_t heard;    /* uv_now of its last sign of life (an echo of one of our heartbeats, a
                        value we asked for), or of the start of the current wait */
  uint64_t hello_at; /* uv_now before which a new hello waits (backoff), or 0 */
  uint64_t backoff;  /* ms between hellos now: doubles at each re-greeting, reset by a value */
  bool hello_due;    /* a re-greeting waits for hello_at */
  uint64_t hb_sent;  /* uv_now of our last heartbeat to it */
  uint64_t used;     /* uv_now when it last had a fetch added or answered (idle eviction) */
  uint64_t hb_seq;
  uint64_t opened;    /* uv_now when the link was opened */
  bool welcomed;      /* the holder answered our hello with a welcome: a Lithium server */
  bool same_host;     /* its welcome named this host: large values should come by memfd */
  bool hold;          /* new fetches wait for the unix link to attach or fail (shm_attach) */
  lt_shm_link_t *shm; /* the unix link values come on by memfd (shm.h), or NULL */
};

/* An endpoint whose link got no welcome in time (not a Lithium server, or none there): not
 * connected to again before `until`; the wait doubles at each new failure. */
typedef struct lt_refused {
  UT_hash_handle hh;
  bool oom;
  char ep[LT_PEER_EP_MAX + 1]; /* key */
  uint64_t until;
  uint64_t backoff;
} lt_refused_t;

/* A link has min(--fetch-timeout, WELCOME_MS) to be welcomed. An endpoint that did not
 * welcome is left alone for REFUSE_MIN_MS, then twice as long after each new failure, up to
 * REFUSE_MAX_MS; a welcome forgets it. The first wait is short: nothing listening there
 * looks the same as a non-Lithium listener, and a holder whose worker was restarted on the
 * same endpoint must be reachable again soon. At most REFUSED_MAX endpoints are remembered
 * (the oldest is forgotten).
 * libzmq reconnects a link whose connection closed after a third of its
 * welcome time, between RECONNECT_MIN_MS (libzmq's default) and RECONNECT_MAX_MS: a holder
 * restarting on its endpoint gets a few chances within the welcome time, and a listener
 * that closes every connection at once sees at most about four connects per try. */
#define WELCOME_MS       5000
#define REFUSE_MIN_MS    1000
#define REFUSE_MAX_MS    600000
#define REFUSED_MAX      1024
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 1000

bool lt__peer_remote(const lt_server_t *srv, const char *holder) {
  return holder[0] != '\0' && strcmp(holder, srv->endpoint) != 0;
}

bool lt__peer_endpoint_ok(const char *ep) {
  size_t n = strnlen(ep, LT_PEER_EP_MAX + 1);
  return n <= LT_PEER_EP_MAX && n > 6 && strncmp(ep, "tcp://", 6) == 0;
}

bool lt__peer_name(const char *name) {
  return name != NULL && strncmp(name, LT_PEER_NAME_PREFIX, sizeof LT_PEER_NAME_PREFIX - 1) == 0;
}

bool lt__peer_session(const lt_session_t *s) {
  return lt__peer_name(s->name);
}

/* ---------------------------------------------------------------------------------------
 * Sending. */

static void free_hdr(void *data, void *hint) {
  (void)hint;
  free(data);
}

/* peer_send sends the header-only message `m` on the link; LT_OK or the error (logged). */
static int peer_send(lt_peer_t *p, const lt_msg_t *m) {
  void *hdr;
  size_t len;
  int rc = lt__msg_encode(m, &hdr, &len);
  if (rc != LT_OK) {
    lt__log(LT_LOG_ERROR, "peer %s: cannot encode a %s message: %s", p->ep,
            lt__msg_type_name(m->type), lt_strerror(rc));
    return rc;
  }
  zmq_msg_t part;
  if (zmq_msg_init_data(&part, hdr, len, free_hdr, NULL) != 0) {
    free(hdr);
    return LT_ENOMEM;
  }
  return lt__zuv_send(&p->zuv, &part, 1);
}

static int send_hello(lt_peer_t *p) {
  char name[sizeof LT_PEER_NAME_PREFIX + sizeof p->srv->endpoint];
  snprintf(name, sizeof name, "%s%s", LT_PEER_NAME_PREFIX, p->srv->endpoint);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_HELLO;
  m.u.hello.version = LT_PROTO_VERSION;
  m.u.hello.client_id = p->srv->peer_id;
  m.u.hello.secret = p->srv->peer_secret;
  m.u.hello.name = name;
  return peer_send(p, &m);
}

/* Fetches and releases carry the secret of the session they are made for: the holder
 * serves a peer only the values of a session whose secret it shows. */
static int send_fetch(lt_peer_t *p, lt_oid_t id, bool release, uint64_t secret) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_FETCH;
  m.u.fetch.id = id;
  m.u.fetch.release = release;
  m.u.fetch.secret = secret;
  m.u.fetch.max_frame = p->srv->lim.max_frame;
  m.u.fetch.shm = lt__shm_link_ready(p->shm);
  return peer_send(p, &m);
}

static void send_release(lt_peer_t *p, lt_oid_t id, uint64_t secret) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_RELEASE;
  m.u.release.nids = 1;
  m.u.release.ids = &id;
  m.u.release.secret = secret;
  peer_send(p, &m);
}

static void send_heartbeat(lt_peer_t *p) {
  p->hb_sent = uv_now(&p->srv->loop);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_HEARTBEAT;
  m.u.heartbeat.seq = ++p->hb_seq;
  peer_send(p, &m);
}

/* ---------------------------------------------------------------------------------------
 * Fetches and their local entries. */

/* local_pending tells whether the local store waits for `id` (nobody released it). */
static bool local_pending(lt_server_t *srv, lt_oid_t id) {
  return lt__store_get(srv->store, id, NULL, NULL, NULL) == LT_EAGAIN;
}

/* local_fail fails the pending local entry of `id`, waking its readers with the error,
 * then drops it: a later reader fetches again instead of reading a stale failure. */
static void local_fail(lt_server_t *srv, lt_oid_t id, int status, const char *msg) {
  if (!local_pending(srv, id)) return;
  lt__store_fail(srv->store, id, status, msg);
  lt__store_release(srv->store, id);
}

static pfetch_t *fetch_find(lt_peer_t *p, lt_oid_t id) {
  pfetch_t *f = NULL;
  HASH_FIND(hh, p->fetches, &id, sizeof id, f);
  return f;
}

static void fetch_del(lt_peer_t *p, pfetch_t *f) {
  HASH_DEL(p->fetches, f);
  p->nfetches--;
  p->used = uv_now(&p->srv->loop);
  free(f);
}

static lt_copy_t *copy_find(lt_server_t *srv, lt_oid_t id) {
  lt_copy_t *c = NULL;
  HASH_FIND(hh, srv->copies, &id, sizeof id, c);
  return c;
}

/* copy_drop_unused forgets a copy record nobody reads (one made for a fetch that failed to
 * start). */
static void copy_drop_unused(lt_server_t *srv, lt_copy_t *c) {
  if (c->readers > 0) return;
  HASH_DEL(srv->copies, c);
  free(c);
}

/* ---------------------------------------------------------------------------------------
 * Links. */

static void on_link_closed(lt_zuv_t *z) {
  lt_peer_t *p = z->data;
  zmq_close(p->sock);
  free(p);
}

/* link_drop takes the link out of the table, fails its pending fetches with `status` and
 * `why`, and closes it; its memory goes when the loop has closed its handles. */
static void link_drop(lt_peer_t *p, int status, const char *why) {
  lt_server_t *srv = p->srv;
  HASH_DEL(srv->peers, p);
  srv->npeers--;
  /* Detach the fetches first: waking readers must not see a half-dropped link. */
  pfetch_t *list = p->fetches, *f, *tmp;
  p->fetches = NULL;
  if (p->nfetches > 0)
    lt__log(LT_LOG_WARN, "peer %s: %u fetches failed: %s", p->ep, p->nfetches, why);
  p->nfetches = 0;
  HASH_ITER(hh, list, f, tmp) {
    HASH_DEL(list, f);
    local_fail(srv, f->id, status, why);
    free(f);
  }
  lt__shm_link_close(p->shm);
  p->shm = NULL;
  lt__zuv_close(&p->zuv, on_link_closed);
}

/* make_room closes the least recently used idle link when the table is full; false when
 * every link has fetches pending. */
static bool make_room(lt_server_t *srv) {
  if (srv->npeers < srv->max_peers) return true;
  lt_peer_t *p, *tmp, *lru = NULL;
  HASH_ITER(hh, srv->peers, p, tmp) {
    if (p->nfetches == 0 && (lru == NULL || p->used < lru->used)) lru = p;
  }
  if (lru == NULL) return false;
  lt__log(LT_LOG_DEBUG, "peer %s: idle link closed to make room", lru->ep);
  link_drop(lru, LT_ESHUTDOWN, "link closed");
  return true;
}

static void on_peer_message(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated);
static void on_tick(uv_timer_t *h);

static int welcome_ms(const lt_server_t *srv) {
  return (int)(srv->fetch_ms < WELCOME_MS ? srv->fetch_ms : WELCOME_MS);
}

static lt_refused_t *refused_find(lt_server_t *srv, const char *ep) {
  lt_refused_t *r = NULL;
  HASH_FIND(hh, srv->refused, ep, strlen(ep), r);
  return r;
}

/* refused tells whether `ep` is left alone for now (with the reason in err). */
static bool refused(lt_server_t *srv, const char *ep, char *err, size_t errlen) {
  lt_refused_t *r = refused_find(srv, ep);
  uint64_t now = uv_now(&srv->loop);
  if (r == NULL || now >= r->until) return false;
  snprintf(err, errlen,
           "cannot reach holder %s: unreachable or not a Lithium server (not tried again for "
           "%" PRIu64 " ms)",
           ep, r->until - now);
  return true;
}

/* refuse remembers that `ep` did not welcome us: left alone for a while, longer each time. */
static void refuse(lt_server_t *srv, const char *ep) {
  lt_refused_t *r = refused_find(srv, ep);
  if (r == NULL) {
    if (HASH_COUNT(srv->refused) >= REFUSED_MAX) {
      lt_refused_t *o = srv->refused; /* the oldest: uthash keeps the order of insertion */
      HASH_DEL(srv->refused, o);
      free(o);
    }
    if ((r = calloc(1, sizeof *r)) == NULL) return;
    snprintf(r->ep, sizeof r->ep, "%s", ep);
    HASH_ADD(hh, srv->refused, ep, strlen(r->ep), r);
    if (r->oom) {
      free(r);
      return;
    }
  }
  r->backoff = r->backoff == 0                   ? REFUSE_MIN_MS
               : r->backoff >= REFUSE_MAX_MS / 2 ? REFUSE_MAX_MS
                                                 : 2 * r->backoff;
  r->until = uv_now(&srv->loop) + r->backoff;
  lt__log_limited(LT_LOG_WARN,
                  "peer %s: no welcome within %d ms (unreachable, or not a Lithium server): not "
                  "tried again for %" PRIu64 " ms",
                  ep, welcome_ms(srv), r->backoff);
}

/* welcomed marks link p as a Lithium server's: its endpoint is no longer refused. */
static void welcomed(lt_peer_t *p) {
  p->welcomed = true;
  lt_refused_t *r = refused_find(p->srv, p->ep);
  if (r == NULL) return;
  HASH_DEL(p->srv->refused, r);
  free(r);
}

/* link_open opens a link to holder `ep`. Under CURVE (this server has a key pair and the
 * session announced the holder's public key `key`) the link authenticates with the
 * server's own key pair: the holder allows it when it shares the pair or lists its key. */
static int link_open(lt_server_t *srv, const char *ep, const char *key, lt_peer_t **out, char *err,
                     size_t errlen) {
  *out = NULL;
  if (srv->closing) {
    /* Shutting down: every link was closed once (lt__peer_close_all), and one opened now
     * would stay open and hold zmq_ctx_term for ever. Readers failed by that close may ask
     * for a link again: they fail instead. */
    snprintf(err, errlen, "cannot reach holder %s: server shutting down", ep);
    return LT_ESHUTDOWN;
  }
  if (refused(srv, ep, err, errlen)) return LT_ELOST;
  if (!make_room(srv)) {
    /* Waiting for room could last as long as the other holders' values take: the reader
     * fails now instead, and the client recomputes or re-dispatches it. */
    snprintf(err, errlen, "cannot reach holder %s: all %u peer links have fetches pending", ep,
             srv->max_peers);
    return LT_ELOST;
  }
  lt_peer_t *p = calloc(1, sizeof *p);
  if (p == NULL) {
    snprintf(err, errlen, "out of memory for a peer link");
    return LT_ENOMEM;
  }
  snprintf(p->ep, sizeof p->ep, "%s", ep);
  p->srv = srv;
  int64_t maxmsg = (int64_t)srv->lim.max_frame;
  int zero = 0, hwm = PEER_SNDHWM, on = 1, handshake = welcome_ms(srv);
  int reconnect = handshake / 3 < RECONNECT_MIN_MS   ? RECONNECT_MIN_MS
                  : handshake / 3 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
                                                     : handshake / 3;
  if ((p->sock = zmq_socket(srv->zctx, ZMQ_DEALER)) == NULL ||
      zmq_setsockopt(p->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_setsockopt(p->sock, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect) != 0 ||
      zmq_setsockopt(p->sock, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake) != 0 ||
      zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0 ||
      zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
      (strchr(ep, '[') != NULL && zmq_setsockopt(p->sock, ZMQ_IPV6, &on, sizeof on) != 0) ||
      (srv->curve && key != NULL && key[0] != '\0' &&
       (zmq_setsockopt(p->sock, ZMQ_CURVE_SERVERKEY, key, 40) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_CURVE_PUBLICKEY, srv->curve_pub, 40) != 0 ||
        zmq_setsockopt(p->sock, ZMQ_CURVE_SECRETKEY, srv->curve_sec, 40) != 0))) {
    snprintf(err, errlen, "cannot make a socket for peer %s: %s", ep, zmq_strerror(zmq_errno()));
    if (p->sock != NULL) zmq_close(p->sock);
    free(p);
    return LT_EIO;
  }
  if (zmq_connect(p->sock, ep) != 0) {
    snprintf(err, errlen, "cannot connect to peer %s: %s", ep, zmq_strerror(zmq_errno()));
    zmq_close(p->sock);
    free(p);
    return LT_EINVAL;
  }
  int rc = lt__zuv_start(&p->zuv, &srv->loop, p->sock, PEER_MAX_PARTS, on_peer_message, p);
  if (rc != LT_OK) {
    snprintf(err, errlen, "cannot watch the socket of peer %s: %s", ep, lt_strerror(rc));
    zmq_close(p->sock);
    free(p);
    return rc;
  }
  HASH_ADD(hh, srv->peers, ep, strlen(p->ep), p);
  if (p->oom) {
    snprintf(err, errlen, "out of memory for a peer link");
    lt__zuv_close(&p->zuv, on_link_closed);
    return LT_ENOMEM;
  }
  srv->npeers++;
  p->heard = p->used = p->opened = uv_now(&srv->loop);
  p->hold = lt__shm_same_host(srv)[0] != '\0';
  if ((rc = send_hello(p)) != LT_OK) {
    snprintf(err, errlen, "cannot say hello to peer %s: %s", ep, lt_strerror(rc));
    link_drop(p, rc, err);
    return rc == LT_EINVAL ? LT_EIO : rc;
  }
  if (!uv_is_active((uv_handle_t *)&srv->peer_timer)) {
    uint64_t every = srv->fetch_ms / 4;
    if (every > 1000) every = 1000;
    if (every < 5) every = 5;
    uv_timer_start(&srv->peer_timer, on_tick, every, every);
  }
  lt__log(LT_LOG_INFO, "peer %s: link opened", ep);
  *out = p;
  return LT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Receiving. */

/* land stores fetched value `v` (its reference is taken; NULL: none, its readers left or it
 * failed) as the local copy of `id`. */
static void land(lt_peer_t *p, lt_oid_t id, lt_value_t *v) {
  char ids[48];
  if (v == NULL) {
    if (!local_pending(p->srv, id))
      lt__log(LT_LOG_DEBUG, "peer %s: value %s came after its readers left", p->ep,
              lt__oid_format(id, ids, sizeof ids));
    return;
  }
  lt__store_set(p->srv->store, id, v);
  lt__value_unref(v);
}

/* on_value stores the value a VALUE answer `m` carries (its payload frames are `payloads`,
 * whose contents it may take) or fails its readers with the error it carries. */
static void on_value(lt_peer_t *p, const lt_msg_t *m, zmq_msg_t *payloads) {
  lt_server_t *srv = p->srv;
  lt_oid_t id = m->u.value.id;
  char ids[48];
  pfetch_t *f = fetch_find(p, id);
  if (f == NULL) {
    lt__log(LT_LOG_DEBUG, "peer %s: dropped a value for %s, which nobody asked for", p->ep,
            lt__oid_format(id, ids, sizeof ids));
    return;
  }
  /* An answer to what we asked: a sign of life. "Still pending" (LT_EAGAIN, sent by the
   * holder at our heartbeats while the value's producer has not finished) keeps this fetch
   * waiting another --fetch-timeout; nothing else does. */
  p->heard = uv_now(&srv->loop);
  if (m->u.value.status == LT_EAGAIN) {
    f->alive = p->heard;
    return;
  }
  p->backoff = 0;
  bool release = f->want_release;
  uint64_t secret = f->secret;
  fetch_del(p, f);
  int status = m->u.value.status;
  char msg[LT_KERNEL_ERRMSG_MAX + 600];
  if (status == LT_OK && m->u.value.frame < 0) {
    status = LT_EPROTO;
    snprintf(msg, sizeof msg, "peer %s answered without the value", p->ep);
  } else if (status > 0) {
    snprintf(msg, sizeof msg, "peer %s answered with status %d", p->ep, (int)status);
    status = LT_EPROTO;
  } else if (status == LT_ENOENT) {
    snprintf(msg, sizeof msg, "no object %s on peer %s", lt__oid_format(id, ids, sizeof ids),
             p->ep);
  } else if (status != LT_OK) {
    snprintf(msg, sizeof msg, "%s",
             m->u.value.errmsg[0] != '\0' ? m->u.value.errmsg : lt_strerror(status));
  }
  if (status != LT_OK) {
    local_fail(srv, id, status, msg);
    if (release) send_release(p, id, secret); /* a failed value is dropped by its last reader */
    return;
  }
  size_t len = m->frames[m->u.value.frame].len;
  srv->peer_in += len;
  /* A large value from a holder of this host that came by ZeroMQ: the unix link was not
   * there, not attached, or the holder could not make the memfd. */
  if (p->same_host && len >= LT_SHM_MIN) srv->shm_fallbacks++;
  lt_value_t *v = NULL;
  /* The message becomes the value: m's view of the frame is not read after this. */
  if (local_pending(srv, id) && (v = lt__value_from_msg(&payloads[m->u.value.frame])) == NULL)
    local_fail(srv, id, LT_ENOMEM, "out of memory for a fetched value");
  land(p, id, v);
  if (release) send_release(p, id, secret);
}

static void retry_unsent(lt_peer_t *p, uint64_t now);

/* on_shm_state hears that the unix link of p attached or ended (or never started): fetches
 * held for it go now, with or without `shm`. */
static void on_shm_state(void *data) {
  lt_peer_t *p = data;
  if (!p->hold) return;
  p->hold = false;
  retry_unsent(p, uv_now(&p->srv->loop));
}

/* on_shm_value takes a value that came by memfd on the unix link of p (shm.h), or fails
 * the fetch of one that could not be mapped: as a lost holder's, its reader is retried. */
static void on_shm_value(void *data, lt_oid_t id, lt_value_t *v) {
  lt_peer_t *p = data, *q, *tmp;
  lt_server_t *srv = p->srv;
  pfetch_t *f = fetch_find(p, id);
  /* Two links of one holder (two spellings of its endpoint) attach in either order. */
  HASH_ITER(hh, srv->peers, q, tmp) {
    if (f != NULL) break;
    if ((f = fetch_find(q, id)) != NULL) p = q;
  }
  if (f == NULL) {
    lt__value_unref(v);
    return;
  }
  p->heard = uv_now(&srv->loop);
  p->backoff = 0;
  bool release = f->want_release;
  uint64_t secret = f->secret;
  fetch_del(p, f);
  if (v == NULL) {
    char why[LT_PEER_EP_MAX + 64];
    snprintf(why, sizeof why, "peer %s sent a memfd that failed its checks", p->ep);
    local_fail(srv, id, LT_ELOST, why);
  } else {
    srv->peer_in += v->len;
    srv->shm_in += v->len;
    srv->shm_values_in++;
    if (!local_pending(srv, id)) {
      lt__value_unref(v);
      v = NULL;
    }
    land(p, id, v);
  }
  if (release) send_release(p, id, secret);
  srv->settle(srv);
}

/* Re-greetings of one link back off from BACKOFF_MIN_MS to BACKOFF_MAX_MS while no value
 * comes: a holder that answers every fetch with "hello first" gets a few hellos a second at
 * first, then one every BACKOFF_MAX_MS, not a loop as fast as the wire. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* rehello opens a new session on the peer (it dropped ours, e.g. for idleness) and asks
 * again for everything still pending; within the backoff of the last one it is left to
 * on_tick. */
static void rehello(lt_peer_t *p) {
  uint64_t now = uv_now(&p->srv->loop);
  if (now < p->hello_at) {
    p->hello_due = true;
    return;
  }
  p->hello_due = false;
  p->backoff = p->backoff == 0                    ? BACKOFF_MIN_MS
               : p->backoff >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS
                                                  : 2 * p->backoff;
  p->hello_at = now + p->backoff;
  lt__log(LT_LOG_INFO, "peer %s: session lost, saying hello again (%u fetches pending)", p->ep,
          p->nfetches);
  send_hello(p);
  pfetch_t *f, *tmp;
  HASH_ITER(hh, p->fetches, f, tmp)
  f->unsent = send_fetch(p, f->id, f->asked_release, f->secret) != LT_OK;
}

/* shm_attach opens the unix link to a holder whose welcome named this host (again after it
 * restarted, or when the link ended). */
static void shm_attach(lt_peer_t *p, const char *same_host) {
  p->same_host = lt__shm_local(p->srv, same_host);
  if (p->same_host && !lt__shm_link_ready(p->shm)) {
    lt__shm_link_close(p->shm);
    p->shm = lt__shm_link_open(p->srv, same_host, on_shm_value, on_shm_state, p);
  }
  if (p->shm == NULL) on_shm_state(p);
}

static void on_peer_message(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated) {
  lt_peer_t *p = z->data;
  lt_server_t *srv = p->srv;
  if (srv->closing || n == 0) return;
  if (truncated) {
    lt__log(LT_LOG_DEBUG, "peer %s: dropped a message of more than %d parts", p->ep,
            PEER_MAX_PARTS);
    return;
  }
  lt_bytes_t frames[PEER_MAX_PARTS];
  for (size_t i = 0; i < n; i++)
    frames[i] = (lt_bytes_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
  lt_msg_t m;
  int rc = lt__msg_decode(&m, frames, n, &srv->lim);
  if (rc != LT_OK) {
    lt__log(LT_LOG_DEBUG, "peer %s: dropped an undecodable message: %s", p->ep, lt_strerror(rc));
    return;
  }
  char why[1000];
  switch (m.type) {
  case LT_MSG_VALUE:
    on_value(p, &m, parts + 1); /* parts[0] is the header */
    break;
  case LT_MSG_WELCOME:
    if (m.u.welcome.version != LT_PROTO_VERSION) {
      snprintf(why, sizeof why, "peer %s speaks protocol version %u, not %d", p->ep,
               m.u.welcome.version, LT_PROTO_VERSION);
      link_drop(p, LT_EVERSION, why);
    } else {
      welcomed(p);
      shm_attach(p, m.u.welcome.same_host);
    }
    break;
  case LT_MSG_HEARTBEAT:
    /* Only an echo of one of our heartbeats shows the holder alive: anything else (a stream
     * of unrelated messages) could keep a dead fetch waiting past --fetch-timeout. */
    if (m.u.heartbeat.seq != 0 && m.u.heartbeat.seq <= p->hb_seq) p->heard = uv_now(&srv->loop);
    break;
  case LT_MSG_ERROR:
    if (m.u.error.code == LT_ESTATE) {
      rehello(p);
    } else {
      snprintf(why, sizeof why, "peer %s refused a message: %.600s", p->ep, m.u.error.message);
      link_drop(p, m.u.error.code < 0 ? m.u.error.code : LT_EPROTO, why);
    }
    break;
  default:
    lt__log(LT_LOG_DEBUG, "peer %s: dropped an unexpected %s message", p->ep,
            lt__msg_type_name(m.type));
    break;
  }
  lt__msg_clear(&m);
  srv->settle(srv);
}

/* retry_unsent sends again the fetches of p that did not go out; one still unsent after
 * the fetch timeout fails its readers with LT_ELOST. */
static void retry_unsent(lt_peer_t *p, uint64_t now) {
  lt_server_t *srv = p->srv;
  if (p->hold) return;
  pfetch_t *f, *tmp;
  HASH_ITER(hh, p->fetches, f, tmp) {
    if (!f->unsent) continue;
    if (send_fetch(p, f->id, f->asked_release, f->secret) == LT_OK) {
      f->unsent = false;
      continue;
    }
    if (now - f->since < srv->fetch_ms) continue;
    char why[400];
    snprintf(why, sizeof why, "cannot send a fetch to peer %s for %" PRIu64 " ms", p->ep,
             now - f->since);
    lt_oid_t id = f->id;
    fetch_del(p, f);
    local_fail(srv, id, LT_ELOST, why);
  }
}

/* expire_fetches fails the fetches of p that have had no answer about them for the fetch
 * timeout, counted from the request or from the holder's last "still pending" about that
 * id: other messages of the holder (heartbeat echoes, errors, values of other ids) do not
 * count, so a holder that never answers what was asked cannot keep a reader parked. */
static void expire_fetches(lt_peer_t *p, uint64_t now) {
  lt_server_t *srv = p->srv;
  pfetch_t *f, *tmp;
  HASH_ITER(hh, p->fetches, f, tmp) {
    if (now - f->alive < srv->fetch_ms) continue;
    char why[LT_PEER_EP_MAX + 160], ids[48];
    snprintf(why, sizeof why, "peer %s did not answer about %s for %" PRIu64 " ms", p->ep,
             lt__oid_format(f->id, ids, sizeof ids), now - f->alive);
    lt_oid_t id = f->id;
    fetch_del(p, f);
    local_fail(srv, id, LT_ELOST, why);
  }
}

/* on_tick heartbeats links with pending fetches and drops those silent for too long, fails
 * fetches without an answer for too long, retries fetches that could not be sent, and closes
 * links idle for a fetch timeout. */
static void on_tick(uv_timer_t *h) {
  lt_server_t *srv = h->data;
  uint64_t now = uv_now(&srv->loop);
  lt_peer_t *p, *tmp;
  HASH_ITER(hh, srv->peers, p, tmp) {
    if (!p->welcomed && now - p->opened >= (uint64_t)welcome_ms(srv)) {
      char why[LT_PEER_EP_MAX + 100];
      snprintf(why, sizeof why,
               "peer %s unreachable or not a Lithium server (no welcome within %d ms)", p->ep,
               welcome_ms(srv));
      refuse(srv, p->ep);
      link_drop(p, LT_ELOST, why);
      continue;
    }
    if (p->nfetches == 0) {
      if (now - p->used >= srv->fetch_ms) {
        lt__log(LT_LOG_DEBUG, "peer %s: idle link closed", p->ep);
        link_drop(p, LT_ESHUTDOWN, "link closed");
      }
      continue;
    }
    if (p->hello_due && now >= p->hello_at) rehello(p);
    retry_unsent(p, now);
    if (p->nfetches == 0) continue;
    if (now - p->heard >= srv->fetch_ms) {
      char why[400];
      snprintf(why, sizeof why, "peer %s unreachable (silent for %" PRIu64 " ms)", p->ep,
               now - p->heard);
      link_drop(p, LT_ELOST, why);
      continue;
    }
    expire_fetches(p, now);
    if (p->nfetches > 0 && !p->hold && now - p->hb_sent >= srv->fetch_ms / 3) {
      /* By the clock of heartbeats alone: the holder tells what is still pending at each. */
      send_heartbeat(p);
    }
  }
  if (srv->npeers == 0) uv_timer_stop(h);
  srv->settle(srv);
}

/* ---------------------------------------------------------------------------------------
 * Entry points. */

void lt__peer_init(lt_server_t *srv, uint64_t fetch_ms, uint32_t max_peers) {
  uv_timer_init(&srv->loop, &srv->peer_timer);
  srv->peer_timer.data = srv;
  srv->fetch_ms = fetch_ms > 0 ? fetch_ms : 1;
  srv->max_peers = max_peers > 0 ? max_peers : LT_SRV_DEFAULT_MAX_PEERS;
  srv->peer_id = lt__oid_client_random();
  srv->peer_secret = lt__oid_client_random();
}

int lt__peer_need(lt_server_t *srv, const char *holder, const char *key, uint64_t secret,
                  lt_oid_t id, bool last, bool *counted, char *err, size_t errlen) {
  *counted = false;
  lt_peer_t *p = NULL;
  HASH_FIND(hh, srv->peers, holder, strlen(holder), p);
  pfetch_t *f = p != NULL ? fetch_find(p, id) : NULL;
  lt_copy_t *c = copy_find(srv, id);
  if (lt__store_get(srv->store, id, NULL, NULL, NULL) != LT_ENOENT) {
    if (c == NULL) {
      /* Made here: a plain local read. The client named another holder, so that one holds
       * the value too (an instruction taken back from here and run again there under the
       * same ids, whose first run here completed all the same): its last reader has the
       * holder drop it, or nothing would. */
      if (last) lt__peer_release(srv, holder, key, secret, id);
      return LT_OK;
    }
    /* A copy fetched earlier, or on its way: share it. The last reader still has the
     * holder drop the value. */
    c->readers++;
    *counted = true;
    if (last && f != NULL && !f->asked_release)
      f->want_release = true;
    else if (last && f == NULL)
      lt__peer_release(srv, holder, key, secret, id); /* on a new link: the old one closed */
    return LT_OK;
  }
  int rc;
  if (p == NULL && (rc = link_open(srv, holder, key, &p, err, errlen)) != LT_OK) return rc;
  if (c == NULL) {
    if ((c = calloc(1, sizeof *c)) == NULL) {
      snprintf(err, errlen, "out of memory for a fetch");
      return LT_ENOMEM;
    }
    c->id = id;
    HASH_ADD(hh, srv->copies, id, sizeof c->id, c);
    if (c->oom) {
      free(c);
      snprintf(err, errlen, "out of memory for a fetch");
      return LT_ENOMEM;
    }
  }
  if ((rc = lt__store_expect(srv->store, id)) != LT_OK) {
    snprintf(err, errlen, "cannot register the fetched value: %s", lt_strerror(rc));
    copy_drop_unused(srv, c);
    return rc;
  }
  if (f != NULL) {
    /* A fetch is under way already (its first readers left): its answer will do. */
    if (last && !f->asked_release) f->want_release = true;
    c->readers++;
    *counted = true;
    return LT_OK;
  }
  if ((f = calloc(1, sizeof *f)) != NULL) {
    f->id = id;
    f->secret = secret;
    f->asked_release = last;
    f->since = f->alive = uv_now(&srv->loop);
    HASH_ADD(hh, p->fetches, id, sizeof f->id, f);
    if (f->oom) {
      free(f);
      f = NULL;
    }
  }
  if (f == NULL) {
    copy_drop_unused(srv, c);
    lt__store_release(srv->store, id);
    snprintf(err, errlen, "out of memory for a fetch");
    return LT_ENOMEM;
  }
  /* The silence that makes a peer unreachable counts from the start of a wait. */
  if (p->nfetches++ == 0) p->heard = uv_now(&srv->loop);
  p->used = uv_now(&srv->loop);
  /* A new link to a holder that may be of this host: its fetches wait (ATTACH_MS at most)
   * for the welcome and the unix link, so that the first value too may come by memfd. */
  rc = p->hold ? LT_EAGAIN : send_fetch(p, id, last, secret);
  if (rc == LT_EAGAIN) {
    /* The link's send queue is full: the fetch stays, and the tick sends it later or, after
     * the fetch timeout, fails it. */
    f->unsent = true;
    rc = LT_OK;
  }
  if (rc != LT_OK) {
    fetch_del(p, f);
    copy_drop_unused(srv, c);
    lt__store_release(srv->store, id);
    snprintf(err, errlen, "cannot send a fetch to peer %s: %s", p->ep, lt_strerror(rc));
    return rc == LT_EINVAL ? LT_EIO : rc;
  }
  c->readers++;
  *counted = true;
  return LT_OK;
}

void lt__peer_unref(lt_server_t *srv, lt_oid_t id) {
  lt_copy_t *c = copy_find(srv, id);
  if (c == NULL || --c->readers > 0) return;
  HASH_DEL(srv->copies, c);
  free(c);
  /* Pending (its fetch still under way) or ready: either way nobody here reads it now; a
   * value arriving later is dropped. */
  lt__store_release(srv->store, id);
}

void lt__peer_release(lt_server_t *srv, const char *holder, const char *key, uint64_t secret,
                      lt_oid_t id) {
  lt_peer_t *p = NULL;
  HASH_FIND(hh, srv->peers, holder, strlen(holder), p);
  char err[400];
  if (p == NULL && link_open(srv, holder, key, &p, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_DEBUG, "cannot release a value on %s: %s", holder, err);
    return;
  }
  send_release(p, id, secret);
}

void lt__peer_lost(lt_server_t *srv, uint64_t client, const char *holder) {
  lt_peer_t *p = NULL;
  HASH_FIND(hh, srv->peers, holder, strlen(holder), p);
  if (p == NULL) return;
  char why[LT_PEER_EP_MAX + 32];
  snprintf(why, sizeof why, "holder %s is gone", p->ep);
  uint32_t n = 0;
  pfetch_t *f, *tmp;
  HASH_ITER(hh, p->fetches, f, tmp) {
    if (f->id.client != client) continue;
    lt_oid_t id = f->id;
    fetch_del(p, f);
    local_fail(srv, id, LT_ELOST, why);
    n++;
  }
  lt__log(LT_LOG_INFO, "peer %s: gone, says a client: %u fetches failed%s", p->ep, n,
          p->nfetches == 0 ? ", link closed" : "");
  if (p->nfetches == 0) link_drop(p, LT_ELOST, why);
}

void lt__peer_close_all(lt_server_t *srv) {
  lt_peer_t *p, *tmp;
  HASH_ITER(hh, srv->peers, p, tmp) link_drop(p, LT_ESHUTDOWN, "server shutting down");
  lt_refused_t *r, *rtmp;
  HASH_ITER(hh, srv->refused, r, rtmp) {
    HASH_DEL(srv->refused, r);
    free(r);
  }
  lt_copy_t *c, *ctmp;
  HASH_ITER(hh, srv->copies, c, ctmp) {
    HASH_DEL(srv->copies, c);
    free(c);
  }
  uv_close((uv_handle_t *)&srv->peer_timer, NULL);
}
