/* shm_link.c: the asker's side of same-host transfers (shm.h): one unix connection to a
 * holder that announced itself of this host, attached as this server's peer session there,
 * on which values come as sealed memfds. Each is checked (a value this link's owner asked
 * for is its business; here: one descriptor, a regular sealed file of exactly the announced
 * size, within the frame limit) and mapped read-only as the value, without a copy. A link
 * not attached within ATTACH_MS, a hang-up or a descriptor that fails the checks ends it:
 * its owner (peer.c) then fetches by ZeroMQ. Loop thread only. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <lithium/error.h>
#include "log.h"
#include "shm.h"

#define ATTACH_MS   2000
#define RECV_BURST  16
#define NAME_PREFIX "lithium-shm-"
#define NAME_MAX_   100

struct lt_shm_link {
  lt_server_t *srv;
  int fd; /* -1 once ended */
  uv_poll_t poll;
  uv_timer_t timer; /* the attach's deadline */
  int handles;      /* open handles: freed when both have closed */
  bool ready;       /* attached */
  lt_shm_value_cb *cb;
  lt_shm_state_cb *state_cb;
  void *data;
};

/* host_len returns the length of the host part of "HOST NAME" (up to the space). */
static size_t host_len(const char *same_host) {
  return strcspn(same_host, " ");
}

bool lt__shm_local(const lt_server_t *srv, const char *same_host) {
  const char *own = lt__shm_same_host(srv);
  size_t n = host_len(own);
  return n > 0 && same_host != NULL && host_len(same_host) == n &&
         strncmp(own, same_host, n) == 0 && same_host[n] == ' ';
}

/* name_ok checks the socket name of an announcement: ours, of safe characters, not long. */
static bool name_ok(const char *name) {
  size_t n = strnlen(name, NAME_MAX_ + 1);
  if (n > NAME_MAX_ || strncmp(name, NAME_PREFIX, sizeof NAME_PREFIX - 1) != 0) return false;
  return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* stop stops the link for good (fetches go by ZeroMQ); its handles stay until closed. */
static void stop(lt_shm_link_t *l) {
  if (l->fd < 0) return;
  uv_poll_stop(&l->poll);
  uv_timer_stop(&l->timer);
  close(l->fd); /* safe once the poll is stopped */
  l->fd = -1;
  l->ready = false;
}

/* end stops the link and tells its owner, who may close it. */
static void end(lt_shm_link_t *l) {
  if (l->fd < 0) return;
  stop(l);
  l->state_cb(l->data);
}

static void unmap(void *data, void *hint) {
  munmap(data, (size_t)(uintptr_t)hint);
}

/* map checks memfd `fd` of `len` bytes and maps it as a value; NULL when it fails a check.
 * Closes fd. */
static lt_value_t *map(lt_server_t *srv, int fd, uint64_t len) {
  struct stat st;
  int seals = fcntl(fd, F_GET_SEALS);
  int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
  void *p = MAP_FAILED;
  if (len >= LT_SHM_MIN && (srv->lim.max_frame == 0 || len <= srv->lim.max_frame) &&
      len <= SIZE_MAX && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (uint64_t)st.st_size == len && seals >= 0 && (seals & need) == need)
    p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  lt_value_t *v = lt__value_user(p, (size_t)len, unmap, (void *)(uintptr_t)len);
  return v; /* NULL: unmapped already by lt__value_user */
}

static void on_io(uv_poll_t *h, int status, int events) {
  lt_shm_link_t *l = h->data;
  if (status < 0 || (events & UV_DISCONNECT) != 0) {
    end(l);
    return;
  }
  for (int i = 0; i < RECV_BURST && l->fd >= 0; i++) {
    lt_shm_msg_t m;
    int got = -1, rc = lt__shm_recv_msg(l->fd, &m, &got);
    if (rc == LT_EAGAIN) return;
    if (rc == LT_EPROTO) {
      lt__log_limited(LT_LOG_WARN, "shm: dropped a malformed message from a holder");
      continue;
    }
    if (rc != LT_OK) {
      end(l);
      return;
    }
    if (m.type == LT_SHM_ATTACHED && got < 0 && !l->ready) {
      l->ready = true;
      uv_timer_stop(&l->timer);
      l->state_cb(l->data);
      continue;
    }
    if (m.type != LT_SHM_VALUE || got < 0 || !l->ready) {
      if (got >= 0) close(got);
      lt__log_limited(LT_LOG_WARN, "shm: dropped an unexpected message from a holder");
      continue;
    }
    lt_oid_t id = {m.a, m.b};
    lt_value_t *v = map(l->srv, got, m.len);
    /* A holder that sends what we cannot map is not trusted with more. */
    if (v == NULL) lt__log_limited(LT_LOG_WARN, "shm: a holder's memfd failed its checks");
    if (v == NULL) stop(l);
    l->cb(l->data, id, v); /* may close l: its memory stays until the handles have closed */
  }
}

static void on_attach_late(uv_timer_t *h) {
  lt_shm_link_t *l = h->data;
  lt__log_limited(LT_LOG_INFO, "shm: a holder did not attach us within %d ms", ATTACH_MS);
  end(l);
}

/* connect_to connects to abstract socket `name` without waiting: the socket, or -1. */
static int connect_to(const char *name) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(a.sun_path + 1, name, n);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  /* A unix connect completes at once or fails (EAGAIN: the holder's backlog is full). */
  if (connect(fd, (struct sockaddr *)&a,
              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
      !lt__shm_peer_uid_ok(fd)) {
    close(fd);
    return -1;
  }
  return fd;
}

lt_shm_link_t *lt__shm_link_open(lt_server_t *srv, const char *same_host, lt_shm_value_cb *cb,
                                 lt_shm_state_cb *state_cb, void *data) {
  if (!lt__shm_local(srv, same_host)) return NULL;
  const char *name = same_host + host_len(same_host) + 1;
  if (!name_ok(name)) return NULL;
  int fd = connect_to(name);
  if (fd < 0) return NULL;
  lt_shm_msg_t m = {LT_SHM_MAGIC, LT_SHM_ATTACH, srv->peer_id, srv->peer_secret, 0};
  lt_shm_link_t *l = calloc(1, sizeof *l);
  if (l == NULL || lt__shm_send_msg(fd, &m, -1) != LT_OK ||
      uv_poll_init(&srv->loop, &l->poll, fd) != 0) {
    close(fd);
    free(l);
    return NULL;
  }
  l->srv = srv;
  l->fd = fd;
  l->cb = cb;
  l->state_cb = state_cb;
  l->data = data;
  l->poll.data = l->timer.data = l;
  uv_timer_init(&srv->loop, &l->timer);
  l->handles = 2;
  uv_poll_start(&l->poll, UV_READABLE | UV_DISCONNECT, on_io);
  uv_timer_start(&l->timer, on_attach_late, ATTACH_MS, 0);
  return l;
}

bool lt__shm_link_ready(const lt_shm_link_t *l) {
  return l != NULL && l->ready && l->fd >= 0;
}

static void on_closed(uv_handle_t *h) {
  lt_shm_link_t *l = h->data;
  if (--l->handles == 0) free(l);
}

void lt__shm_link_close(lt_shm_link_t *l) {
  if (l == NULL) return;
  stop(l);
  uv_close((uv_handle_t *)&l->poll, on_closed);
  uv_close((uv_handle_t *)&l->timer, on_closed);
}
