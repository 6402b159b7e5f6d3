/* args.c: lithium-server's flags (getopt_long) into lt_srv_args_t, with the usage text.
 * Touches no global state except getopt's; values are validated here so the server proper
 * never sees a nonsensical one. One parse at a time (getopt is not reentrant). */
#include "utf8.h"
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "bufpool.h"
#include "log.h"
#include "msg.h"

#ifndef LT_VERSION
#define LT_VERSION "0.0.0"
#endif

enum {
  OPT_LISTEN = 'l',
  OPT_THREADS = 't',
  OPT_MODULES = 'm',
  OPT_NAME = 'n',
  OPT_HELP = 'h',
  OPT_VERSION = 'V',
  OPT_LOG_LEVEL = 256,
  OPT_MAX_FRAME,
  OPT_IDLE_TIMEOUT,
  OPT_FETCH_TIMEOUT,
  OPT_MAX_PEERS,
  OPT_SLOWDOWN,
  OPT_SPEED,
  OPT_NO_SUPERVISE,
  OPT_NO_SHM,
  OPT_SHM,
  OPT_MAX_SESSION_BYTES,
  OPT_POOL_BYTES,
  OPT_MAX_PARKED,
  OPT_MAX_QUEUED,
  OPT_MAX_VALUES,
  OPT_MAX_FETCHES,
  OPT_MAX_SESSIONS,
  OPT_MAX_BYTES,
  OPT_MAX_TOTAL_VALUES,
  OPT_CURVE_KEY,
  OPT_ALLOW,
  OPT_INSECURE,
  OPT_UNSAFE_MODULES,
  OPT_ANNOUNCE,
  OPT_ADVERTISE,
  OPT_ACCEPT_MODULES
};

static const struct option long_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"modules", required_argument, NULL, OPT_MODULES},
    {"name", required_argument, NULL, OPT_NAME},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"max-frame", required_argument, NULL, OPT_MAX_FRAME},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"fetch-timeout", required_argument, NULL, OPT_FETCH_TIMEOUT},
    {"max-peers", required_argument, NULL, OPT_MAX_PEERS},
    {"slowdown", required_argument, NULL, OPT_SLOWDOWN},
    {"speed", required_argument, NULL, OPT_SPEED},
    {"no-supervise", no_argument, NULL, OPT_NO_SUPERVISE},
    {"no-shm", no_argument, NULL, OPT_NO_SHM},
    {"shm", no_argument, NULL, OPT_SHM},
    {"max-session-bytes", required_argument, NULL, OPT_MAX_SESSION_BYTES},
    {"pool-bytes", required_argument, NULL, OPT_POOL_BYTES},
    {"max-parked", required_argument, NULL, OPT_MAX_PARKED},
    {"max-queued", required_argument, NULL, OPT_MAX_QUEUED},
    {"max-session-values", required_argument, NULL, OPT_MAX_VALUES},
    {"max-session-fetches", required_argument, NULL, OPT_MAX_FETCHES},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"max-values", required_argument, NULL, OPT_MAX_TOTAL_VALUES},
    {"curve-key", required_argument, NULL, OPT_CURVE_KEY},
    {"allow", required_argument, NULL, OPT_ALLOW},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"allow-unsafe-modules", no_argument, NULL, OPT_UNSAFE_MODULES},
    {"announce", required_argument, NULL, OPT_ANNOUNCE},
    {"advertise", required_argument, NULL, OPT_ADVERTISE},
    {"accept-modules", required_argument, NULL, OPT_ACCEPT_MODULES},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0}};

