/* benchlib.h: what the benchmark programs (examples/bench/) share beyond common/runner.h
 * (the clock, the stats readers): medians, the one JSON line per figure that
 * scripts/bench/run collects, an evaluator on spawned local servers with given options, a
 * streaming run (a feeder thread submits while the caller reads) and the raw ZeroMQ
 * DEALER->ROUTER echo the runtime is compared against. The thread that owns an evaluator
 * calls the evaluator helpers; the others may be called from any thread. */
#ifndef LT_BENCHLIB_H
#define LT_BENCHLIB_H

#include <stddef.h>
#include <stdint.h>

#include <lithium.h>
#include "runner.h" /* ex_now, ex_stat_u64, ex_stat_sum */

/* bench_median returns the median of v[0..n) (sorting v in place); 0 when n is 0. */
double bench_median(double *v, size_t n);

/* bench_json prints one result line: {"bench":..., "metric":..., "value":..., "baseline":...,
 * "ratio":..., "unit":...}. The ratio is value / baseline, null when baseline is 0. */
void bench_json(const char *bench, const char *metric, double value, double baseline,
                const char *unit);

/* bench_parse_args reads the options shared by the programs: `--runs N` into *runs and
 * `--tasks N` into *tasks (either pointer may be NULL when the program does not take it).
 * Returns 0, 1 after printing the usage for --help, -1 after printing why on a bad one. */
int bench_parse_args(int argc, char **argv, const char *usage, int *runs, long *tasks);

/* bench_eval_open makes an evaluator for `program` (taking ownership, also on failure) with
 * this build's server program and kernel modules (unless LITHIUM_SERVER / LITHIUM_MODULES say
 * otherwise), the options in `kv` (NULL-terminated key, value, key, value, ...), `nservers`
 * spawned local servers, and starts it. Returns NULL after printing why. */
lt_eval_t *bench_eval_open(const char *prog, lt_skel_t *program, const char *const *kv,
                           int nservers);

/* The task stream of bench_eval_stream: make(i, buf, arg) writes task i into buf (of the size
 * given to bench_eval_stream); check(i, data, len, arg) returns 0 when the result of task i is
 * right. Both run on the caller's threads (make on the feeder, check on the caller). */
typedef void (*bench_make_fn)(long i, unsigned char *buf, void *arg);
typedef int (*bench_check_fn)(long i, const unsigned char *data, size_t len, void *arg);

/* Tasks that are their own index: 8 bytes holding i, answered unchanged by kernels that copy
 * their input (bench:sleep, bench:noop "echo"). */
#define BENCH_INDEX_SIZE 8
void bench_index_make(long i, unsigned char *buf, void *arg);
int bench_index_check(long i, const unsigned char *data, size_t len, void *arg);

/* Empty tasks: 16 bytes, i in the first 8 and 0xa5 in the rest, answered unchanged by
 * bench:noop "echo". */
#define BENCH_NOOP_SIZE 16
void bench_noop_make(long i, unsigned char *buf, void *arg);
int bench_noop_check(long i, const unsigned char *data, size_t len, void *arg);

/* The touch chain: bench_chain_program() is a pipeline of BENCH_CHAIN_STAGES seq(bench:touch)
 * (NULL when out of memory), fed 1 MiB tasks of a pattern that depends on i; each stage makes
 * a new value with the first byte one more. bench_chain_check wants a scratch buffer of
 * BENCH_CHAIN_SIZE bytes as `arg` (bench_chain_make ignores its `arg`). */
#define BENCH_CHAIN_SIZE   (1024 * 1024)
#define BENCH_CHAIN_STAGES 4
lt_skel_t *bench_chain_program(void);
void bench_chain_make(long i, unsigned char *buf, void *arg);
int bench_chain_check(long i, const unsigned char *data, size_t len, void *arg);

/* bench_eval_stream submits `tasks` tasks of `size` bytes from a feeder thread while this
 * thread reads the results in order and checks each one, then closes the input. The
 * evaluator must have `ordered` on. *seconds is the time from the first submit to the last
 * result. Returns 0, or -1 after printing the first failure. */
int bench_eval_stream(const char *prog, lt_eval_t *ev, long tasks, size_t size, bench_make_fn make,
                      bench_check_fn check, void *arg, double *seconds);

/* bench_eval_stream_owned is bench_eval_stream with each task made in a buffer of its own
 * that the evaluator takes without a copy (lt_eval_submit_owned). */
int bench_eval_stream_owned(const char *prog, lt_eval_t *ev, long tasks, size_t size,
                            bench_make_fn make, bench_check_fn check, void *arg, double *seconds);

/* bench_echo_run is the raw baseline: a ROUTER thread on a free loopback TCP port echoes
 * every message, and a DEALER sends `count` messages of `size` bytes keeping `window` of them
 * in flight. *seconds is the time from the first send to the last reply; when `rtt_us` is not
 * NULL and window is 1, rtt_us[i] receives the round trip of message i in microseconds.
 * Returns 0, or -1 after printing why. */
int bench_echo_run(long count, int window, size_t size, double *seconds, double *rtt_us);

#endif
