/* zmtp_peer.c: the raw ZMTP 3.0 peer of the tests (see zmtp_peer.h): the greeting, the
 * READY command and short/long frames (RFC 23), over a blocking TCP socket with poll for
 * every wait. It knows the wire only; messages are encoded by the codec. */
#include "zmtp_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <lithium/error.h>

#define FLAG_MORE    0x01
#define FLAG_LONG    0x02
#define FLAG_COMMAND 0x04

/* io_wait waits until `fd` is ready for `events` before `until` (th_now_ms). */
static int io_wait(int fd, short events, int64_t until) {
  for (;;) {
    int64_t left = until - th_now_ms();
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = events};
    int rc = poll(&p, 1, (int)left);
    if (rc > 0) return 0;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

static int write_all(int fd, const void *buf, size_t len) {
  const unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len, int64_t until) {
  unsigned char *p = buf;
  while (len > 0) {
    if (io_wait(fd, POLLIN, until) != 0) return LT_ETIMEDOUT;
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return LT_EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* read_frame reads one frame: its flags, and its bytes into *data (malloc'ed). */
static int read_frame(int fd, unsigned char *flags, unsigned char **data, size_t *len,
                      int64_t until) {
  int rc = read_all(fd, flags, 1, until);
  if (rc != 0) return rc;
  unsigned char sz[8];
  size_t n;
  if (*flags & FLAG_LONG) {
    if ((rc = read_all(fd, sz, 8, until)) != 0) return rc;
    n = 0;
    for (int i = 0; i < 8; i++)
      n = n << 8 | sz[i];
    if (n > (64u << 20)) return LT_EIO;
  } else {
    if ((rc = read_all(fd, sz, 1, until)) != 0) return rc;
    n = sz[0];
  }
  *data = malloc(n ? n : 1);
  if ((rc = read_all(fd, *data, n, until)) != 0) {
    free(*data);
    return rc;
  }
  *len = n;
  return 0;
}

static int send_frame(int fd, unsigned char flags, const void *data, size_t len) {
  unsigned char head[9];
  size_t h = 0;
  if (len > 255) {
    head[h++] = flags | FLAG_LONG;
    for (int i = 7; i >= 0; i--)
      head[h++] = (unsigned char)((uint64_t)len >> (8 * i));
  } else {
    head[h++] = flags;
    head[h++] = (unsigned char)len;
  }
  if (write_all(fd, head, h) != 0) return -1;
  if (data != NULL) return len ? write_all(fd, data, len) : 0;
  static const unsigned char zeros[4096];
  while (len > 0) {
    size_t k = len < sizeof zeros ? len : sizeof zeros;
    if (write_all(fd, zeros, k) != 0) return -1;
    len -= k;
  }
  return 0;
}

/* property appends a ZMTP property (name, 4-byte big-endian length, value) at buf + *k. */
static void property(unsigned char *buf, size_t *k, const char *name, const void *v, size_t vlen) {
  size_t nl = strlen(name);
  buf[(*k)++] = (unsigned char)nl;
  memcpy(buf + *k, name, nl);
  *k += nl;
  for (int i = 3; i >= 0; i--)
    buf[(*k)++] = (unsigned char)(vlen >> (8 * i));
  memcpy(buf + *k, v, vlen);
  *k += vlen;
}

/* tcp_connect connects a TCP socket to tcp://HOST:PORT `endpoint`; the socket or -1. */
static int tcp_connect(const char *endpoint) {
  char host[64];
  int port;
  if (sscanf(endpoint, "tcp://%63[^:]:%d", host, &port) != 2) return -1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ready_null builds a READY command of a DEALER (an empty "Identity" first) into buf; its
 * length. */
static size_t ready_null(unsigned char *buf) {
  size_t k = 6;
  memcpy(buf, "\x05READY", 6);
  property(buf, &k, "Socket-Type", "DEALER", 6);
  property(buf, &k, "Identity", "", 0);
  return k;
}

int th_zmtp_greet(th_zmtp_t *z, const char *endpoint, const char *mechanism) {
  z->fd = -1;
  unsigned char greet[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0};
  size_t mlen = strlen(mechanism);
  if (mlen > 20) return -1;
  memcpy(greet + 12, mechanism, mlen);
  int fd = tcp_connect(endpoint);
  if (fd < 0) return -1;
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  unsigned char ready[600];
  if (write_all(fd, greet, 64) != 0 ||
      (strcmp(mechanism, "NULL") == 0 &&
       send_frame(fd, FLAG_COMMAND, ready, ready_null(ready)) != 0)) {
    close(fd);
    return -1;
  }
  z->fd = fd;
  return 0;
}

int th_zmtp_open(th_zmtp_t *z, const char *endpoint, const void *rid, size_t rid_len,
                 int timeout_ms) {
  z->fd = -1;
  if (rid_len > 255) return -1;
  int fd = tcp_connect(endpoint);
  if (fd < 0) return -1;
  int64_t until = th_now_ms() + timeout_ms;
  unsigned char greet[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
  unsigned char peer[64], ready[600], flags, *data = NULL;
  size_t k = ready_null(ready), len;
  if (rid != NULL) property(ready, &k, "Identity", rid, rid_len);
  if (write_all(fd, greet, 64) != 0 || read_all(fd, peer, 64, until) != 0 ||
      send_frame(fd, FLAG_COMMAND, ready, k) != 0 ||
      read_frame(fd, &flags, &data, &len, until) != 0) {
    close(fd);
    return -1;
  }
  bool ok = (flags & FLAG_COMMAND) && len >= 6 && memcmp(data, "\x05READY", 6) == 0;
  free(data);
  if (!ok) {
    close(fd);
    return -1;
  }
  z->fd = fd;
  return 0;
}

void th_zmtp_close(th_zmtp_t *z) {
  if (z->fd >= 0) close(z->fd);
  z->fd = -1;
}

int th_zmtp_frame(th_zmtp_t *z, const void *data, size_t len, bool more) {
  return send_frame(z->fd, more ? FLAG_MORE : 0, data, len);
}

int th_zmtp_send(th_zmtp_t *z, lt_msg_t *m, const lt_bytes_t *pay, uint32_t n) {
  void *hdr;
  size_t len;
  m->nframes = n;
  m->frames = (lt_bytes_t *)pay;
  if (lt__msg_encode(m, &hdr, &len) != LT_OK) return -1;
  int rc = send_frame(z->fd, n > 0 ? FLAG_MORE : 0, hdr, len);
  free(hdr);
  for (uint32_t i = 0; rc == 0 && i < n; i++)
    rc = send_frame(z->fd, i + 1 < n ? FLAG_MORE : 0, pay[i].data, pay[i].len);
  return rc;
}

int th_zmtp_recv(th_zmtp_t *z, th_rx_t *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  int64_t until = th_now_ms() + timeout_ms;
  size_t cap = 0;
  for (;;) {
    unsigned char flags, *data;
    size_t len;
    int rc = read_frame(z->fd, &flags, &data, &len, until);
    if (rc != 0) {
      th_rx_clear(r);
      return rc;
    }
    if (flags & FLAG_COMMAND) { /* PING and the like */
      free(data);
      continue;
    }
    if (r->nparts == cap) {
      cap = cap ? 2 * cap : 4;
      r->parts = realloc(r->parts, cap * sizeof *r->parts);
    }
    zmq_msg_init_size(&r->parts[r->nparts], len);
    memcpy(zmq_msg_data(&r->parts[r->nparts]), data, len);
    free(data);
    r->nparts++;
    if (!(flags & FLAG_MORE)) break;
  }
  return th_rx_decode(r);
}

int th_zmtp_recv_type(th_zmtp_t *z, lt_msg_type_t type, th_rx_t *r, int timeout_ms) {
  int64_t until = th_now_ms() + timeout_ms;
  while (th_now_ms() < until) {
    int rc = th_zmtp_recv(z, r, (int)(until - th_now_ms()));
    if (rc == LT_ETIMEDOUT || rc == LT_EIO) return -1;
    if (rc == 0 && r->m.type == type) return 0;
    th_rx_clear(r);
  }
  return -1;
}