void lt__args_usage(FILE *f) {
  fprintf(f,
          "usage: lithium-server [options]\n"
          "  -l, --listen EP        endpoint to bind (default " LT_SRV_DEFAULT_LISTEN ");\n"
          "                         port 0 or * picks a free port\n"
          "  -t, --threads N        worker threads (default 3 x cores, at most %d)\n"
          "  -m, --modules DIR      directory of kernel modules (repeatable)\n"
          "  -n, --name NAME        server id shown to clients (default hostname:pid)\n"
          "      --log-level L      debug, info, warn, error or off (default: $LITHIUM_LOG)\n"
          "      --max-frame BYTES  largest frame accepted, k/m/g suffixes (default 1g)\n"
          "      --idle-timeout MS  drop a session silent this long, 0 = never (default %d)\n"
          "      --fetch-timeout MS fail a fetch from a peer server with no answer about it\n"
          "                         this long after it was asked (default %d)\n"
          "      --max-peers N      links to peer servers kept open, 1..%d (default %d);\n"
          "                         idle ones are closed to make room\n"
          "      --slowdown F       emulation: run kernels F times slower (default 1)\n"
          "      --speed S          experiments: report speed S (> 0) in welcome instead of\n"
          "                         the start-up calibration (1.0 ~ a typical core)\n"
          "      --no-supervise     run without a supervisor process (one that restarts a\n"
          "                         worker killed by a signal on the same endpoint)\n"
          "      --shm              move large values to peer servers of this host as memfds\n"
          "                         over a unix socket, not by ZeroMQ (off by default: no\n"
          "                         faster than loopback TCP where fresh pages are dear)\n"
          "      --no-shm           by ZeroMQ only (the default)\n"
          "      --max-session-bytes BYTES  values one session may hold, k/m/g (default 1g)\n"
          "      --pool-bytes BYTES  idle output buffers kept mapped for reuse, k/m/g\n"
          "                         (default 256m; 0: every output malloc'd and freed)\n"
          "      --max-parked N     instructions of one session waiting for inputs (default %d)\n"
          "      --max-queued N     instructions of one session queued or running (default %d)\n"
          "      --max-session-values N  values (pending, ready or failed) one session may\n"
          "                         hold (default %d)\n"
          "      --max-session-fetches N  fetches of one session waiting for their values\n"
          "                         (default %d)\n"
          "      --max-sessions N   sessions at once; more hellos are refused\n"
          "                         (default min(%d, open-file limit / 2))\n"
          "      --max-bytes BYTES  values all sessions together may hold, k/m/g (default\n"
          "                         half the physical memory)\n"
          "      --max-values N     values all sessions together may hold (default %d)\n"
          "      --curve-key FILE   CURVE key pair (lithium keygen): clients must use CURVE\n"
          "                         and a key the server allows\n"
          "      --allow FILE       allowed client public keys, one Z85 key a line, optional\n"
          "                         name after it, '#' comments; re-read on SIGHUP. The\n"
          "                         server's own public key is always allowed\n"
          "      --insecure         allow listening on a non-loopback address without\n"
          "                         --curve-key (anyone who reaches it runs its kernels)\n"
          "      --allow-unsafe-modules  use module directories and files writable by other\n"
          "                         users than the server's (or root)\n"
          "      --accept-modules DIR  take kernel modules shipped by clients (ship_modules),\n"
          "                         verified by SHA-256 and stored as DIR/<sha256>.so (mode\n"
          "                         0700), each loaded for the session that shipped it only;\n"
          "                         needs --curve-key unless the listen is loopback\n"
          "      --announce DIR     once bound, write DIR/<name>.endpoint (a hosts-file line)\n"
          "                         for clients with hosts=DIR; removed at exit\n"
          "      --advertise ADDR   the host (or tcp:// endpoint) to announce instead of the\n"
          "                         bound one; default for a * or 0.0.0.0 listen: the first\n"
          "                         non-loopback IPv4 address\n"
          "  -h, --help             show this help\n"
          "  -V, --version          show the version\n"
          "On start the server prints \"READY <endpoint>\" on stdout.\n",
          LT_SRV_MAX_THREADS, LT_SRV_DEFAULT_IDLE_MS, LT_SRV_DEFAULT_FETCH_MS, LT_SRV_MAX_PEERS,
          LT_SRV_DEFAULT_MAX_PEERS, LT_SRV_DEFAULT_MAX_PARKED, LT_SRV_DEFAULT_MAX_QUEUED,
          LT_SRV_DEFAULT_MAX_VALUES, LT_SRV_DEFAULT_MAX_FETCHES, LT_SRV_MAX_SESSIONS_CAP,
          LT_SRV_DEFAULT_MAX_TOTAL_VALUES);
}

