/* shm.c: the holder's side of same-host transfers (shm.h): the abstract unix socket peers
 * of this host connect to, their connections (same uid only, attached to a peer session
 * within ATTACH_MS by its id and secret, else closed), and the memfds that answer their
 * fetches: made on a libuv pool thread (the loop never copies a value's bytes), sealed, and
 * sent with SCM_RIGHTS; a transfer that cannot finish sends the ZeroMQ VALUE instead. The
 * memfds have no name anywhere: a kill -9 of either side leaves nothing behind. It never
 * decides who may read a value: fetch.c answers only fetches that passed the session's
 * checks. Loop thread only, except the work function. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <lithium/error.h>
#include "log.h"
#include "oid.h"

/* A connection must attach within this (ms), or it is closed; at most MAX_CONNS are open. */
#define ATTACH_MS 2000
#define TICK_MS   500
#define MAX_CONNS 256
/* Datagrams read per wake-up of one connection: a flood cannot hold the loop. */
#define RECV_BURST 16

typedef struct lt_shm_conn {
  struct lt_shm *shm;
  int fd;
  uv_poll_t poll;
  lt_session_t *sess; /* attached: the peer session it serves, NULL before (and after) */
  uint64_t opened;    /* uv_now of its accept */
  int refs;           /* 1 while open, plus one per transfer under way */
  bool open;
  struct lt_shm_conn *next, *prev;
} conn_t;

struct lt_shm {
  lt_server_t *srv;
  int fd;
  uv_poll_t poll;
  uv_timer_t timer;
  bool paused; /* accept failed for want of descriptors: the tick starts it again */
  conn_t *conns;
  uint32_t nconns;
  char same_host[LT_SHM_SAME_HOST_MAX + 1];
};

/* One transfer: the memfd made of `v` on a pool thread, then sent on `c`. */
typedef struct job {
  uv_work_t req;
  lt_server_t *srv;
  lt_shm_fallback_fn *fallback;
  conn_t *c;
  lt_oid_t id;
  lt_value_t *v;
  int memfd;
  uint64_t us;
} job_t;

static void conn_unref(conn_t *c) {
  if (--c->refs == 0) free(c);
}

static void on_conn_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  close(c->fd);
  conn_unref(c);
}

/* conn_close detaches c from its session and closes it; its memory goes with its last
 * transfer. */
