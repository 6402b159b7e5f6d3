/* test_bigvalue.c: large values between real servers. A value of BIG_BYTES made on one
 * server and read on the other moves peer to peer while the client heartbeats both every
 * 200 ms: no server may be declared dead (the servers' loop threads must never be held up
 * by a value's bytes, only ZeroMQ's I/O threads move them), nothing is retried, and the
 * result is right; the receiving server keeps the value in the message it received, so that
 * its peak memory stays well below two copies. map(skelk:fill, seq(skelk:csum), skelk:add) with
 * placement=rr: the split makes both parts on one server, and round robin sends the csum of one of
 * them to the other, which fetches that part from its holder. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* Large enough that a copy of it on a loop thread (pages touched for the first time) takes
 * longer than three heartbeats of 200 ms on the VMs the tests run on; small enough for
 * 2 cores and a few GiB. */
#define BIG_BYTES ((int64_t)256 << 20)
#define HB_MS     "200"
#define READ_MS   90000

/* count counts the occurrences of `pat` in `json`. */
static int count(const char *json, const char *pat) {
  int n = 0;
  for (const char *p = json; (p = strstr(p, pat)) != NULL; p += strlen(pat))
    n++;
  return n;
}

/* peak_kib returns the peak RSS (VmHWM) of process `pid` in KiB; the test fails without it. */
static uint64_t peak_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  uint64_t kib = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %" SCNu64, &kib) == 1) break;
  fclose(f);
  cr_assert_gt(kib, 0, "no VmHWM in %s", path);
  return kib;
}

/* peer_in returns the bytes_peer_in that stats `json` give for the server at `endpoint`.
 * Not inlined: GCC 12 at -O2 then takes the pointer into `json` for a dangling one
 * (-Wdangling-pointer, a false positive). */
__attribute__((noinline)) static uint64_t peer_in(const char *json, const char *endpoint) {
  char pat[300];
  snprintf(pat, sizeof pat, "\"endpoint\":\"%s\"", endpoint);
  const char *p = strstr(json, pat);
  cr_assert_not_null(p, "%s not in %s", endpoint, json);
  return stats_u64(p, "bytes_peer_in");
}

/* peer_stats returns the stats once some server reports the value's bytes as fetched from
 * its peer: a server's report is as old as its last message, so it polls (for up to 5 s,
 * 25 heartbeats). The caller frees the result. */
static char *peer_stats(lt_eval_t *ev) {
  char *json = NULL;
  for (int tries = 0; tries < 100; tries++) {
    free(json);
    cr_assert_eq(lt_eval_stats_json(ev, &json), LT_OK);
    if (stats_sum(json, "bytes_peer_in") >= (uint64_t)BIG_BYTES) break;
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return json;
}

Test(bigvalue, peer_fetch_keeps_heartbeats_on_time, .timeout = 180) {
  lt_proc_t p[2];
  /* Unsupervised: the process started is the server whose memory is measured. */
  const char *const flags[] = {"--no-supervise", NULL};
  start_server_with(&p[0], "holder", 2, flags);
  start_server_with(&p[1], "reader", 2, flags);
  const char *opts[] = {"mode", "optimized", "placement", "rr", "heartbeat_ms", HB_MS, NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_map("skelk:fill", lt_seq("skelk:csum"), "skelk:add"), p, 2, opts);
  lt_buf_t *r = one_result(ev, BIG_BYTES, READ_MS);
  cr_assert_eq(lt_buf_error(r), LT_OK, "%s", lt_buf_errmsg(r));
  cr_assert_eq(lt_buf_len(r), 8);
  uint64_t want = skelk_fill_csum((uint64_t)BIG_BYTES, 0) + skelk_fill_csum((uint64_t)BIG_BYTES, 1);
  cr_assert_eq((uint64_t)get_i64(lt_buf_data(r)), want);
  lt_buf_free(r);

  char *json = peer_stats(ev);
  cr_assert_geq(stats_sum(json, "bytes_peer_in"), (uint64_t)BIG_BYTES,
                "no server fetched the value from its peer: %s", json);
  /* Declared dead even once, a server would show a second session (or stay dead), and its
   * lost instructions would count as retries. */
  cr_assert_eq(count(json, "\"alive\":true"), 2, "%s", json);
  cr_assert_eq(count(json, "\"state\":\"ready\""), 2, "%s", json);
  uint64_t sessions[2] = {0, 0};
  cr_assert_eq(stats_each(json, "sessions", sessions, 2), 2, "%s", json);
  cr_assert_eq(sessions[0] + sessions[1], 2, "a server was declared dead: %s", json);
  cr_assert_eq(stats_u64(json, "retries"), 0, "%s", json);
  /* The receiver holds one part; a copy of it on arrival would double that. */
  int to = peer_in(json, p[0].endpoint) >= (uint64_t)BIG_BYTES ? 0 : 1;
  uint64_t peak = peak_kib(p[to].pid) * 1024;
  cr_assert_lt(peak, (uint64_t)BIG_BYTES * 3 / 2,
               "the receiving server peaked at %" PRIu64 " bytes for a value of %" PRId64, peak,
               BIG_BYTES);
  free(json);
  lt_eval_free(ev);
  lt__proc_stop(&p[0], 5000);
  lt__proc_stop(&p[1], 5000);
}