int lt__args_parse_size(const char *s, uint64_t *out) {
  if (s == NULL || *s < '0' || *s > '9') return LT_EINVAL;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return LT_EINVAL;
  unsigned shift = 0;
  switch (*end) {
  case '\0':
    break;
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    return LT_EINVAL;
  }
  if (*end != '\0' || v == 0 || v > ((1ull << 40) >> shift)) return LT_EINVAL;
  *out = (uint64_t)v << shift;
  return LT_OK;
}

/* parse_uint parses a decimal in [lo, hi]. */
static int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (s == NULL || *s < '0' || *s > '9') return LT_EINVAL;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return LT_EINVAL;
  *out = v;
  return LT_OK;
}

/* utf8_valid tells whether s is well-formed UTF-8 without control characters, as a name
 * sent to clients must be (their decoder checks). */
static int utf8_valid(const char *s) {
  for (const char *p = s; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return 0;
  return lt__utf8_valid(s, strlen(s));
}

static int default_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  long t = 3 * cores;
  return t > LT_SRV_MAX_THREADS ? LT_SRV_MAX_THREADS : (int)t;
}

static int usage_error(FILE *err, const char *fmt, const char *arg) {
  fputs("lithium-server: ", err);
  fprintf(err, fmt, arg);
  fputc('\n', err);
  lt__args_usage(err);
  return LT_ARGS_EXIT_USAGE;
}

static int replace_str(char **dst, const char *src) {
  char *s = strdup(src);
  if (s == NULL) return LT_ENOMEM;
  free(*dst);
  *dst = s;
  return LT_OK;
}