static void conn_close(conn_t *c) {
  if (!c->open) return;
  c->open = false;
  if (c->sess != NULL) c->sess->shm = NULL;
  c->sess = NULL;
  lt_shm_t *shm = c->shm;
  if (c->prev)
    c->prev->next = c->next;
  else
    shm->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  shm->nconns--;
  uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

/* attach binds c to the peer session that shows id `a` and secret `b` and has no
 * connection yet; false when there is none. */
static bool attach(conn_t *c, uint64_t a, uint64_t b) {
  lt_server_t *srv = c->shm->srv;
  for (lt_session_t *s = srv->sessions; s != NULL; s = s->hh.next) {
    /* Peer sessions only (peer.h's name prefix; no call into peer.c, which calls here). */
    if (s->name == NULL || strncmp(s->name, LT_PEER_NAME_PREFIX, sizeof LT_PEER_NAME_PREFIX - 1) ||
        s->client_id != a || s->secret != b || s->shm != NULL)
      continue;
    s->shm = c;
    c->sess = s;
    return true;
  }
  return false;
}

static void on_conn_io(uv_poll_t *h, int status, int events) {
  conn_t *c = h->data;
  if (status < 0 || (events & UV_DISCONNECT) != 0) {
    conn_close(c);
    return;
  }
  for (int i = 0; i < RECV_BURST && c->open; i++) {
    lt_shm_msg_t m;
    int got = -1, rc = lt__shm_recv_msg(c->fd, &m, &got);
    if (rc == LT_EAGAIN) return;
    if (rc == LT_ECLOSED || rc == LT_EIO) {
      conn_close(c);
      return;
    }
    /* Only an attach comes this way, once, without a descriptor: anything else costs its
     * sender the message; an attach that names no session here costs it the connection. */
    if (got >= 0) close(got);
    if (rc != LT_OK || got >= 0 || m.type != LT_SHM_ATTACH || c->sess != NULL || m.len != 0) {
      lt__log_limited(LT_LOG_WARN, "shm: dropped a malformed message from a peer");
      continue;
    }
    if (!attach(c, m.a, m.b)) {
      lt__log_limited(LT_LOG_WARN, "shm: an attach named no peer session: connection closed");
      conn_close(c);
      return;
    }
    lt_shm_msg_t ok = {LT_SHM_MAGIC, LT_SHM_ATTACHED, 0, 0, 0};
    if (lt__shm_send_msg(c->fd, &ok, -1) != LT_OK) conn_close(c);
  }
}

static void on_accept(uv_poll_t *h, int status, int events) {
  lt_shm_t *shm = h->data;
  (void)events;
  if (status < 0) return;
  for (int i = 0; i < RECV_BURST; i++) {
    int fd = accept4(shm->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* Level-triggered: without a pause the loop would spin on the waiting connection. */
        uv_poll_stop(&shm->poll);
        shm->paused = true;
      }
      return;
    }
    conn_t *c = NULL;
    if (!lt__shm_peer_uid_ok(fd) || shm->nconns >= MAX_CONNS ||
        (c = calloc(1, sizeof *c)) == NULL) {
      close(fd);
      continue;
    }
    c->shm = shm;
    c->fd = fd;
    c->refs = 1;
    c->open = true;
    c->opened = uv_now(&shm->srv->loop);
    c->poll.data = c;
    if (uv_poll_init(&shm->srv->loop, &c->poll, fd) != 0) {
      close(fd);
      free(c);
      continue;
    }
    c->next = shm->conns;
    if (shm->conns) shm->conns->prev = c;
    shm->conns = c;
    shm->nconns++;
    uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, on_conn_io);
  }
}

/* on_tick closes the connections that did not attach in time and resumes a paused accept. */
static void on_tick(uv_timer_t *h) {
  lt_shm_t *shm = h->data;
  uint64_t now = uv_now(&shm->srv->loop);
  conn_t *c = shm->conns, *next;
  for (; c != NULL; c = next) {
    next = c->next;
    if (c->sess == NULL && now - c->opened >= ATTACH_MS) conn_close(c);
  }
  if (shm->paused) {
    shm->paused = false;
    uv_poll_start(&shm->poll, UV_READABLE, on_accept);
  }
}

/* listen_on binds and listens on a fresh abstract name; the socket, or -1 with errno. */
static int listen_on(char *name, size_t len) {
  snprintf(name, len, "lithium-shm-%ld-%016" PRIx64, (long)getpid(), lt__oid_client_random());
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n); /* sun_path[0] == '\0': abstract, no file */
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)&a,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
      listen(fd, 64) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

void lt__shm_start(lt_server_t *srv) {
  if (srv->no_shm) return;
  char host[128], name[64];
  if (!lt__shm_host(host, sizeof host)) {
    lt__log(LT_LOG_WARN, "shm: cannot tell this host's identity: same-host transfers off");
    return;
  }
  lt_shm_t *shm = calloc(1, sizeof *shm);
  if (shm == NULL) return;
  if ((shm->fd = listen_on(name, sizeof name)) < 0) {
    lt__log(LT_LOG_WARN, "shm: cannot listen on a unix socket (%s): same-host transfers off",
            strerror(errno));
    free(shm);
    return;
  }
  snprintf(shm->same_host, sizeof shm->same_host, "%s %s", host, name);
  shm->srv = srv;
  shm->poll.data = shm->timer.data = shm;
  uv_poll_init(&srv->loop, &shm->poll, shm->fd);
  uv_poll_start(&shm->poll, UV_READABLE, on_accept);
  uv_timer_init(&srv->loop, &shm->timer);
  uv_timer_start(&shm->timer, on_tick, TICK_MS, TICK_MS);
  srv->shm = shm;
  lt__log(LT_LOG_INFO, "shm: same-host transfers on @%s", name);
}

