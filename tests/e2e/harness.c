/* harness.c: helpers shared by the end-to-end tests (see harness.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

void put_i64(unsigned char *p, int64_t v) {
  uint64_t x = (uint64_t)v;
  for (int i = 0; i < 8; i++, x >>= 8)
    p[i] = (unsigned char)(x & 0xff);
}

int64_t get_i64(const void *p) {
  const unsigned char *b = p;
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = (x << 8) | b[i];
  return (int64_t)x;
}

lt_eval_t *new_eval(lt_skel_t *program, int nservers) {
  return new_eval_with(program, nservers, NULL);
}

lt_eval_t *new_eval_with(lt_skel_t *program, int nservers, const char *const *opts) {
  cr_assert_not_null(program);
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server", LT_TEST_SERVER), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "modules", LT_TEST_MODULES), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "server_threads", "2"), LT_OK);
  for (int i = 0; opts != NULL && opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK, "%s %s", opts[i], opts[i + 1]);
  int rc = lt_eval_spawn_local(ev, nservers);
  cr_assert_eq(rc, LT_OK, "spawn_local: %s", lt_strerror(rc));
  rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  return ev;
}

void start_server(lt_proc_t *p, const char *name, uint32_t threads) {
  start_server_with(p, name, threads, NULL);
}

void start_server_with(lt_proc_t *p, const char *name, uint32_t threads, const char *const *extra) {
  char err[256];
  int rc = lt__proc_spawn(p, LT_TEST_SERVER, LT_TEST_MODULES, threads, name, extra, 10000, err,
                          sizeof err);
  cr_assert_eq(rc, LT_OK, "spawn %s: %s", name, err);
}

lt_eval_t *eval_on_procs(lt_skel_t *program, const lt_proc_t *procs, int n,
                         const char *const *opts) {
  lt_eval_t *ev = NULL;
  cr_assert_eq(lt_eval_new(&ev, program), LT_OK);
  for (int i = 0; opts != NULL && opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK, "%s", opts[i]);
  for (int i = 0; i < n; i++)
    cr_assert_eq(lt_eval_add_host(ev, procs[i].endpoint), LT_OK);
  int rc = lt_eval_start(ev);
  cr_assert_eq(rc, LT_OK, "start: %s", lt_strerror(rc));
  return ev;
}

lt_buf_t *one_result(lt_eval_t *ev, int64_t v, int ms) {
  unsigned char tok[8];
  put_i64(tok, v);
  cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  lt_buf_t *b = NULL;
  int rc = lt_eval_next_timeout(ev, ms, &b);
  cr_assert_eq(rc, LT_OK, "next: %s", lt_strerror(rc));
  return b;
}

char *stats_of(lt_eval_t *ev) {
  char *json = NULL;
  cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
  return json;
}

uint64_t peer_bytes_now(lt_eval_t *ev) {
  char *json = stats_of(ev);
  uint64_t n = stats_sum(json, "bytes_peer_in");
  free(json);
  return n;
}

uint64_t server_stat(lt_eval_t *ev, const char *key, int server) {
  char *st = stats_of(ev);
  uint64_t out[16] = {0};
  int n = stats_each(st, key, out, 16);
  free(st);
  return server >= 0 && server < n ? out[server] : 0;
}

uint64_t inflight_of(lt_eval_t *ev, int server) {
  return server_stat(ev, "inflight", server);
}

int wait_stat(lt_eval_t *ev, int server, const char *key, uint64_t at_least, int ms) {
  for (int t = 0; t < ms; t++) {
    if (server_stat(ev, key, server) >= at_least) return 1;
    usleep(1000);
  }
  return 0;
}

void wait_inflight(lt_eval_t *ev, int server, int nservers) {
  cr_assert(server >= 0 && server < nservers && nservers <= 16);
  cr_assert(wait_stat(ev, server, "inflight", 1, 60000), "server %d had no work out for 60 s",
            server);
}

int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t next_i64(lt_eval_t *ev) {
  return next_i64_within(ev, -1);
}

int64_t next_i64_within(lt_eval_t *ev, int ms) {
  lt_buf_t *b = NULL;
  int rc = lt_eval_next_timeout(ev, ms, &b);
  cr_assert_eq(rc, LT_OK, "next: %s", lt_strerror(rc));
  cr_assert_eq(lt_buf_error(b), LT_OK, "task failed: %s", lt_buf_errmsg(b));
  cr_assert_eq(lt_buf_len(b), 8);
  int64_t v = get_i64(lt_buf_data(b));
  lt_buf_free(b);
  return v;
}

uint64_t distinct_instructions(const char *json) {
  return stats_u64(json, "instructions") - stats_u64(json, "migrated") -
         stats_u64(json, "backups") - stats_u64(json, "overdue");
}

uint64_t stats_u64(const char *json, const char *key) {
  uint64_t v = 0;
  cr_assert_eq(stats_each(json, key, &v, 1), 1, "%s not in %s", key, json);
  return v;
}

int stats_each(const char *json, const char *key, uint64_t *v, int n) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  int k = 0;
  for (const char *p = json; k < n && (p = strstr(p, pat)) != NULL; p += strlen(pat))
    v[k++] = strtoull(p + strlen(pat), NULL, 10);
  return k;
}

uint64_t stats_sum(const char *json, const char *key) {
  uint64_t v[256], sum = 0;
  int n = stats_each(json, key, v, 256);
  for (int i = 0; i < n; i++)
    sum += v[i];
  return sum;
}

double stats_dsum(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  double sum = 0;
  for (const char *p = json; (p = strstr(p, pat)) != NULL; p += strlen(pat))
    sum += strtod(p + strlen(pat), NULL);
  return sum;
}

void submit_i64s(lt_eval_t *ev, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, i);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK, "task %d", i);
  }
}

void submit_values(lt_eval_t *ev, const int64_t *v, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char tok[8];
    put_i64(tok, v[i]);
    cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK, "task %d", i);
  }
}

/* live_values_held adds up values_held over the servers the client still talks to. A server
 * declared dead (three heartbeats missed) keeps its last report forever, and the client can
 * release nothing there: its values go with the session, which that server drops. */
