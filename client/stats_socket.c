/* stats_socket.c: the stats socket of an evaluation (stats_socket.h): opening it owner-only,
 * serving "stats\n" requests from the dispatcher's loop without ever blocking it, closing
 * it. It knows nothing of the dispatcher: the snapshot comes from the callback it is given.
 * Open/close: evaluator thread; items/serve: dispatcher thread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <lithium/error.h>
#include "log.h"
#include "stats_socket.h"

#define REQ_MAX 64 /* bytes of a request line, at most */

typedef struct reader {
  int fd; /* -1: a free slot */
  int64_t until_ms;
  char req[REQ_MAX];
  size_t nreq;
  char *out; /* the answer, once asked */
  size_t nout, sent;
} reader_t;

struct lt_statsock {
  int fd;
  char *path;
  dev_t dev; /* of the socket file it created */
  ino_t ino;
  lt_statsock_snap_fn snap;
  void *ud;
  reader_t readers[LT_STATSOCK_CONNS];
};

/* nonblocking makes fd non-blocking and close-on-exec; 0 or -1. */
static int nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  return fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* address fills `sa` for path; LT_EINVAL when it does not fit. */
static int address(struct sockaddr_un *sa, const char *path) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (path[0] == '\0' || strlen(path) >= sizeof sa->sun_path) return LT_EINVAL;
  memcpy(sa->sun_path, path, strlen(path));
  return LT_OK;
}

/* listened tells whether something accepts connections at sa (a full backlog: it does). */
static int listened(const struct sockaddr_un *sa) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return 0;
  int yes = connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0 || errno == EAGAIN;
  close(fd);
  return yes;
}

/* clear_path makes room at `path`: nothing there, or a socket of ours that nothing listens
 * on (a killed run's), which is removed. LT_EEXIST for anything else. */
static int clear_path(const char *path, const struct sockaddr_un *sa, char *err, size_t len) {
  struct stat st;
  if (lstat(path, &st) != 0) return LT_OK;
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(err, len,
             "%s exists and is not a socket: not replaced (remove it or choose another path)",
             path);
    return LT_EEXIST;
  }
  if (st.st_uid != geteuid()) {
    snprintf(err, len, "%s is a socket of another user: not replaced", path);
    return LT_EEXIST;
  }
  if (listened(sa)) {
    snprintf(err, len, "%s is in use: another evaluation listens there", path);
    return LT_EEXIST;
  }
  if (unlink(path) != 0 && errno != ENOENT) {
    snprintf(err, len, "%s: cannot remove the stale socket: %s", path, strerror(errno));
    return LT_EIO;
  }
  return LT_OK;
}

/* listen_on binds ss->fd to sa and listens, the file's mode 0600 before the first
 * connection can come: a Unix socket takes connections only once it listens. */
