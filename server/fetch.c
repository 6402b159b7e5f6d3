/* fetch.c: FETCH on the holder: a ready value is answered at once with a VALUE (zero copy),
 * a failed one with its error, and a pending one parks a waiter in the store so that the
 * VALUE goes out when the value is set (a deferred reply). A FETCH with `release` comes
 * from the value's last reader: once answered, the value leaves the store. An id this
 * server does not know is answered LT_ENOENT at once for a client; for a peer server it may
 * just not be here yet (the client dispatched its producer here and the reader there in the
 * same turn, and the reader's fetch overtook the producer), so it waits up to a grace
 * period for the id to appear: indexed by id and woken by the store's on-new callback,
 * never rescanned. Fetching from another holder is peer.c. Loop thread only. */
#include "fetch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "oid.h"
#include "peer.h"
#include "quota.h"
#include "shm.h"

/* How long a peer's fetch of an unknown id waits for the id to appear (capped at the fetch
 * timeout). */
#define GRACE_MS 2000
#define TICK_MS  50
/* Most such fetches waiting at once; beyond, an unknown id is answered at once. They are
 * indexed by id and looked at again only when their id enters the store (the store's
 * on-new callback), and in order of their deadlines by a timer: nothing is rescanned. */
#define UNKNOWN_MAX 4096
/* "Still pending" answers go to one session at most this often (ms). */
#define STILL_PENDING_MS 100

/* The peers' fetches waiting for one unknown id. */
typedef struct lt_waiting {
  UT_hash_handle hh;
  bool oom;
  lt_oid_t id;              /* key */
  lt_fetch_t *first;        /* by bnext */
  bool woken;               /* the id entered the store: on srv->woken */
  struct lt_waiting *wnext; /* in srv->woken */
} waiting_t;

/* A FETCH being answered later: parked in the store until the value is set, or (unknown)
 * waiting until its id appears or its grace period ends. */
struct lt_fetch {
  lt_waiter_t w; /* first: the waiter callback casts back */
  lt_server_t *srv;
  lt_session_t *sess;
  lt_oid_t id;
  bool release;              /* drop the value once it is sent */
  uint64_t max_frame;        /* the asker's frame limit (0: none) */
  bool shm;                  /* the asker takes a large value by memfd (shm.h) */
  bool unknown;              /* waiting for its id: in srv->unknown and in its bucket */
  uint64_t deadline;         /* unknown: uv_now after which it is answered LT_ENOENT */
  lt_fetch_t *next, *prev;   /* in sess->fetches */
  lt_fetch_t *unext, *uprev; /* in srv->unknown, by deadline */
  waiting_t *bucket;         /* unknown: the fetches of its id */
  lt_fetch_t *bnext, *bprev; /* in bucket->first */
};

static void send_value(lt_server_t *srv, lt_session_t *s, lt_oid_t id, int status,
                       const char *errmsg, lt_value_t *v) {
  char text[LT_KERNEL_ERRMSG_MAX + 128];
  snprintf(text, sizeof text, "%s", status == LT_OK ? "" : errmsg != NULL ? errmsg : "");
  lt__utf8_sanitize(text);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_VALUE;
  m.u.value.id = id;
  m.u.value.status = status;
  m.u.value.errmsg = text;
  m.u.value.frame = v != NULL ? 0 : -1;
  int rc = srv->send(srv, s->rid, s->rid_len, &m, v != NULL ? &v : NULL, v != NULL ? 1 : 0);
  if (rc == LT_OK && v != NULL && lt__peer_session(s)) srv->peer_out += v->len;
}

/* send_ok sends value `id` = `v` by ZeroMQ: a memfd transfer that could not finish. */
static void send_ok(lt_server_t *srv, lt_session_t *s, lt_oid_t id, lt_value_t *v) {
  send_value(srv, s, id, LT_OK, "", v);
}

/* reply answers fetch f with the value v (status LT_OK) or its failure, and returns true; a
 * value over the asker's frame limit is refused with LT_ETOOBIG, as sent it would cost the
 * asker its link, and reply returns false: the asker did not get it, so a release that came
 * with the fetch must not drop it (a fetch with a larger limit may still get it). */
