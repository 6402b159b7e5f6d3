/* databench.h: what the data-heavy benchmarks (msort, bigpipe) share: one run of a program
 * on benchmark-owned local servers or on the sequential evaluator, measured for where its
 * time goes (the kernels' CPU as the servers measure it, the server processes' CPU and page
 * faults from /proc, this process's CPU, bytes on the client's links and between servers,
 * the evaluator's counts), and the JSON lines and per-run lines of a comparison of the two.
 * The thread that owns the evaluator calls these. */
#ifndef LT_DATABENCH_H
#define LT_DATABENCH_H

#include <stddef.h>
#include <stdint.h>

#include <lithium.h>

#include "benchproc.h"

#define DATABENCH_SERVERS 2

/* Where one run's time went. */
typedef struct databench_run {
  double seconds;         /* from the first submit to the last result */
  double kernel_cpu_s;    /* the kernels' CPU: the servers' cpu_s, or this process's CPU locally */
  double server_cpu_s;    /* the server processes' CPU (user + system) during the run */
  double client_cpu_s;    /* this process's CPU during the run */
  double server_faults;   /* the server processes' minor page faults during the run */
  double client_bytes;    /* bytes_to_servers + bytes_from_servers */
  double peer_bytes;      /* bytes_peer_in over the servers */
  double instructions;    /* the evaluator's instructions */
  double reruns, backups; /* its reruns and copies of stragglers */
} databench_run_t;

/* The work of one run: submits its tasks to `ev`, waits for every result and checks them
 * against what `arg` knows (returns 0, or -1 after printing why). */
typedef int (*databench_work_fn)(lt_eval_t *ev, void *arg);

/* databench_servers_start starts DATABENCH_SERVERS servers (benchproc.h) and writes their
 * endpoints, comma-separated, into hosts. Returns 0, or -1 after printing why (none left). */
int databench_servers_start(const char *prog, bench_server_t *srv, char *hosts, size_t len);

/* databench_servers_stop stops the servers of databench_servers_start. */
void databench_servers_stop(bench_server_t *srv);

/* databench_run runs `work` once with a fresh evaluator of `program` (taken, also on
 * failure) and the options `kv` (NULL-terminated pairs, may be NULL: the defaults): on the
 * servers `srv` (whose endpoints are `hosts`), or on the sequential evaluator when srv is
 * NULL. Returns 0 and fills *out, or -1 after printing why. */
int databench_run(const char *prog, lt_skel_t *program, const char *const *kv, bench_server_t *srv,
                  const char *hosts, databench_work_fn work, void *arg, databench_run_t *out);

/* One side of a comparison: one checked run on the servers `srv` (endpoints `hosts`), or on
 * the sequential evaluator when srv is NULL, into *x (databench_run); 0, or -1 after
 * printing why. */
typedef int (*databench_side_fn)(bench_server_t *srv, const char *hosts, databench_run_t *x,
                                 void *arg);

/* databench_compare starts the servers, runs `side` on them and then sequentially, `runs`
 * times, logging each run, into par[0..runs) and seq[0..runs), and stops the servers.
 * Returns 0, or -1 after printing why. */
int databench_compare(const char *prog, int runs, databench_side_fn side, void *arg,
                      databench_run_t *par, databench_run_t *seq);

/* databench_stat_sum adds up every `"key":X` of a stats text (a per-server figure). */
double databench_stat_sum(const char *json, const char *key);

/* databench_log prints one run's figures on stderr, as "<prog>: <what> run <r>: ...". */
void databench_log(const char *prog, const char *what, int r, const databench_run_t *x);

/* databench_fnv1a returns FNV-1a 64 of data[0..len) (the checksum of bigpipe's sums and
 * wordcount's table, which scripts/bench/peers.py computes the same way). */
uint64_t databench_fnv1a(const void *data, size_t len);

/* databench_checksum prints the checksum of a benchmark's result as a JSON line,
 * {"bench": ..., "detail": "checksum", "checksum": "<16 hex digits>"}, for scripts/bench/peers
 * to compare with the Dask side's. */
void databench_checksum(const char *bench, uint64_t checksum);

/* databench_report prints the JSON lines of `runs` runs on the servers against as many on
 * the sequential evaluator (medians): time and speed-up, the servers' CPU against the
 * kernels' own (the sequential evaluator's CPU), the kernels' CPU as the servers measure it,
 * the server page faults, the bytes and the counts. */
void databench_report(const char *bench, const databench_run_t *par, const databench_run_t *seq,
                      int runs);

#endif
