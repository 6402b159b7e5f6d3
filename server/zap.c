/* zap.c: the ZAP handler thread and the allowed keys (see zap.h). The thread owns its REP
 * socket; the key list is swapped under a mutex by lt__zap_reload. A request is six or more
 * frames: version "1.0", request id, domain, address, routing id, mechanism, credentials
 * (for CURVE one frame, the client's 32-byte public key); the reply is version, request id,
 * status code ("200" or "400"), status text, user id (the Z85 key, "" without CURVE) and
 * metadata naming the connection (LT_ZAP_CONN). A server with a key pair takes CURVE only,
 * one without takes NULL only; PLAIN never. */
#include "zap.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include <lithium/error.h>
#include "curve.h"
#include "log.h"

#define ZAP_ENDPOINT   "inproc://zeromq.zap.01"
#define ZAP_MAX_FRAMES 8
#define ZAP_POLL_MS    100

typedef struct keylist {
  size_t n;
  uint8_t (*keys)[32];
} keylist_t;

struct lt_zap {
  void *sock;
  pthread_t thread;
  atomic_bool stop;
  pthread_mutex_t mu;
  keylist_t list; /* under mu */
  uint8_t own[32];
  char *path;     /* the --allow file, or NULL */
  bool curve;     /* a key pair: CURVE only; else NULL only */
  uint64_t conns; /* connections named so far (the zap thread's) */
};

/* read_list parses an allow file: one Z85 key a line, optionally a name after it; blank
 * lines and '#' comments are skipped; anything else is an error naming the line. */
static int read_list(const char *path, keylist_t *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "cannot read --allow file %s", path);
    return LT_EIO;
  }
  char line[1024];
  size_t cap = 0;
  int lineno = 0, rc = LT_OK;
  while (rc == LT_OK && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0') continue;
    char key[LT_Z85_KEY_LEN + 1];
    size_t n = strcspn(p, " \t\r\n"); /* Z85 has a #: comments are whole lines */
    if (n != LT_Z85_KEY_LEN) {
      snprintf(err, errlen, "--allow file %s, line %d: not a 40-character Z85 key", path, lineno);
      rc = LT_EINVAL;
      break;
    }
    memcpy(key, p, n);
    key[n] = '\0';
    if (out->n == cap) {
      cap = cap ? cap * 2 : 16;
      void *k = realloc(out->keys, cap * sizeof *out->keys);
      if (k == NULL) {
        rc = LT_ENOMEM;
        snprintf(err, errlen, "out of memory");
        break;
      }
      out->keys = k;
    }
    if (zmq_z85_decode(out->keys[out->n], key) == NULL) {
      snprintf(err, errlen, "--allow file %s, line %d: not a Z85 key", path, lineno);
      rc = LT_EINVAL;
      break;
    }
    out->n++;
  }
  fclose(f);
  if (rc != LT_OK) {
    free(out->keys);
    memset(out, 0, sizeof *out);
  }
  return rc;
}

static bool allowed(lt_zap_t *z, const uint8_t *key) {
  if (memcmp(key, z->own, 32) == 0) return true;
  pthread_mutex_lock(&z->mu);
  bool ok = false;
  for (size_t i = 0; !ok && i < z->list.n; i++)
    ok = memcmp(key, z->list.keys[i], 32) == 0;
  pthread_mutex_unlock(&z->mu);
  return ok;
}

static void send_str(void *sock, const char *s, size_t len, bool more) {
  zmq_send(sock, s, len, more ? ZMQ_SNDMORE : 0);
}

/* conn_metadata writes the ZAP metadata naming connection `conn` (ZMTP property format:
 * name length, name, 4-byte big-endian value length, value) into buf; returns its size. */
static size_t conn_metadata(uint64_t conn, unsigned char *buf, size_t len) {
  char v[24];
  int vn = snprintf(v, sizeof v, "%llu", (unsigned long long)conn);
  size_t nn = strlen(LT_ZAP_CONN);
  if (1 + nn + 4 + (size_t)vn > len) return 0;
  size_t k = 0;
  buf[k++] = (unsigned char)nn;
  memcpy(buf + k, LT_ZAP_CONN, nn);
  k += nn;
  buf[k++] = 0;
  buf[k++] = 0;
  buf[k++] = 0;
  buf[k++] = (unsigned char)vn;
  memcpy(buf + k, v, (size_t)vn);
  return k + (size_t)vn;
}

static bool mechanism_is(zmq_msg_t *f, const char *name) {
  return zmq_msg_size(f) == strlen(name) && memcmp(zmq_msg_data(f), name, strlen(name)) == 0;
}