static int listen_on(lt_statsock_t *ss, const struct sockaddr_un *sa, char *err, size_t len) {
  /* On Linux the file takes the socket's own mode, under the umask: 0600 from the start. */
  if (fchmod(ss->fd, 0600) != 0) lt__log(LT_LOG_DEBUG, "stats socket: fchmod: %s", strerror(errno));
  if (bind(ss->fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
    int e = errno;
    snprintf(err, len, "%s: cannot create the socket: %s", ss->path, strerror(e));
    return e == EADDRINUSE ? LT_EEXIST : LT_EIO;
  }
  struct stat st;
  if (chmod(ss->path, 0600) != 0 || lstat(ss->path, &st) != 0 || listen(ss->fd, 16) != 0 ||
      nonblocking(ss->fd) != 0) {
    snprintf(err, len, "%s: cannot set up the socket: %s", ss->path, strerror(errno));
    unlink(ss->path);
    return LT_EIO;
  }
  ss->dev = st.st_dev;
  ss->ino = st.st_ino;
  return LT_OK;
}

int lt__statsock_open(lt_statsock_t **out, const char *path, lt_statsock_snap_fn snap, void *ud,
                      char *err, size_t len) {
  *out = NULL;
  struct sockaddr_un sa;
  if (address(&sa, path) != LT_OK) {
    snprintf(err, len, "'%s': not a usable socket path (1 to %zu bytes)", path,
             sizeof sa.sun_path - 1);
    return LT_EINVAL;
  }
  int rc = clear_path(path, &sa, err, len);
  if (rc != LT_OK) return rc;
  lt_statsock_t *ss = calloc(1, sizeof *ss);
  if (ss == NULL || (ss->path = strdup(path)) == NULL) {
    free(ss);
    snprintf(err, len, "out of memory");
    return LT_ENOMEM;
  }
  ss->snap = snap;
  ss->ud = ud;
  for (size_t i = 0; i < LT_STATSOCK_CONNS; i++)
    ss->readers[i].fd = -1;
  ss->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  rc = ss->fd < 0 ? LT_EIO : listen_on(ss, &sa, err, len);
  if (ss->fd < 0) snprintf(err, len, "socket: %s", strerror(errno));
  if (rc != LT_OK) {
    if (ss->fd >= 0) close(ss->fd);
    free(ss->path);
    free(ss);
    return rc;
  }
  *out = ss;
  return LT_OK;
}

void lt__statsock_items(const lt_statsock_t *ss, zmq_pollitem_t *items) {
  items[0] = (zmq_pollitem_t){.fd = ss->fd, .events = ZMQ_POLLIN};
  for (size_t i = 0; i < LT_STATSOCK_CONNS; i++) {
    const reader_t *r = &ss->readers[i];
    short ev = r->out != NULL ? ZMQ_POLLOUT : ZMQ_POLLIN;
    items[1 + i] = (zmq_pollitem_t){.fd = r->fd, .events = r->fd >= 0 ? ev : 0};
  }
}

static void reader_close(reader_t *r) {
  if (r->fd >= 0) close(r->fd);
  free(r->out);
  memset(r, 0, sizeof *r);
  r->fd = -1;
}

/* peer_is_us tells whether the process at the other end of fd runs as our user. */
static int peer_is_us(int fd) {
#ifdef SO_PEERCRED
  struct ucred cr;
  socklen_t n = sizeof cr;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0 && cr.uid == geteuid();
#else
  uid_t uid;
  gid_t gid;
  return getpeereid(fd, &uid, &gid) == 0 && uid == geteuid();
#endif
}

/* free_slot returns a free reader slot, closing the oldest reader when all are taken: a
 * reader that connected and went silent gives way to a new one. */
static reader_t *free_slot(lt_statsock_t *ss) {
  reader_t *oldest = &ss->readers[0];
  for (size_t i = 0; i < LT_STATSOCK_CONNS; i++) {
    if (ss->readers[i].fd < 0) return &ss->readers[i];
    if (ss->readers[i].until_ms < oldest->until_ms) oldest = &ss->readers[i];
  }
  reader_close(oldest);
  return oldest;
}

/* accept_all takes the waiting connections of our user into reader slots, any other closed
 * at once; at most LT_STATSOCK_CONNS a turn, so that a flood of them cannot hold the loop. */
static void accept_all(lt_statsock_t *ss, int64_t now_ms) {
  for (int k = 0; k < LT_STATSOCK_CONNS; k++) {
    int fd = accept(ss->fd, NULL, NULL);
    if (fd < 0) return; /* EAGAIN, or a connection that went away meanwhile */
    if (!peer_is_us(fd) || nonblocking(fd) != 0) {
      close(fd);
      continue;
    }
    reader_t *slot = free_slot(ss);
    slot->fd = fd;
    slot->until_ms = now_ms + LT_STATSOCK_MS;
  }
}

/* answer makes r's answer to its request line (without its "\n"): the snapshot, or an
 * error; 0, or -1 when memory ran out. */
static int answer(lt_statsock_t *ss, reader_t *r) {
  char *json = NULL;
  if (strcmp(r->req, "stats") != 0) {
    json = strdup("{\"error\":\"unknown request: expected the line 'stats'\"}");
  } else if (ss->snap(ss->ud, &json) != LT_OK) {
    json = strdup("{\"error\":\"no snapshot: out of memory\"}");
  }
  if (json == NULL) return -1;
  size_t n = strlen(json);
  char *out = realloc(json, n + 2);
  if (out == NULL) {
    free(json);
    return -1;
  }
  memcpy(out + n, "\n", 2);
  r->out = out;
  r->nout = n + 1;
  return 0;
}

/* take_request reads what r sent; 1 when its request line is complete, 0 when more is to
 * come, -1 when the connection is to close (closed, or a line too long). */
static int take_request(reader_t *r) {
  ssize_t got = recv(r->fd, r->req + r->nreq, sizeof r->req - 1 - r->nreq, MSG_DONTWAIT);
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  if (got == 0) return -1;
  r->nreq += (size_t)got;
  r->req[r->nreq] = '\0';
  char *nl = memchr(r->req, '\n', r->nreq);
  if (nl == NULL) return r->nreq + 1 < sizeof r->req ? 0 : -1;
  *nl = '\0';
  if (nl > r->req && nl[-1] == '\r') nl[-1] = '\0';
  return 1;
}

/* send_answer sends what r's socket takes now; 1 when all of it went, 0 when more is to go,
 * -1 on an error. */
static int send_answer(reader_t *r) {
  ssize_t put = send(r->fd, r->out + r->sent, r->nout - r->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (put < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  r->sent += (size_t)put;
  return r->sent == r->nout;
}

/* serve_reader moves r on as far as it goes without waiting. */
static void serve_reader(lt_statsock_t *ss, reader_t *r, short revents) {
  if (r->out == NULL) {
    if (!(revents & (ZMQ_POLLIN | ZMQ_POLLERR))) return;
    int got = take_request(r);
    if (got == 0) return;
    if (got < 0 || answer(ss, r) != 0) {
      reader_close(r);
      return;
    }
  } else if (!(revents & (ZMQ_POLLOUT | ZMQ_POLLERR))) {
    return;
  }
  if (send_answer(r) != 0) reader_close(r);
}

void lt__statsock_serve(lt_statsock_t *ss, const zmq_pollitem_t *items, int64_t now_ms) {
  for (size_t i = 0; i < LT_STATSOCK_CONNS; i++) {
    reader_t *r = &ss->readers[i];
    if (r->fd < 0) continue;
    if (now_ms >= r->until_ms)
      reader_close(r);
    else if (items[1 + i].fd == r->fd && items[1 + i].revents != 0)
      serve_reader(ss, r, items[1 + i].revents);
  }
  if (items[0].revents & ZMQ_POLLIN) accept_all(ss, now_ms);
}

void lt__statsock_close(lt_statsock_t *ss) {
  if (ss == NULL) return;
  for (size_t i = 0; i < LT_STATSOCK_CONNS; i++)
    reader_close(&ss->readers[i]);
  close(ss->fd);
  /* Only the file it made: a later evaluation may have taken the path over meanwhile. */
  struct stat st;
  if (lstat(ss->path, &st) == 0 && st.st_dev == ss->dev && st.st_ino == ss->ino) unlink(ss->path);
  free(ss->path);
  free(ss);
}
