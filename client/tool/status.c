/* status.c: `lithium status [--hosts FILE|DIR | ENDPOINT...] [--json] [--timeout MS]`: asks
 * every server at once how it is (lt_status_query: a STATUS over a DEALER of its own, no
 * session opened) and prints one row a server, or a JSON array. A server that does not
 * answer within the timeout is a row saying so, and makes the exit status 1. Main thread
 * only. */
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>
#include "cli.h"

#define DEFAULT_TIMEOUT_MS 3000

/* The servers to ask (their endpoints, and keys or NULL) and our key pair. */
typedef struct hosts {
  char **ep, **key;
  size_t n;
  char pub[LT_KEY_LEN + 1], sec[LT_KEY_LEN + 1]; /* --curve-key / LITHIUM_CURVE_KEY, or "" */
} hosts_t;

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

/* add_host appends one server (lt_hosts_fn). */
static int add_host(void *ud, const char *endpoint, const char *key) {
  hosts_t *h = ud;
  char **ep = realloc(h->ep, (h->n + 1) * sizeof *ep);
  if (ep != NULL) h->ep = ep;
  char **k = realloc(h->key, (h->n + 1) * sizeof *k);
  if (k != NULL) h->key = k;
  if (ep == NULL || k == NULL) return LT_ENOMEM;
  ep[h->n] = strdup(endpoint);
  k[h->n] = key != NULL ? strdup(key) : NULL;
  h->n++;
  return ep[h->n - 1] != NULL && (key == NULL || k[h->n - 1] != NULL) ? 0 : LT_ENOMEM;
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

static void print_table(const lt_server_status_t *st, size_t n) {
  printf("%-20s %-26s %-8s %-16s %8s %7s %5s %6s %8s %6s %6s %6s %7s %10s  %s\n", "NAME",
         "ENDPOINT", "VERSION", "INCARNATION", "UPTIME", "THREADS", "CORES", "SPEED", "SESSIONS",
         "ACTIVE", "QUEUED", "PARKED", "VALUES", "BYTES", "MODULES");
  for (size_t i = 0; i < n; i++) {
    const lt_server_status_t *w = &st[i];
    if (!w->answered) {
      printf("%-20s %-26s %s\n", "-", w->endpoint, w->error);
      continue;
    }
    char up[32], bytes[32];
    fmt_uptime(w->uptime_ms, up, sizeof up);
    fmt_bytes(w->value_bytes, bytes, sizeof bytes);
    printf("%-20s %-26s %-8s %016llx %8s %7u %5u %6.2f %8u %6u %6u %6u %7llu %10s  ", w->name,
           w->endpoint, w->version, (unsigned long long)w->incarnation, up, w->threads, w->cores,
           w->speed, w->sessions, w->active, w->queued, w->parked,
           (unsigned long long)w->values_held, bytes);
    /* Each module with the first 12 hex digits of its SHA-256: enough to tell builds apart. */
    for (size_t k = 0; k < w->nmodules; k++)
      printf("%s%s:%.12s", k ? "," : "", w->modules[k].name,
             w->modules[k].sha256[0] != '\0' ? w->modules[k].sha256 : "?");
    printf("%s%s", w->nmodules == 0 ? "-" : "", w->stopping ? " (stopping)" : "");
    if (w->draining > 0)
      printf(" (draining: %u session%s)", w->draining, w->draining == 1 ? "" : "s");
    putchar('\n');
  }
}

static int print_json(const lt_server_status_t *st, size_t n) {
  char *text = lt_status_json(st, n);
  if (text == NULL) return LT_ENOMEM;
  puts(text);
  free(text);
  return LT_OK;
}

/* ask_and_print asks the servers and prints their answers. Returns the exit status. */
static int ask_and_print(const hosts_t *h, int json, int timeout_ms) {
  lt_server_status_t *st = NULL;
  size_t n = 0;
  if (lt_status_query(&st, &n, (const char *const *)h->ep, (const char *const *)h->key, h->n,
                      h->pub, h->sec, timeout_ms) != LT_OK) {
    fprintf(stderr, "lithium status: cannot create ZeroMQ sockets\n");
    return LT_EXIT_FAILED;
  }
  int status = LT_EXIT_OK;
  if (json ? print_json(st, n) != LT_OK : (print_table(st, n), 0)) status = LT_EXIT_FAILED;
  for (size_t i = 0; i < n; i++)
    if (!st[i].answered) status = LT_EXIT_FAILED;
  if (fflush(stdout) != 0) status = LT_EXIT_FAILED;
  lt_status_free(st, n);
  return status;
}

int lt__status_main(int argc, char **argv) {
  hosts_t r = {0};
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
      int rc = lt_hosts_read(argv[++i], add_host, &r, err, sizeof err);
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
      if (lt_keypair_read(argv[++i], r.pub, r.sec, err, sizeof err) != LT_OK) {
        fprintf(stderr, "lithium status: %s\n", err);
        status = LT_EXIT_USAGE;
      }
    } else if (strncmp(a, "tcp://", 6) == 0) {
      /* "ENDPOINT" or "ENDPOINT KEY", as a hosts-file line. */
      char ep[LT_ENDPOINT_MAX + 1], key[LT_KEY_LEN + 1];
      sources++;
      if (lt_host_split(a, ep, key) != LT_OK) {
        fprintf(stderr, "lithium status: bad host '%s'\n", a);
        status = LT_EXIT_USAGE;
      } else if (add_host(&r, ep, key[0] != '\0' ? key : NULL) != 0) {
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
      lt_keypair_read(envkey, r.pub, r.sec, err, sizeof err) != LT_OK) {
    fprintf(stderr, "lithium status: LITHIUM_CURVE_KEY: %s\n", err);
    status = LT_EXIT_USAGE;
  }
  if (status == LT_EXIT_OK && sources == 0) {
    const char *env = getenv("LITHIUM_HOSTS");
    if (env == NULL) {
      fprintf(stderr, "lithium status: name the servers (--hosts FILE or ENDPOINT...)\n");
      usage(stderr);
      status = LT_EXIT_USAGE;
    } else if (lt_hosts_read(env, add_host, &r, err, sizeof err) != LT_OK) {
      fprintf(stderr, "lithium status: LITHIUM_HOSTS: %s\n", err);
      status = LT_EXIT_FAILED;
    }
  }
  if (status == LT_EXIT_OK) status = ask_and_print(&r, json, timeout_ms);
out:
  for (size_t i = 0; i < r.n; i++) {
    free(r.ep[i]);
    free(r.key[i]);
  }
  free(r.ep);
  free(r.key);
  return status;
}
