/* status.c: `lithium status [--hosts FILE|DIR | ENDPOINT...] [--json] [--timeout MS]`: asks
 * every server at once for a STATUS reply over a DEALER of its own (no session is opened)
 * and prints one row a server, or a JSON array. A server that does not answer within the
 * timeout is a row saying so, and makes the exit status 1. Main thread only. */
#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include <lithium/error.h>
#include "clock.h"
#include "cli.h"
#include "codec.h"
#include "curve.h"
#include "hosts.h"
#include "json.h"

#define DEFAULT_TIMEOUT_MS 3000

typedef struct row {
  char *endpoint;
  char key[41]; /* the server's CURVE public key (Z85), "" when it has none */
  void *sock;
  int done;      /* an answer came, whatever it said */
  int answered;  /* ... and it was a status */
  char why[256]; /* when it did not answer with a status */
  char *server_id, *version, *bound;
  uint32_t protocol, cores, sessions, draining;
  uint64_t uptime_ms, value_bytes;
  double speed;
  lt_load_t load;
  uint32_t nmodules;
  char **mod_names, **mod_hashes; /* loaded kernel modules and their hex SHA-256 */
} row_t;

typedef struct rows {
  row_t *v;
  size_t n, cap;
  char pub[41], sec[41]; /* --curve-key / LITHIUM_CURVE_KEY: our key pair, "" when none */
} rows_t;

static void usage(FILE *f) {
  fputs("usage: lithium status [--hosts FILE|DIR] [ENDPOINT...] [--json] [--timeout MS]\n"
        "                      [--curve-key FILE]\n"
        "  --curve-key FILE   our CURVE key pair (lithium keygen; also LITHIUM_CURVE_KEY), for\n"
        "                     servers given with their public key ('ENDPOINT KEY' or a hosts\n"
        "                     file line); the servers must allow its public key\n"
        "  asks each server (a hosts file, an announce directory, endpoints, or\n"
        "  $LITHIUM_HOSTS) how it is: name, version, incarnation, uptime, threads, cores,\n"
        "  speed, sessions, active/queued/parked instructions, values held and their bytes,\n"
        "  loaded kernel modules with the start of their SHA-256; \"(stopping)\" after\n"
        "  SIGTERM or SIGUSR1, \"(draining: N sessions)\" while N clients move their work\n"
        "  off it (lt_eval_remove_host)\n"
        "  --json         one JSON array, an object a server\n"
        "  --timeout MS   wait this long for the answers (default 3000)\n"
        "Exit status: 0 every server answered, 1 one did not, 2 bad usage.\n",
        f);
}

static int add_row(void *ud, const char *endpoint, const char *key) {
  rows_t *r = ud;
  for (size_t i = 0; i < r->n; i++)
    if (strcmp(r->v[i].endpoint, endpoint) == 0) return 0;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    row_t *v = realloc(r->v, cap * sizeof *v);
    if (v == NULL) return LT_ENOMEM;
    r->v = v;
    r->cap = cap;
  }
  row_t *w = &r->v[r->n];
  memset(w, 0, sizeof *w);
  if ((w->endpoint = strdup(endpoint)) == NULL) return LT_ENOMEM;
  if (key != NULL) snprintf(w->key, sizeof w->key, "%s", key);
  snprintf(w->why, sizeof w->why, "no answer");
  r->n++;
  return 0;
}

static char *dup_str(const char *s) {
  return strdup(s != NULL ? s : "");
}