/* handle answers one request of `n` frames. */
static void handle(lt_zap_t *z, zmq_msg_t *f, size_t n) {
  const char *status = "400", *text = "refused";
  char user[LT_Z85_KEY_LEN + 1] = "";
  char addr[64] = "?";
  if (n >= 4) {
    size_t al = zmq_msg_size(&f[3]) < sizeof addr - 1 ? zmq_msg_size(&f[3]) : sizeof addr - 1;
    memcpy(addr, zmq_msg_data(&f[3]), al);
    addr[al] = '\0';
  }
  bool curve = n >= 7 && mechanism_is(&f[5], "CURVE");
  if (n < 6 || zmq_msg_size(&f[0]) != 3 || memcmp(zmq_msg_data(&f[0]), "1.0", 3) != 0) {
    text = "malformed request";
  } else if (!z->curve) {
    if (mechanism_is(&f[5], "NULL")) {
      status = "200";
      text = "OK";
    } else {
      text = "NULL mechanism expected (this server has no CURVE key)";
      lt__log_limited(LT_LOG_WARN, "refused a connection with a security mechanism from %s", addr);
    }
  } else if (!curve || zmq_msg_size(&f[6]) != 32) {
    text = "CURVE required";
    lt__log_limited(LT_LOG_WARN, "refused a connection without CURVE from %s", addr);
  } else {
    zmq_z85_encode(user, zmq_msg_data(&f[6]), 32);
    if (allowed(z, zmq_msg_data(&f[6]))) {
      status = "200";
      text = "OK";
    } else {
      lt__log_limited(LT_LOG_WARN, "refused CURVE key %s from %s (not in --allow)", user, addr);
      user[0] = '\0';
    }
  }
  unsigned char meta[64];
  size_t metalen = status[0] == '2' ? conn_metadata(++z->conns, meta, sizeof meta) : 0;
  send_str(z->sock, "1.0", 3, true);
  if (n >= 2)
    zmq_send(z->sock, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
  else
    send_str(z->sock, "", 0, true);
  send_str(z->sock, status, 3, true);
  send_str(z->sock, text, strlen(text), true);
  send_str(z->sock, user, strlen(user), true);
  zmq_send(z->sock, meta, metalen, 0);
}

uint64_t lt__zap_conn(zmq_msg_t *msg) {
  const char *v = zmq_msg_gets(msg, LT_ZAP_CONN);
  if (v == NULL) return 0;
  uint64_t c = 0;
  for (; *v >= '0' && *v <= '9'; v++)
    c = c * 10 + (uint64_t)(*v - '0');
  return c;
}

/* block_signals keeps the process's signals (SIGHUP re-reads, SIGCHLD, a storm of them) off
 * this thread: one that interrupted a receive or a send of a ZAP exchange (EINTR) would drop
 * or split it, and a handshake would wait for an answer that never comes. The faults a
 * thread raises itself stay deliverable, for the crash log. */
static void block_signals(void) {
  sigset_t set;
  sigfillset(&set);
  sigdelset(&set, SIGSEGV);
  sigdelset(&set, SIGBUS);
  sigdelset(&set, SIGFPE);
  sigdelset(&set, SIGILL);
  sigdelset(&set, SIGABRT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *zap_main(void *arg) {
  lt_zap_t *z = arg;
  block_signals();
  zmq_msg_t f[ZAP_MAX_FRAMES];
  while (!atomic_load(&z->stop)) {
    size_t n = 0;
    bool more = true, got = false;
    while (more) {
      zmq_msg_t part;
      zmq_msg_init(&part);
      if (zmq_msg_recv(&part, z->sock, 0) < 0) {
        zmq_msg_close(&part);
        break;
      }
      got = true;
      more = zmq_msg_more(&part);
      if (n < ZAP_MAX_FRAMES) {
        zmq_msg_init(&f[n]);
        zmq_msg_move(&f[n], &part);
        n++;
      }
      zmq_msg_close(&part);
    }
    if (got && !more) handle(z, f, n);
    for (size_t i = 0; i < n; i++)
      zmq_msg_close(&f[i]);
  }
  zmq_close(z->sock);
  return NULL;
}

int lt__zap_start(lt_zap_t **out, void *zctx, const char *own_pub, const char *allow_path,
                  char *err, size_t errlen) {
  *out = NULL;
  lt_zap_t *z = calloc(1, sizeof *z);
  if (z == NULL) return LT_ENOMEM;
  pthread_mutex_init(&z->mu, NULL);
  z->curve = own_pub != NULL;
  if (z->curve) zmq_z85_decode(z->own, own_pub);
  int rc;
  if (z->curve && allow_path != NULL) {
    if ((z->path = strdup(allow_path)) == NULL) {
      rc = LT_ENOMEM;
      goto fail;
    }
    if ((rc = read_list(allow_path, &z->list, err, errlen)) != LT_OK) goto fail;
  }
  int timeout = ZAP_POLL_MS, zero = 0;
  if ((z->sock = zmq_socket(zctx, ZMQ_REP)) == NULL ||
      zmq_setsockopt(z->sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout) != 0 ||
      zmq_setsockopt(z->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_bind(z->sock, ZAP_ENDPOINT) != 0) {
    snprintf(err, errlen, "cannot start the ZAP handler: %s", zmq_strerror(zmq_errno()));
    if (z->sock != NULL) zmq_close(z->sock);
    rc = LT_EIO;
    goto fail;
  }
  if (pthread_create(&z->thread, NULL, zap_main, z) != 0) {
    zmq_close(z->sock);
    snprintf(err, errlen, "cannot start the ZAP thread");
    rc = LT_EIO;
    goto fail;
  }
  if (z->curve) lt__log(LT_LOG_INFO, "CURVE on: own key and %zu allowed client keys", z->list.n);
  *out = z;
  return LT_OK;
fail:
  free(z->list.keys);
  free(z->path);
  pthread_mutex_destroy(&z->mu);
  free(z);
  return rc;
}

int lt__zap_reload(lt_zap_t *z, char *err, size_t errlen) {
  if (z == NULL || z->path == NULL) return LT_OK;
  keylist_t l;
  int rc = read_list(z->path, &l, err, errlen);
  if (rc != LT_OK) return rc;
  pthread_mutex_lock(&z->mu);
  keylist_t old = z->list;
  z->list = l;
  pthread_mutex_unlock(&z->mu);
  free(old.keys);
  lt__log(LT_LOG_INFO, "--allow %s re-read: %zu allowed client keys", z->path, l.n);
  return LT_OK;
}

void lt__zap_stop(lt_zap_t *z) {
  if (z == NULL) return;
  atomic_store(&z->stop, true);
  pthread_join(z->thread, NULL);
  free(z->list.keys);
  free(z->path);
  pthread_mutex_destroy(&z->mu);
  free(z);
}