static uint64_t live_values_held(const char *json) {
  uint64_t total = 0;
  const char *p = json;
  while ((p = strstr(p, "\"alive\":")) != NULL) {
    p += strlen("\"alive\":");
    int alive = strncmp(p, "true", 4) == 0;
    const char *v = strstr(p, "\"values_held\":");
    cr_assert_not_null(v, "%s", json);
    if (alive) total += strtoull(v + strlen("\"values_held\":"), NULL, 10);
  }
  return total;
}

/* values_held_total waits until every live server reports no value held, and returns the
 * last total seen. The last releases may still be on their way when the last result
 * arrives, and a report is as old as its server's last message (heartbeats refresh it at
 * least every heartbeat_ms), so it polls, for up to 20 s: only a leak, or a machine stalled
 * that long, makes it give up. The tests that count values use 1 s heartbeats (a server is
 * dead after 3 s of silence), not 200 ms ones: on a loaded machine 600 ms of silence happens,
 * and a server declared dead makes its tasks recompute, which moves their bytes through the
 * client. */
uint64_t values_held_total(lt_eval_t *ev) {
  uint64_t total = 0;
  for (int tries = 0; tries < 400; tries++) {
    char *json = NULL;
    cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
    total = live_values_held(json);
    free(json);
    if (total == 0) break;
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return total;
}

/* run_on_hosts starts an evaluator on `hosts` (host strings) with the options (key, value
 * pairs, NULL-terminated), runs 20 tasks when it starts, and returns lt_eval_start's code. */
int run_on_hosts(const char *const *hosts, int nhosts, const char *const *opts, int64_t *ms) {
  lt_eval_t *ev;
  lt_skel_t *prog = lt_pipeline(lt_farm(lt_seq("testk:inc")), lt_farm(lt_seq("testk:dbl")), NULL);
  cr_assert_eq(lt_eval_new(&ev, prog), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "connect_timeout_ms", "8000"), LT_OK);
  for (int i = 0; opts != NULL && opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(ev, opts[i], opts[i + 1]), LT_OK, "%s", opts[i]);
  for (int i = 0; i < nhosts; i++)
    cr_assert_eq(lt_eval_add_host(ev, hosts[i]), LT_OK, "%s", hosts[i]);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = lt_eval_start(ev);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  if (rc == LT_OK) {
    submit_i64s(ev, 20);
    cr_assert_eq(lt_eval_close(ev), LT_OK);
    for (int64_t i = 0; i < 20; i++)
      cr_assert_eq(next_i64(ev), 2 * (i + 1));
  }
  lt_eval_free(ev);
  return rc;
}

void stderr_capture_begin(stderr_capture_t *c) {
  snprintf(c->path, sizeof c->path, "/tmp/lt-stderr-XXXXXX");
  c->fd = mkstemp(c->path);
  cr_assert_geq(c->fd, 0);
  fflush(stderr);
  c->saved = dup(2);
  cr_assert_geq(c->saved, 0);
  cr_assert_geq(dup2(c->fd, 2), 0);
}

size_t stderr_capture_end(stderr_capture_t *c, char *out, size_t len) {
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  ssize_t n = pread(c->fd, out, len - 1, 0);
  size_t got = n > 0 ? (size_t)n : 0;
  out[got] = '\0';
  close(c->fd);
  unlink(c->path);
  return got;
}

uint64_t skelk_fill_csum(uint64_t n, int part) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++)
    sum += (uint64_t)(unsigned char)(i % 251 + (uint64_t)part) * (i % 13 + 1);
  return sum;
}
