/* conns.c: the ROUTER's accepted connections and the cutting of those without a session (see
 * conns.h). A PAIR socket receives the monitor's events (two frames: 16-bit event and 32-bit
 * value, then the endpoint) through the zmq_uv glue; a timer cuts connections unbound for
 * too long. The table is keyed by descriptor number; each entry keeps the socket's inode,
 * checked again before a cut, so that a descriptor libzmq closed and reused for another
 * socket before its DISCONNECTED event was read is never cut by mistake. Loop thread only. */
#include "conns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <utlist.h>
#include <lithium/error.h>
#include "log.h"

#define MONITOR_EP "inproc://lithium-conns"
#define EVENTS     (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED)
#define TICK_MS    1000
/* Descriptors kept free: at least RESERVE_MIN, else an eighth of the limit. Connections
 * without a session: at most a quarter of the rest, at least UNBOUND_MIN. */
#define RESERVE_MIN 16
#define UNBOUND_MIN 8
/* After a batch of cuts, the next waits for them to end or for this long (ms): libzmq closes
 * a cut connection at once, and accepts that follow meanwhile must not cut a second batch. */
#define CUT_SETTLE_MS 100

typedef struct conn_ent {
  UT_hash_handle hh;
  bool oom;
  int fd; /* key */
  ino_t ino;
  uint64_t conn;                /* its ZAP number, 0 before its first message */
  uint64_t since;               /* uv_now of its accept, or of the end of its last session */
  bool bound;                   /* a session that said hello on it lives */
  bool cut;                     /* shut down, waiting for its DISCONNECTED */
  struct conn_ent *prev, *next; /* the unbound list, oldest first */
} conn_ent_t;

struct lt_conns {
  lt_server_t *srv;
  void *pair;
  lt_zuv_t zuv;
  uv_timer_t timer;
  conn_ent_t *byfd;
  conn_ent_t *unbound;
  int nunbound; /* on the unbound list */
  int ncut;     /* cut and not yet ended */
  int limit, reserve, max_unbound;
  uint64_t last_cut;
  lt_log_rate_t cut_log; /* the warnings of cuts, rate-limited */
  uint64_t cuts;
  int nclosed;
  bool closing;
};

static conn_ent_t *find(struct lt_conns *c, int fd) {
  conn_ent_t *e = NULL;
  HASH_FIND_INT(c->byfd, &fd, e);
  return e;
}

static void unlist(struct lt_conns *c, conn_ent_t *e) {
  DL_DELETE(c->unbound, e);
  c->nunbound--;
}

static void enlist(struct lt_conns *c, conn_ent_t *e) {
  DL_APPEND(c->unbound, e);
  c->nunbound++;
}

static void forget(struct lt_conns *c, conn_ent_t *e) {
  HASH_DEL(c->byfd, e);
  if (!e->bound && !e->cut) unlist(c, e);
  if (e->cut) c->ncut--;
  free(e);
}