int lt__args_parse(lt_srv_args_t *a, int argc, char **argv, FILE *out, FILE *err) {
  memset(a, 0, sizeof *a);
  a->threads = default_threads();
  a->log_level = -1;
  a->max_frame = LT_SRV_DEFAULT_MAX_FRAME;
  a->idle_ms = LT_SRV_DEFAULT_IDLE_MS;
  a->fetch_ms = LT_SRV_DEFAULT_FETCH_MS;
  a->no_shm = true; /* --shm: docs/benchmarks.md, "Same-host transfers" */
  a->max_peers = LT_SRV_DEFAULT_MAX_PEERS;
  a->slowdown = 1.0;
  a->max_session_bytes = LT_SRV_DEFAULT_SESSION_BYTES;
  a->pool_bytes = LT_BUFPOOL_DEFAULT_MAX;
  a->max_parked = LT_SRV_DEFAULT_MAX_PARKED;
  a->max_queued = LT_SRV_DEFAULT_MAX_QUEUED;
  a->max_values = LT_SRV_DEFAULT_MAX_VALUES;
  a->max_fetches = LT_SRV_DEFAULT_MAX_FETCHES;
  a->max_total_values = LT_SRV_DEFAULT_MAX_TOTAL_VALUES;
  if (replace_str(&a->listen, LT_SRV_DEFAULT_LISTEN) != LT_OK)
    return usage_error(err, "%s", "out of memory");

  /* optind = 0 makes glibc re-initialise getopt, so tests may parse many times. */
  optind = 0;
  opterr = 0;
  for (;;) {
    int idx = 0;
    int c = getopt_long(argc, argv, ":l:t:m:n:hV", long_opts, &idx);
    if (c == -1) break;
    uint64_t v;
    char *end;
    switch (c) {
    case OPT_LISTEN:
      if (optarg[0] == '\0' || strlen(optarg) > 255 || strstr(optarg, "://") == NULL)
        return usage_error(err, "bad --listen endpoint '%s'", optarg);
      if (replace_str(&a->listen, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_THREADS:
      if (parse_uint(optarg, 1, LT_SRV_MAX_THREADS, &v) != LT_OK)
        return usage_error(err, "bad --threads '%s' (1..1024)", optarg);
      a->threads = (int)v;
      break;
    case OPT_MODULES: {
      if (optarg[0] == '\0') return usage_error(err, "%s", "empty --modules directory");
      char **m = realloc(a->modules, (a->nmodules + 1) * sizeof *m);
      if (m == NULL) return usage_error(err, "%s", "out of memory");
      a->modules = m;
      if ((m[a->nmodules] = strdup(optarg)) == NULL) return usage_error(err, "%s", "out of memory");
      a->nmodules++;
      break;
    }
    case OPT_NAME:
      if (optarg[0] == '\0' || strlen(optarg) > LT_SRV_NAME_MAX || !utf8_valid(optarg))
        return usage_error(err, "bad --name '%s' (1..255 bytes of printable UTF-8)", optarg);
      if (replace_str(&a->name, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_LOG_LEVEL: {
      int lvl = lt__log_parse_level(optarg);
      if (lvl < 0) return usage_error(err, "bad --log-level '%s'", optarg);
      a->log_level = lvl;
      break;
    }
    case OPT_MAX_FRAME:
      if (lt__args_parse_size(optarg, &a->max_frame) != LT_OK)
        return usage_error(err, "bad --max-frame '%s'", optarg);
      break;
    case OPT_IDLE_TIMEOUT:
      if (parse_uint(optarg, 0, UINT64_C(1) << 40, &a->idle_ms) != LT_OK)
        return usage_error(err, "bad --idle-timeout '%s'", optarg);
      break;
    case OPT_FETCH_TIMEOUT:
      if (parse_uint(optarg, 10, UINT64_C(1) << 40, &a->fetch_ms) != LT_OK)
        return usage_error(err, "bad --fetch-timeout '%s' (at least 10)", optarg);
      break;
    case OPT_MAX_PEERS:
      if (parse_uint(optarg, 1, LT_SRV_MAX_PEERS, &v) != LT_OK)
        return usage_error(err, "bad --max-peers '%s' (1..4096)", optarg);
      a->max_peers = (uint32_t)v;
      break;
    case OPT_SLOWDOWN:
      errno = 0;
      a->slowdown = strtod(optarg, &end);
      if (errno != 0 || end == optarg || *end != '\0' || !isfinite(a->slowdown) ||
          a->slowdown < 1.0 || a->slowdown > 1000.0)
        return usage_error(err, "bad --slowdown '%s' (1..1000)", optarg);
      break;
    case OPT_SPEED:
      errno = 0;
      a->speed = strtod(optarg, &end);
      if (errno != 0 || end == optarg || *end != '\0' || !isfinite(a->speed) || a->speed <= 0.0 ||
          a->speed > 1e6)
        return usage_error(err, "bad --speed '%s' (above 0, at most 1e6)", optarg);
      break;
    case OPT_NO_SUPERVISE:
      a->no_supervise = true;
      break;
    case OPT_NO_SHM:
      a->no_shm = true;
      break;
    case OPT_SHM:
      a->no_shm = false;
      break;
    case OPT_MAX_SESSION_BYTES:
      if (lt__args_parse_size(optarg, &a->max_session_bytes) != LT_OK)
        return usage_error(err, "bad --max-session-bytes '%s'", optarg);
      break;
    case OPT_MAX_BYTES:
      if (lt__args_parse_size(optarg, &a->max_bytes) != LT_OK || a->max_bytes == 0)
        return usage_error(err, "bad --max-bytes '%s'", optarg);
      break;
    case OPT_MAX_TOTAL_VALUES:
      if (parse_uint(optarg, 1, UINT64_MAX, &v) != LT_OK)
        return usage_error(err, "bad count '%s' (at least 1)", optarg);
      a->max_total_values = v;
      break;
    case OPT_POOL_BYTES:
      /* 0 turns the pool off; lt__args_parse_size refuses it, as a quota of 0 is a mistake. */
      if (strcmp(optarg, "0") == 0)
        a->pool_bytes = 0;
      else if (lt__args_parse_size(optarg, &a->pool_bytes) != LT_OK)
        return usage_error(err, "bad --pool-bytes '%s'", optarg);
      break;
    case OPT_MAX_PARKED:
    case OPT_MAX_QUEUED:
    case OPT_MAX_VALUES:
    case OPT_MAX_FETCHES:
    case OPT_MAX_SESSIONS:
      if (parse_uint(optarg, 1, UINT32_MAX, &v) != LT_OK)
        return usage_error(err, "bad count '%s' (1..4294967295)", optarg);
      if (c == OPT_MAX_PARKED)
        a->max_parked = (uint32_t)v;
      else if (c == OPT_MAX_QUEUED)
        a->max_queued = (uint32_t)v;
      else if (c == OPT_MAX_VALUES)
        a->max_values = (uint32_t)v;
      else if (c == OPT_MAX_FETCHES)
        a->max_fetches = (uint32_t)v;
      else
        a->max_sessions = (uint32_t)v;
      break;
    case OPT_CURVE_KEY:
      if (optarg[0] == '\0') return usage_error(err, "%s", "empty --curve-key file");
      if (replace_str(&a->curve_key, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_ALLOW:
      if (optarg[0] == '\0') return usage_error(err, "%s", "empty --allow file");
      if (replace_str(&a->allow, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_INSECURE:
      a->insecure = true;
      break;
    case OPT_UNSAFE_MODULES:
      a->unsafe_modules = true;
      break;
    case OPT_ACCEPT_MODULES:
      if (optarg[0] == '\0' || strlen(optarg) > 1024)
        return usage_error(err, "bad --accept-modules directory '%s'", optarg);
      if (replace_str(&a->accept_modules, optarg) != LT_OK)
        return usage_error(err, "%s", "no memory");
      break;
    case OPT_ANNOUNCE:
      if (optarg[0] == '\0' || strlen(optarg) > 1024)
        return usage_error(err, "bad --announce directory '%s'", optarg);
      if (replace_str(&a->announce, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_ADVERTISE:
      if (optarg[0] == '\0' || strlen(optarg) > 200 || strpbrk(optarg, " \t\n#") != NULL ||
          (strstr(optarg, "://") != NULL && strncmp(optarg, "tcp://", 6) != 0))
        return usage_error(err, "bad --advertise '%s' (a host, address or tcp:// endpoint)",
                           optarg);
      if (replace_str(&a->advertise, optarg) != LT_OK) return usage_error(err, "%s", "no memory");
      break;
    case OPT_HELP:
      lt__args_usage(out);
      return LT_ARGS_EXIT_OK;
    case OPT_VERSION:
      fprintf(out, "lithium-server %s (protocol %d)\n", LT_VERSION, LT_PROTO_VERSION);
      return LT_ARGS_EXIT_OK;
    case ':':
      return usage_error(err, "option '%s' needs a value", argv[optind - 1]);
    default:
      if (optopt > 0 && optopt < 256) {
        char opt[3] = {'-', (char)optopt, '\0'};
        return usage_error(err, "unknown option '%s'", opt);
      }
      return usage_error(err, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return usage_error(err, "unexpected argument '%s'", argv[optind]);
  if (a->allow != NULL && a->curve_key == NULL)
    return usage_error(err, "%s", "--allow needs --curve-key");
  return LT_ARGS_RUN;
}

void lt__args_free(lt_srv_args_t *a) {
  if (a == NULL) return;
  free(a->listen);
  free(a->name);
  free(a->curve_key);
  free(a->allow);
  free(a->announce);
  free(a->advertise);
  free(a->accept_modules);
  for (size_t i = 0; i < a->nmodules; i++)
    free(a->modules[i]);
  free(a->modules);
  memset(a, 0, sizeof *a);
}