/* take_reply reads one message from row w's socket and records what it says. */
static void take_reply(row_t *w) {
  zmq_msg_t parts[8];
  lt_bytes_t fr[8];
  size_t n = 0;
  int more = 1;
  while (more) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, w->sock, ZMQ_DONTWAIT) < 0) {
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
  w->done = 1;
  if (rc != LT_OK) {
    snprintf(w->why, sizeof w->why, "bad answer: %s", lt_strerror(rc));
  } else if (m.type == LT_MSG_ERROR) {
    snprintf(w->why, sizeof w->why, "refused: %s", m.u.error.message);
  } else if (m.type != LT_MSG_STATUS_REPLY) {
    snprintf(w->why, sizeof w->why, "unexpected %s answer", lt__msg_type_name(m.type));
  } else {
    w->answered = 1;
    w->server_id = dup_str(m.u.status_reply.server_id);
    w->version = dup_str(m.u.status_reply.version);
    w->bound = dup_str(m.u.status_reply.endpoint);
    w->protocol = m.u.status_reply.protocol;
    w->cores = m.u.status_reply.cores;
    w->sessions = m.u.status_reply.sessions;
    w->draining = m.u.status_reply.draining;
    w->uptime_ms = m.u.status_reply.uptime_ms;
    w->value_bytes = m.u.status_reply.value_bytes;
    w->speed = m.u.status_reply.speed;
    w->load = m.load;
    uint32_t nm = m.u.status_reply.nmodules;
    w->mod_names = calloc(nm ? nm : 1, sizeof *w->mod_names);
    w->mod_hashes = calloc(nm ? nm : 1, sizeof *w->mod_hashes);
    for (uint32_t i = 0; w->mod_names != NULL && w->mod_hashes != NULL && i < nm; i++) {
      w->mod_names[i] = dup_str(m.u.status_reply.modules[i].name);
      w->mod_hashes[i] = dup_str(m.u.status_reply.modules[i].sha256);
      w->nmodules = i + 1;
    }
  }
  if (rc == LT_OK) lt__msg_clear(&m);
  for (size_t i = 0; i < n; i++)
    zmq_msg_close(&parts[i]);
}

/* ask sends STATUS to every server and collects the answers until `timeout_ms` passed. */
static int ask(rows_t *r, int timeout_ms) {
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
  for (size_t i = 0; i < r->n; i++) {
    row_t *w = &r->v[i];
    int zero = 0;
    w->sock = zmq_socket(ctx, ZMQ_DEALER);
    if (w->sock == NULL) continue;
    zmq_setsockopt(w->sock, ZMQ_LINGER, &zero, sizeof zero);
    if (strchr(w->endpoint, '[') != NULL) {
      int on = 1;
      zmq_setsockopt(w->sock, ZMQ_IPV6, &on, sizeof on);
    }
    if (w->key[0] != '\0' && r->sec[0] == '\0') {
      snprintf(w->why, sizeof w->why,
               "auth refused: the server has a CURVE key, we have none "
               "(--curve-key)");
    } else if (w->key[0] != '\0' &&
               (zmq_setsockopt(w->sock, ZMQ_CURVE_SERVERKEY, w->key, 40) != 0 ||
                zmq_setsockopt(w->sock, ZMQ_CURVE_PUBLICKEY, r->pub, 40) != 0 ||
                zmq_setsockopt(w->sock, ZMQ_CURVE_SECRETKEY, r->sec, 40) != 0)) {
      snprintf(w->why, sizeof w->why, "cannot use CURVE: %s", zmq_strerror(zmq_errno()));
    } else if (zmq_connect(w->sock, w->endpoint) != 0) {
      snprintf(w->why, sizeof w->why, "cannot connect: %s", zmq_strerror(zmq_errno()));
    } else if (zmq_send(w->sock, hdr, hlen, ZMQ_DONTWAIT) < 0) {
      snprintf(w->why, sizeof w->why, "cannot send: %s", zmq_strerror(zmq_errno()));
    } else {
      waiting++;
      continue;
    }
    zmq_close(w->sock);
    w->sock = NULL;
  }
  free(hdr);
  zmq_pollitem_t *items = calloc(r->n ? r->n : 1, sizeof *items);
  size_t *idx = calloc(r->n ? r->n : 1, sizeof *idx);
  int64_t deadline = lt__clock_ms() + timeout_ms;
  while (waiting > 0 && items != NULL && idx != NULL) {
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
      if (r->v[i].sock == NULL || r->v[i].done) continue;
      items[k] = (zmq_pollitem_t){.socket = r->v[i].sock, .events = ZMQ_POLLIN};
      idx[k++] = i;
    }
    waiting = k;
    int64_t left = deadline - lt__clock_ms();
    if (k == 0 || left <= 0) break;
    int got = zmq_poll(items, (int)k, (long)left);
    if (got < 0 && zmq_errno() != EINTR) break;
    for (size_t j = 0; got > 0 && j < k; j++)
      if (items[j].revents & ZMQ_POLLIN) take_reply(&r->v[idx[j]]);
  }
  free(items);
  free(idx);
  for (size_t i = 0; i < r->n; i++) {
    if (r->v[i].sock != NULL) zmq_close(r->v[i].sock);
    r->v[i].sock = NULL;
  }
  zmq_ctx_term(ctx);
  return LT_OK;
}