/* cut shuts connection e down; libzmq sees its end and closes it (DISCONNECTED follows). */
static void cut(struct lt_conns *c, conn_ent_t *e, const char *why) {
  struct stat st;
  if (fstat(e->fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == e->ino)
    shutdown(e->fd, SHUT_RDWR);
  unlist(c, e);
  e->cut = true;
  c->ncut++;
  c->cuts++;
  c->last_cut = uv_now(&c->srv->loop);
  /* One attack cuts hundreds: the first line says it, later ones how many more. */
  lt__log_rated(&c->cut_log, (int64_t)c->last_cut, LT_LOG_WARN,
                "cut a connection without a session (descriptor %d): %s", e->fd, why);
}

/* relieve cuts a batch of the oldest unbound connections, never `keep` (the one just
 * accepted, which may be an honest client about to say hello): descriptors run short. */
static void relieve(struct lt_conns *c, conn_ent_t *keep) {
  uint64_t now = uv_now(&c->srv->loop);
  if (c->ncut > 0 && now - c->last_cut < CUT_SETTLE_MS) return;
  int batch = c->reserve / 2;
  char why[160];
  snprintf(why, sizeof why, "descriptors running short (descriptor %d accepted, limit %d)",
           keep->fd, c->limit);
  while (batch-- > 0 && c->unbound != NULL && c->unbound != keep)
    cut(c, c->unbound, why);
}

static void on_accepted(struct lt_conns *c, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return; /* already gone */
  conn_ent_t *e = find(c, fd);
  if (e != NULL) forget(c, e); /* its end was not reported: a stale entry */
  if ((e = calloc(1, sizeof *e)) == NULL) return;
  e->fd = fd;
  e->ino = st.st_ino;
  e->since = uv_now(&c->srv->loop);
  HASH_ADD_INT(c->byfd, fd, e);
  if (e->oom) {
    free(e);
    return;
  }
  enlist(c, e);
  while (c->nunbound > c->max_unbound)
    cut(c, c->unbound, "too many connections without a session");
  if (fd >= c->limit - c->reserve) relieve(c, e);
}

static void on_event(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated) {
  struct lt_conns *c = z->data;
  if (c->closing || truncated || n < 1 || zmq_msg_size(&parts[0]) != 6) return;
  uint16_t event;
  uint32_t value;
  memcpy(&event, zmq_msg_data(&parts[0]), sizeof event);
  memcpy(&value, (const char *)zmq_msg_data(&parts[0]) + 2, sizeof value);
  int fd = (int)value;
  conn_ent_t *e;
  if (event == ZMQ_EVENT_ACCEPTED)
    on_accepted(c, fd);
  else if (event == ZMQ_EVENT_DISCONNECTED && (e = find(c, fd)) != NULL)
    forget(c, e);
}

static void on_tick(uv_timer_t *h) {
  struct lt_conns *c = h->data;
  uint64_t now = uv_now(&c->srv->loop);
  char why[80];
  snprintf(why, sizeof why, "no session for %d ms", LT_CONNS_HELLO_MS);
  while (c->unbound != NULL && now - c->unbound->since >= LT_CONNS_HELLO_MS)
    cut(c, c->unbound, why);
}

int lt__conns_start(lt_server_t *srv, char *err, size_t errlen) {
  struct lt_conns *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return LT_ENOMEM;
  }
  c->srv = srv;
  struct rlimit rl;
  c->limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(1 << 30)
                 ? (int)rl.rlim_cur
                 : 1 << 30;
  c->reserve = c->limit / 8 > RESERVE_MIN ? c->limit / 8 : RESERVE_MIN;
  c->max_unbound = (c->limit - c->reserve) / 4;
  if (c->max_unbound < UNBOUND_MIN) c->max_unbound = UNBOUND_MIN;
  /* The monitor's PAIR socket receives without a high-water mark: libzmq sends events while
   * holding the monitored socket's monitor lock and would block its I/O thread at one. */
  int zero = 0;
  if (zmq_socket_monitor(srv->router, MONITOR_EP, EVENTS) != 0 ||
      (c->pair = zmq_socket(srv->zctx, ZMQ_PAIR)) == NULL ||
      zmq_setsockopt(c->pair, ZMQ_RCVHWM, &zero, sizeof zero) != 0 ||
      zmq_setsockopt(c->pair, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_connect(c->pair, MONITOR_EP) != 0) {
    snprintf(err, errlen, "cannot monitor the socket: %s", zmq_strerror(zmq_errno()));
    zmq_socket_monitor(srv->router, NULL, 0);
    if (c->pair != NULL) zmq_close(c->pair);
    free(c);
    return LT_EIO;
  }
  int rc = lt__zuv_start(&c->zuv, &srv->loop, c->pair, 2, on_event, c);
  if (rc != LT_OK) {
    snprintf(err, errlen, "cannot watch the monitor: %s", lt_strerror(rc));
    zmq_socket_monitor(srv->router, NULL, 0);
    zmq_close(c->pair);
    free(c);
    return rc;
  }
  uv_timer_init(&srv->loop, &c->timer);
  c->timer.data = c;
  uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
  srv->conns = c;
  return LT_OK;
}

bool lt__conns_seen(lt_server_t *srv, int fd, uint64_t conn, bool bound) {
  struct lt_conns *c = srv->conns;
  conn_ent_t *e;
  if (c == NULL || fd < 0) return true; /* nothing to keep: nothing is ever cut */
  if ((e = find(c, fd)) == NULL || e->cut) return false;
  if (e->conn == 0) e->conn = conn;
  if (e->conn != conn || !bound) return false; /* a stale entry, or no session */
  if (!e->bound) {
    unlist(c, e);
    e->bound = true;
  }
  return true;
}

void lt__conns_unbound(lt_server_t *srv, int fd, uint64_t conn) {
  struct lt_conns *c = srv->conns;
  conn_ent_t *e;
  if (c == NULL || fd < 0 || (e = find(c, fd)) == NULL || e->conn != conn || !e->bound) return;
  e->bound = false;
  e->since = uv_now(&srv->loop);
  enlist(c, e);
}

uint64_t lt__conns_cuts(const lt_server_t *srv) {
  return srv->conns != NULL ? srv->conns->cuts : 0;
}

static void on_closed(struct lt_conns *c) {
  if (++c->nclosed < 2) return;
  if (c->pair != NULL) zmq_close(c->pair);
  conn_ent_t *e, *tmp;
  HASH_ITER(hh, c->byfd, e, tmp) {
    HASH_DEL(c->byfd, e);
    free(e);
  }
  c->srv->conns = NULL;
  free(c);
}

static void on_zuv_closed(lt_zuv_t *z) {
  on_closed(z->data);
}

static void on_timer_closed(uv_handle_t *h) {
  on_closed(h->data);
}

void lt__conns_close(lt_server_t *srv) {
  struct lt_conns *c = srv->conns;
  if (c == NULL || c->closing) return;
  c->closing = true;
  /* Stop the monitor before its PAIR goes: libzmq would block sending to a PAIR without a
   * peer. */
  if (c->pair != NULL) zmq_socket_monitor(srv->router, NULL, 0);
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  lt__zuv_close(&c->zuv, on_zuv_closed);
}

void lt__conns_leave(lt_server_t *srv) {
  struct lt_conns *c = srv->conns;
  if (c == NULL || c->pair == NULL) return;
  zmq_socket_monitor(srv->router, NULL, 0);
  zmq_close(c->pair);
  c->pair = NULL;
}