static bool reply(lt_fetch_t *f, int status, const char *errmsg, lt_value_t *v) {
  if (status == LT_OK && f->max_frame > 0 && v->len > f->max_frame) {
    char text[400];
    snprintf(text, sizeof text,
             "a value of %zu bytes cannot move to %.200s: over its frame limit of %" PRIu64
             " bytes",
             v->len, f->sess->name, f->max_frame);
    send_value(f->srv, f->sess, f->id, LT_ETOOBIG, text, NULL);
    return false;
  }
  /* A same-host peer's: by memfd, which sends the VALUE itself if the memfd cannot go. */
  if (status == LT_OK && f->shm && lt__shm_offer(f->srv, f->sess, f->id, v, send_ok)) return true;
  send_value(f->srv, f->sess, f->id, status, errmsg, status == LT_OK ? v : NULL);
  return true;
}

static void send_unknown(lt_server_t *srv, lt_session_t *s, lt_oid_t id) {
  char ids[48], text[96];
  snprintf(text, sizeof text, "no object %s on this server", lt__oid_format(id, ids, sizeof ids));
  send_value(srv, s, id, LT_ENOENT, text, NULL);
}

static void send_over_quota(lt_server_t *srv, lt_session_t *s, lt_oid_t id) {
  char text[128];
  snprintf(text, sizeof text,
           "session over its quota of fetches waiting for their values "
           "(--max-session-fetches %u)",
           lt__quota_max_fetches(srv));
  send_value(srv, s, id, LT_EQUOTA, text, NULL);
}

static void link_session(lt_session_t *s, lt_fetch_t *f) {
  f->prev = NULL;
  f->next = s->fetches;
  if (s->fetches) s->fetches->prev = f;
  s->fetches = f;
  s->nfetches++;
}

/* bucket_drop frees bucket b once no fetch is in it, unless the woken list still has it. */
static void bucket_drop(lt_server_t *srv, waiting_t *b) {
  if (b->first != NULL || b->woken) return;
  HASH_DEL(srv->waiting, b);
  free(b);
}

/* fetch_unlink takes f off its session's list and, when unknown, off srv->unknown and its
 * bucket. */
static void fetch_unlink(lt_session_t *s, lt_fetch_t *f) {
  if (f->prev)
    f->prev->next = f->next;
  else
    s->fetches = f->next;
  if (f->next) f->next->prev = f->prev;
  f->next = f->prev = NULL;
  s->nfetches--;
  if (!f->unknown) return;
  lt_server_t *srv = f->srv;
  if (f->uprev)
    f->uprev->unext = f->unext;
  else
    srv->unknown = f->unext;
  if (f->unext)
    f->unext->uprev = f->uprev;
  else
    srv->unknown_tail = f->uprev;
  f->unext = f->uprev = NULL;
  if (f->bucket != NULL) {
    if (f->bprev)
      f->bprev->bnext = f->bnext;
    else
      f->bucket->first = f->bnext;
    if (f->bnext) f->bnext->bprev = f->bprev;
    bucket_drop(srv, f->bucket);
  }
  f->bucket = NULL;
  f->bnext = f->bprev = NULL;
  f->unknown = false;
  srv->nunknown--;
}

/* on_new_id is the store's on-new callback: the fetches waiting for `id` are looked at by
 * the next lt__fetch_retry. The store is mid-operation: only lists change here. */
static void on_new_id(lt_oid_t id, void *data) {
  lt_server_t *srv = data;
  waiting_t *b = NULL;
  HASH_FIND(hh, srv->waiting, &id, sizeof id, b);
  if (b == NULL || b->woken) return;
  b->woken = true;
  b->wnext = srv->woken;
  srv->woken = b;
}

/* wait_unknown makes f (on no list) wait for its id, behind the others by deadline. False
 * (f untouched) without memory for its bucket. */