static void fmt_uptime(uint64_t ms, char *buf, size_t len) {
  uint64_t s = ms / 1000;
  if (s >= 86400)
    snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
             (unsigned long long)(s % 86400 / 3600));
  else if (s >= 3600)
    snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
             (unsigned long long)(s % 3600 / 60));
  else if (s >= 60)
    snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
  else
    snprintf(buf, len, "%llus", (unsigned long long)s);
}

static void fmt_bytes(uint64_t b, char *buf, size_t len) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%llu B", (unsigned long long)b);
  else
    snprintf(buf, len, "%.1f %s", v, unit[u]);
}

static void print_table(const rows_t *r) {
  printf("%-20s %-26s %-8s %-16s %8s %7s %5s %6s %8s %6s %6s %6s %7s %10s  %s\n", "NAME",
         "ENDPOINT", "VERSION", "INCARNATION", "UPTIME", "THREADS", "CORES", "SPEED", "SESSIONS",
         "ACTIVE", "QUEUED", "PARKED", "VALUES", "BYTES", "MODULES");
  for (size_t i = 0; i < r->n; i++) {
    const row_t *w = &r->v[i];
    if (!w->answered) {
      printf("%-20s %-26s %s\n", "-", w->endpoint, w->why);
      continue;
    }
    char up[32], bytes[32];
    fmt_uptime(w->uptime_ms, up, sizeof up);
    fmt_bytes(w->value_bytes, bytes, sizeof bytes);
    printf("%-20s %-26s %-8s %016llx %8s %7u %5u %6.2f %8u %6u %6u %6u %7llu %10s  ", w->server_id,
           w->endpoint, w->version, (unsigned long long)w->load.incarnation, up, w->load.threads,
           w->cores, w->speed, w->sessions, w->load.active, w->load.queued, w->load.parked,
           (unsigned long long)w->load.values_held, bytes);
    /* Each module with the first 12 hex digits of its SHA-256: enough to tell builds apart. */
    for (uint32_t k = 0; k < w->nmodules; k++)
      printf("%s%s:%.12s", k ? "," : "", w->mod_names[k],
             w->mod_hashes[k][0] != '\0' ? w->mod_hashes[k] : "?");
    printf("%s%s", w->nmodules == 0 ? "-" : "", w->load.stopping ? " (stopping)" : "");
    if (w->draining > 0)
      printf(" (draining: %u session%s)", w->draining, w->draining == 1 ? "" : "s");
    putchar('\n');
  }
}

static int print_json(const rows_t *r) {
  lt_json_t j = {0};
  lt__json_array_open(&j, NULL);
  for (size_t i = 0; i < r->n; i++) {
    const row_t *w = &r->v[i];
    lt__json_object_open(&j, NULL);
    lt__json_str(&j, "endpoint", w->endpoint);
    lt__json_bool(&j, "answered", w->answered);
    if (!w->answered) {
      lt__json_str(&j, "error", w->why);
    } else {
      char inc[20];
      snprintf(inc, sizeof inc, "%016llx", (unsigned long long)w->load.incarnation);
      lt__json_str(&j, "name", w->server_id);
      lt__json_str(&j, "version", w->version);
      lt__json_u64(&j, "protocol", w->protocol);
      lt__json_str(&j, "bound", w->bound);
      lt__json_str(&j, "incarnation", inc);
      lt__json_u64(&j, "uptime_ms", w->uptime_ms);
      lt__json_u64(&j, "threads", w->load.threads);
      lt__json_u64(&j, "cores", w->cores);
      lt__json_double(&j, "speed", w->speed);
      lt__json_u64(&j, "sessions", w->sessions);
      lt__json_u64(&j, "draining", w->draining);
      lt__json_u64(&j, "active", w->load.active);
      lt__json_u64(&j, "queued", w->load.queued);
      lt__json_u64(&j, "parked", w->load.parked);
      lt__json_u64(&j, "completed", w->load.completed);
      lt__json_double(&j, "cpu", w->load.cpu);
      lt__json_u64(&j, "values_held", w->load.values_held);
      lt__json_u64(&j, "value_bytes", w->value_bytes);
      lt__json_bool(&j, "stopping", w->load.stopping);
      lt__json_array_open(&j, "modules");
      for (uint32_t k = 0; k < w->nmodules; k++) {
        lt__json_object_open(&j, NULL);
        lt__json_str(&j, "name", w->mod_names[k]);
        lt__json_str(&j, "sha256", w->mod_hashes[k]);
        lt__json_object_close(&j);
      }
      lt__json_array_close(&j);
    }
    lt__json_object_close(&j);
  }
  lt__json_array_close(&j);
  char *text = lt__json_take(&j);
  if (text == NULL) return LT_ENOMEM;
  puts(text);
  free(text);
  return LT_OK;
}

