/* harness.h: helpers of the end-to-end tests: int64 tokens, a started evaluator over
 * spawned local servers, servers started by the test itself (to kill them), and reading a
 * result. Test process only. */
#ifndef LT_TEST_HARNESS_H
#define LT_TEST_HARNESS_H

#include <stdint.h>
#include <lithium.h>
#include "spawn.h"

/* put_i64/get_i64: little-endian int64 tokens, as the testk kernels read them. */
void put_i64(unsigned char *p, int64_t v);
int64_t get_i64(const void *p);

/* new_eval creates an evaluator for `program` with the test server and module directory
 * set, spawns `nservers` local servers and starts it; the test fails on any error. */
lt_eval_t *new_eval(lt_skel_t *program, int nservers);

/* new_eval_with is new_eval with more options set before the start: `opts` holds key, value
 * pairs and ends with NULL (NULL: none). */
lt_eval_t *new_eval_with(lt_skel_t *program, int nservers, const char *const *opts);

/* start_server starts one lithium-server the test controls; the test fails on error. */
void start_server(lt_proc_t *p, const char *name, uint32_t threads);

/* start_server_with is start_server with extra flags (NULL-terminated), e.g. --slowdown. */
void start_server_with(lt_proc_t *p, const char *name, uint32_t threads, const char *const *extra);

/* Stats texts (lt_eval_stats_json): stats_u64 reads the first `"key":N` (the test fails when
 * it is missing); stats_each reads it for every server into v (at most n) and returns how
 * many; stats_sum adds it up over the servers. */
uint64_t stats_u64(const char *json, const char *key);
int stats_each(const char *json, const char *key, uint64_t *v, int n);
uint64_t stats_sum(const char *json, const char *key);
/* stats_dsum adds up number `key` (not only integers) over the servers. */
double stats_dsum(const char *json, const char *key);

/* eval_on_procs creates an evaluator for `program` with options `opts` (key, value pairs,
 * NULL-terminated; NULL: none) on the `n` servers in `procs` and starts it. */
lt_eval_t *eval_on_procs(lt_skel_t *program, const lt_proc_t *procs, int n,
                         const char *const *opts);

/* next_i64_within is next_i64 waiting at most `ms` for the result. */
int64_t next_i64_within(lt_eval_t *ev, int ms);

/* one_result submits the one int64 task `v`, closes the input and returns its result within
 * `ms` (the caller frees it); the test fails when none comes. */
lt_buf_t *one_result(lt_eval_t *ev, int64_t v, int ms);

/* distinct_instructions counts the instructions in a run's stats once each: one moved off
 * a slow server at the end, copied to an idle one, or taken back from a server that held it
 * too long is dispatched again. */
uint64_t distinct_instructions(const char *json);

/* submit_i64s submits the int64 tasks 0..n-1 to the stream; the test fails on an error. */
void submit_i64s(lt_eval_t *ev, int n);

/* submit_values submits the n int64 tasks v[0..n) to the stream; the test fails on an error. */
void submit_values(lt_eval_t *ev, const int64_t *v, int n);

/* stats_of returns the evaluator's stats (lt_eval_stats_json; the caller frees them); the
 * test fails on an error. */
char *stats_of(lt_eval_t *ev);

/* server_stat returns server `server`'s stat `key`, as last published (0 when the stats list
 * fewer servers); inflight_of is its "inflight": the instructions of ours it has out. */
uint64_t server_stat(lt_eval_t *ev, const char *key, int server);
/* peer_bytes_now returns the bytes the servers of `ev` have fetched from each other so far. */
uint64_t peer_bytes_now(lt_eval_t *ev);
uint64_t inflight_of(lt_eval_t *ev, int server);

/* wait_stat waits at most `ms` until server `server`'s stat `key` is at least `at_least`;
 * 0 when it never was. It asserts nothing: a server of the caller's may be stopped. */
int wait_stat(lt_eval_t *ev, int server, const char *key, uint64_t at_least, int ms);

/* wait_inflight waits until server `server` (of the `nservers` in the stats) has work out,
 * e.g. before killing it so that values it holds are still needed; the test fails after
 * 60 s without. */
void wait_inflight(lt_eval_t *ev, int server, int nservers);

/* values_held_total waits (up to 20 s) until every live server reports no value held and
 * returns the last total seen: 0 unless values leaked (test_lazy.c: why it polls). */
uint64_t values_held_total(lt_eval_t *ev);

/* skelk_fill_csum is skelk:csum of part `part` of skelk:fill's output for n bytes. */
uint64_t skelk_fill_csum(uint64_t n, int part);

/* mono_ms is the monotonic clock in milliseconds, for the tests' bounds. */
int64_t mono_ms(void);

/* next_i64 reads the next result, expects it to be a successful int64 and returns it. */
int64_t next_i64(lt_eval_t *ev);

/* run_on_hosts starts an evaluator of pipe(farm(testk:inc), farm(testk:dbl)) on `hosts`
 * (host strings) with the options (key, value pairs, NULL-terminated; connect_timeout_ms
 * 8000 unless they say), runs 20 tasks when it starts (failing the test on a wrong result),
 * and returns lt_eval_start's code; *ms is how long the start took. */
int run_on_hosts(const char *const *hosts, int nhosts, const char *const *opts, int64_t *ms);

/* A capture of this process's stderr (what the client logs) in a temporary file. */
typedef struct stderr_capture {
  int fd, saved;
  char path[32];
} stderr_capture_t;

/* stderr_capture_begin sends stderr to a new temporary file; the test fails when it cannot. */
void stderr_capture_begin(stderr_capture_t *c);

/* stderr_capture_end gives stderr back, copies what was written meanwhile into out (at most
 * len - 1 bytes, NUL-terminated), removes the file and returns the length copied. */
size_t stderr_capture_end(stderr_capture_t *c, char *out, size_t len);

#endif