const char *lt__shm_same_host(const lt_server_t *srv) {
  return srv->shm != NULL ? srv->shm->same_host : "";
}

/* make_memfd copies `v` into a new sealed memfd: the descriptor, or -1. Pool thread. */
static int make_memfd(const lt_value_t *v) {
  int fd = memfd_create("lithium-value", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  /* Allocating the pages in one call before the copy is cheaper than one by one in write. */
  if (v->len > 0 && fallocate(fd, 0, 0, (off_t)v->len) != 0) goto fail;
  const char *p = v->data;
  size_t left = v->len;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) goto fail;
    p += n;
    left -= (size_t)n;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    goto fail;
  return fd;
fail:
  close(fd);
  return -1;
}

static void work(uv_work_t *r) {
  job_t *j = r->data;
  uint64_t t0 = uv_hrtime();
  j->memfd = make_memfd(j->v);
  j->us = (uv_hrtime() - t0) / 1000;
}

static void after_work(uv_work_t *r, int status) {
  job_t *j = r->data;
  lt_server_t *srv = j->srv;
  conn_t *c = j->c;
  lt_session_t *s = c->open ? c->sess : NULL;
  if (s != NULL && !srv->closing) {
    lt_shm_msg_t m = {LT_SHM_MAGIC, LT_SHM_VALUE, j->id.client, j->id.seq, j->v->len};
    if (status == 0 && j->memfd >= 0 && lt__shm_send_msg(c->fd, &m, j->memfd) == LT_OK) {
      srv->shm_out += j->v->len;
      srv->peer_out += j->v->len;
      srv->shm_values_out++;
      srv->shm_us += j->us;
    } else {
      srv->shm_fallbacks++;
      j->fallback(srv, s, j->id, j->v);
    }
  }
  if (j->memfd >= 0) close(j->memfd); /* the asker has its own descriptor now */
  lt__value_unref(j->v);
  conn_unref(c);
  free(j);
  if (s != NULL) srv->settle(srv);
}

bool lt__shm_offer(lt_server_t *srv, lt_session_t *s, lt_oid_t id, lt_value_t *v,
                   lt_shm_fallback_fn *fallback) {
  conn_t *c = s->shm;
  if (c == NULL || !c->open || v->len < LT_SHM_MIN || srv->closing) return false;
  job_t *j = calloc(1, sizeof *j);
  if (j == NULL) return false;
  j->req.data = j;
  j->srv = srv;
  j->fallback = fallback;
  j->c = c;
  j->id = id;
  j->v = lt__value_ref(v);
  j->memfd = -1;
  if (uv_queue_work(&srv->loop, &j->req, work, after_work) != 0) {
    lt__value_unref(v);
    free(j);
    return false;
  }
  c->refs++;
  return true;
}

void lt__shm_session_gone(lt_server_t *srv, lt_session_t *s) {
  (void)srv;
  if (s->shm != NULL) conn_close(s->shm);
}

static void on_timer_closed(uv_handle_t *h) {
  free(h->data);
}

static void on_listener_closed(uv_handle_t *h) {
  lt_shm_t *shm = h->data;
  close(shm->fd);
  uv_close((uv_handle_t *)&shm->timer, on_timer_closed);
}

void lt__shm_close(lt_server_t *srv) {
  lt_shm_t *shm = srv->shm;
  if (shm == NULL) return;
  srv->shm = NULL;
  while (shm->conns != NULL)
    conn_close(shm->conns);
  uv_close((uv_handle_t *)&shm->poll, on_listener_closed);
}