int lt__status_main(int argc, char **argv) {
  rows_t r = {0};
  int json = 0, timeout_ms = DEFAULT_TIMEOUT_MS, status = LT_EXIT_OK, sources = 0;
  char err[600];
  for (int i = 1; i < argc && status == LT_EXIT_OK; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      goto out;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if ((strcmp(a, "--hosts") == 0 || strcmp(a, "--hosts-file") == 0) && i + 1 < argc) {
      int rc = lt__hosts_read(argv[++i], add_row, &r, err, sizeof err);
      sources++;
      if (rc != LT_OK) {
        fprintf(stderr, "lithium status: %s\n", err);
        status = rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
      }
    } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 600000) {
        fprintf(stderr, "lithium status: bad --timeout '%s' (1..600000 ms)\n", argv[i]);
        status = LT_EXIT_USAGE;
      }
      timeout_ms = (int)v;
    } else if (strcmp(a, "--curve-key") == 0 && i + 1 < argc) {
      if (lt__curve_load_keypair(argv[++i], r.pub, r.sec, err, sizeof err) != LT_OK) {
        fprintf(stderr, "lithium status: %s\n", err);
        status = LT_EXIT_USAGE;
      }
    } else if (strncmp(a, "tcp://", 6) == 0) {
      /* "ENDPOINT" or "ENDPOINT KEY", as a hosts-file line. */
      char ep[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
      sources++;
      if (lt__host_parse(a, ep, key) != LT_OK) {
        fprintf(stderr, "lithium status: bad host '%s'\n", a);
        status = LT_EXIT_USAGE;
      } else if (add_row(&r, ep, key[0] != '\0' ? key : NULL) != 0) {
        status = LT_EXIT_FAILED;
      }
    } else {
      fprintf(stderr, "lithium status: bad argument '%s'\n", a);
      usage(stderr);
      status = LT_EXIT_USAGE;
    }
  }
  const char *envkey = getenv("LITHIUM_CURVE_KEY");
  if (status == LT_EXIT_OK && r.sec[0] == '\0' && envkey != NULL && *envkey != '\0' &&
      lt__curve_load_keypair(envkey, r.pub, r.sec, err, sizeof err) != LT_OK) {
    fprintf(stderr, "lithium status: LITHIUM_CURVE_KEY: %s\n", err);
    status = LT_EXIT_USAGE;
  }
  if (status == LT_EXIT_OK && sources == 0) {
    const char *env = getenv("LITHIUM_HOSTS");
    if (env == NULL) {
      fprintf(stderr, "lithium status: name the servers (--hosts FILE or ENDPOINT...)\n");
      usage(stderr);
      status = LT_EXIT_USAGE;
    } else if (lt__hosts_read(env, add_row, &r, err, sizeof err) != LT_OK) {
      fprintf(stderr, "lithium status: LITHIUM_HOSTS: %s\n", err);
      status = LT_EXIT_FAILED;
    }
  }
  if (status != LT_EXIT_OK) goto out;
  if (ask(&r, timeout_ms) != LT_OK) {
    fprintf(stderr, "lithium status: cannot create ZeroMQ sockets\n");
    status = LT_EXIT_FAILED;
    goto out;
  }
  if (json ? print_json(&r) != LT_OK : (print_table(&r), 0)) status = LT_EXIT_FAILED;
  for (size_t i = 0; i < r.n; i++)
    if (!r.v[i].answered) status = LT_EXIT_FAILED;
  if (fflush(stdout) != 0) status = LT_EXIT_FAILED;
out:
  for (size_t i = 0; i < r.n; i++) {
    free(r.v[i].endpoint);
    free(r.v[i].server_id);
    free(r.v[i].version);
    free(r.v[i].bound);
    for (uint32_t k = 0; k < r.v[i].nmodules; k++) {
      free(r.v[i].mod_names[k]);
      free(r.v[i].mod_hashes[k]);
    }
    free(r.v[i].mod_names);
    free(r.v[i].mod_hashes);
  }
  free(r.v);
  return status;
}