static bool wait_unknown(lt_server_t *srv, lt_fetch_t *f) {
  waiting_t *b = NULL;
  HASH_FIND(hh, srv->waiting, &f->id, sizeof f->id, b);
  if (b == NULL) {
    if ((b = calloc(1, sizeof *b)) == NULL) return false;
    b->id = f->id;
    HASH_ADD(hh, srv->waiting, id, sizeof b->id, b);
    if (b->oom) {
      free(b);
      return false;
    }
  }
  lt__store_set_on_new(srv->store, on_new_id, srv);
  f->unknown = true;
  f->bucket = b;
  f->bprev = NULL;
  f->bnext = b->first;
  if (b->first) b->first->bprev = f;
  b->first = f;
  f->unext = NULL;
  f->uprev = srv->unknown_tail;
  if (srv->unknown_tail)
    srv->unknown_tail->unext = f;
  else
    srv->unknown = f;
  srv->unknown_tail = f;
  srv->nunknown++;
  link_session(f->sess, f);
  return true;
}

static void on_fetch_ready(lt_waiter_t *w, lt_oid_t id, int status, lt_value_t *v,
                           const char *errmsg) {
  lt_fetch_t *f = (lt_fetch_t *)w;
  fetch_unlink(f->sess, f);
  if (status != LT_OK && (errmsg == NULL || errmsg[0] == '\0')) errmsg = lt_strerror(status);
  bool answered = reply(f, status, errmsg, v);
  /* Set or failed: the last reader has it. Released or shut down: nothing left to drop.
   * Refused: the reader has nothing, the value stays. The store woke this waiter from a
   * detached list, so other readers woken by the same set still get the value. */
  if (f->release && answered && status != LT_ECANCELED && status != LT_ESHUTDOWN)
    lt__store_release(f->srv->store, id);
  free(f);
}

/* answer looks f's id up: answers at once (and frees f) when the value is ready or failed,
 * parks f in the store when it is pending. Returns false, leaving f alone, when the id is
 * unknown. f is on no list. */
static bool answer(lt_server_t *srv, lt_fetch_t *f) {
  lt_session_t *s = f->sess;
  lt_oid_t id = f->id;
  lt_value_t *v = NULL;
  const char *em = NULL;
  int rc = lt__store_get(srv->store, id, &v, srv->stopping ? NULL : &f->w, &em);
  if (rc == LT_ENOENT && em == NULL) return false;
  if (rc == LT_EAGAIN && !srv->stopping && s->nfetches < lt__quota_max_fetches(srv)) {
    link_session(s, f);
    return true;
  }
  if (rc == LT_EAGAIN && !srv->stopping) {
    lt__store_unpark(srv->store, &f->w);
    free(f);
    send_over_quota(srv, s, id);
    return true;
  }
  bool release = f->release;
  if (rc == LT_OK) {
    release = reply(f, LT_OK, "", v) && release; /* refused: the value stays */
    lt__value_unref(v);
  } else if (rc == LT_EAGAIN) {
    send_value(srv, s, id, LT_ESHUTDOWN, "server shutting down", NULL);
    free(f);
    return true;
  } else {
    /* A failed value (also one that failed with LT_ENOENT: its own input was unknown). */
    send_value(srv, s, id, rc, em != NULL && em[0] ? em : lt_strerror(rc), NULL);
  }
  free(f);
  if (release) lt__store_release(srv->store, id); /* after sending: em lives in the entry */
  return true;
}

static void on_tick(uv_timer_t *h);

void lt__fetch_init(lt_server_t *srv) {
  uv_timer_init(&srv->loop, &srv->fetch_timer);
  srv->fetch_timer.data = srv;
}

void lt__fetch_close(lt_server_t *srv) {
  uv_close((uv_handle_t *)&srv->fetch_timer, NULL);
  /* Every session has gone, and its fetches with it: what is left are empty buckets whose
   * ids entered the store since the last settle. */
  waiting_t *b, *tmp;
  srv->woken = NULL;
  HASH_ITER(hh, srv->waiting, b, tmp) {
    HASH_DEL(srv->waiting, b);
    free(b);
  }
}

