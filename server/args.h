/* args.h: lithium-server's command line. Parsing is pure: it fills a struct and writes
 * usage or errors to the streams it is given, so tests can drive it without a process.
 * Any thread, but getopt_long is not reentrant: one parse at a time. */
#ifndef LT_SRV_ARGS_H
#define LT_SRV_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LT_SRV_DEFAULT_LISTEN    "tcp://127.0.0.1:5555"
#define LT_SRV_DEFAULT_MAX_FRAME ((uint64_t)1 << 30)
#define LT_SRV_DEFAULT_IDLE_MS   60000
#define LT_SRV_DEFAULT_FETCH_MS  30000
#define LT_SRV_MAX_THREADS       1024
#define LT_SRV_DEFAULT_MAX_PEERS 256
#define LT_SRV_MAX_PEERS         4096
#define LT_SRV_NAME_MAX          255

/* Quotas per session (quota.c) and the session limit. */
#define LT_SRV_DEFAULT_SESSION_BYTES ((uint64_t)1 << 30)
#define LT_SRV_DEFAULT_MAX_PARKED    100000
#define LT_SRV_DEFAULT_MAX_QUEUED    100000
#define LT_SRV_DEFAULT_MAX_VALUES    1000000
/* Server-wide, beside the per-session quotas: four sessions at their whole quota of ids. */
#define LT_SRV_DEFAULT_MAX_TOTAL_VALUES 4000000
#define LT_SRV_DEFAULT_MAX_FETCHES      100000
#define LT_SRV_MAX_SESSIONS_CAP         1000

/* What lt__args_parse tells main to do; the value is also the exit code. */
enum {
  LT_ARGS_RUN = -1,      /* start the server */
  LT_ARGS_EXIT_OK = 0,   /* --help or --version was printed */
  LT_ARGS_EXIT_USAGE = 2 /* bad flag or value: usage was printed on the error stream */
};

typedef struct lt_srv_args {
  char *listen;   /* endpoint to bind (owned) */
  int threads;    /* worker threads */
  char **modules; /* module directories, in order (owned) */
  size_t nmodules;
  char *name;         /* server id shown to clients; NULL: hostname:pid (owned) */
  int log_level;      /* LT_LOG_*, or -1 to keep LITHIUM_LOG */
  uint64_t max_frame; /* bytes per frame (ZMQ_MAXMSGSIZE and codec limit) */
  uint64_t idle_ms;   /* drop a silent session after this long; 0 = never */
  uint64_t fetch_ms;  /* a peer silent this long while we fetch from it is unreachable */
  uint32_t max_peers; /* links to peer servers kept open at most */
  double slowdown;    /* emulation: a kernel that took t keeps its worker (F-1)*t longer */
  double speed;       /* experiments: welcome speed instead of the calibration; 0 = calibrate */
  bool no_supervise;  /* run the worker alone, without a supervisor process */
  bool no_shm;        /* no same-host transfers by memfd (shm.h) */
  uint64_t max_session_bytes; /* bytes of values one session may hold in the store */
  uint64_t pool_bytes;        /* idle output buffers kept mapped (bufpool.h); 0: no pool */
  uint32_t max_parked;        /* instructions one session may have parked */
  uint32_t max_queued;        /* instructions one session may have queued or running */
  uint32_t max_values;        /* ids (values pending, ready or failed) one session may hold */
  uint32_t max_fetches;       /* fetches of one session waiting for their values */
  uint32_t max_sessions;      /* sessions at once; 0 = min(1000, RLIMIT_NOFILE / 2) */
  uint64_t max_bytes;         /* bytes of values all sessions together may hold; 0 = half the
                                 physical memory (issue 36: 1000 sessions x each quota) */
  uint64_t max_total_values;  /* ids all sessions together may hold (--max-values) */
  char *curve_key;            /* --curve-key: the server's key pair file, or NULL (owned) */
  char *allow;                /* --allow: allowed client public keys file, or NULL (owned) */
  bool insecure;              /* --insecure: a non-loopback listen without CURVE is allowed */
  bool unsafe_modules;        /* --allow-unsafe-modules: skip the module permission checks */
  char *announce;             /* --announce DIR: write DIR/<name>.endpoint once bound (owned) */
  char *advertise;            /* --advertise ADDR: the host announced instead of the bound one */
  char *accept_modules;       /* --accept-modules DIR: the store of shipped modules, or NULL
                                 (owned) */
} lt_srv_args_t;

/* lt__args_parse parses argv into *a (which it initialises; free with lt__args_free in
 * every case). --help and --version print to `out`; errors print a message and the usage to
 * `err`. Returns LT_ARGS_RUN, LT_ARGS_EXIT_OK or LT_ARGS_EXIT_USAGE. */
int lt__args_parse(lt_srv_args_t *a, int argc, char **argv, FILE *out, FILE *err);

/* lt__args_usage prints the usage text to `f`. */
void lt__args_usage(FILE *f);

/* lt__args_free frees what lt__args_parse allocated; accepts a zeroed struct. */
void lt__args_free(lt_srv_args_t *a);

/* lt__args_parse_size parses a byte count: digits with an optional k, m or g suffix
 * (binary multiples). LT_EINVAL when malformed, zero or above 2^40. */
int lt__args_parse_size(const char *s, uint64_t *out);

#endif