void lt__fetch_handle(lt_server_t *srv, lt_session_t *s, lt_oid_t id, bool release,
                      uint64_t max_frame, bool shm) {
  lt_fetch_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    send_value(srv, s, id, LT_ENOMEM, "out of memory", NULL);
    return;
  }
  f->w.cb = on_fetch_ready;
  f->srv = srv;
  f->sess = s;
  f->id = id;
  f->release = release;
  f->max_frame = max_frame;
  f->shm = shm;
  if (answer(srv, f)) return;
  uint64_t grace = srv->fetch_ms < GRACE_MS ? srv->fetch_ms : GRACE_MS;
  f->deadline = uv_now(&srv->loop) + grace;
  if (lt__peer_session(s) && s->nfetches >= lt__quota_max_fetches(srv)) {
    free(f);
    send_over_quota(srv, s, id);
    return;
  }
  if (!lt__peer_session(s) || srv->stopping || srv->nunknown >= UNKNOWN_MAX ||
      !wait_unknown(srv, f)) {
    free(f);
    send_unknown(srv, s, id);
    return;
  }
  if (!uv_is_active((uv_handle_t *)&srv->fetch_timer))
    uv_timer_start(&srv->fetch_timer, on_tick, TICK_MS, TICK_MS);
}

void lt__fetch_retry(lt_server_t *srv) {
  waiting_t *b;
  while ((b = srv->woken) != NULL) {
    srv->woken = b->wnext;
    b->woken = false;
    /* Take its fetches off the bucket first: answering may free or remake buckets. */
    lt_fetch_t *list = b->first, *next;
    b->first = NULL;
    for (lt_fetch_t *f = list; f != NULL; f = f->bnext)
      f->bucket = NULL;
    bucket_drop(srv, b);
    for (lt_fetch_t *f = list; f != NULL; f = next) {
      next = f->bnext;
      lt_session_t *s = f->sess;
      fetch_unlink(s, f);
      if (answer(srv, f)) continue;
      /* Gone again before this turn's end: it waits on, with its deadline. */
      if (!wait_unknown(srv, f)) {
        lt_oid_t id = f->id;
        free(f);
        send_unknown(srv, s, id);
      }
    }
  }
}

/* expire answers LT_ENOENT to the fetches past their grace period (all of them while
 * stopping): the head of srv->unknown, which is in order of deadlines. */
static void expire(lt_server_t *srv) {
  uint64_t now = uv_now(&srv->loop);
  lt_fetch_t *f;
  while ((f = srv->unknown) != NULL && (srv->stopping || now >= f->deadline)) {
    lt_session_t *s = f->sess;
    lt_oid_t id = f->id;
    fetch_unlink(s, f);
    free(f);
    send_unknown(srv, s, id);
  }
  if (srv->unknown == NULL) uv_timer_stop(&srv->fetch_timer);
}

static void on_tick(uv_timer_t *h) {
  lt_server_t *srv = h->data;
  lt__fetch_retry(srv);
  expire(srv);
  srv->settle(srv);
}

void lt__fetch_drop_session(lt_server_t *srv, lt_session_t *s, int status) {
  lt_fetch_t *f;
  while ((f = s->fetches) != NULL) {
    bool parked = !f->unknown;
    fetch_unlink(s, f);
    if (parked) lt__store_unpark(srv->store, &f->w);
    if (status != LT_OK) send_value(srv, s, f->id, status, lt_strerror(status), NULL);
    free(f);
  }
}

void lt__fetch_still_pending(lt_server_t *srv, lt_session_t *s) {
  uint64_t now = uv_now(&srv->loop);
  if (s->pending_told != 0 && now - s->pending_told < STILL_PENDING_MS) return;
  s->pending_told = now;
  for (lt_fetch_t *f = s->fetches; f != NULL; f = f->next)
    if (!f->unknown) send_value(srv, s, f->id, LT_EAGAIN, "still pending", NULL);
}
