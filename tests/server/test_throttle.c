/* test_throttle.c: a real lithium-server's per-session thread window (execute.max_active)
 * and its speed estimate in welcome. The window: at most max_active instructions of the
 * session run at once (visible in the load reports), the others wait in order and count
 * as queued; unlimited with 0; widened by a later EXECUTE; a waiting one can be canceled
 * and never runs; bye and SIGTERM handle waiting ones. Speed: calibrated, slower under
 * --slowdown, overridden by --speed. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "server/srv_helper.h"

#define CLIENT 0x7777abcdULL
#define MAXSEQ 64

typedef struct st {
  th_server_t srv;
  th_client_t c;
  bool got[MAXSEQ];
  int status[MAXSEQ];
  uint64_t service_us[MAXSEQ];
  int order[MAXSEQ]; /* seqs in completion order */
  int ndone;
  uint64_t last_hb;
  lt_load_t load;
  uint32_t max_active; /* the most active threads any report showed */
  uint32_t max_queued;
} st_t;

static void record(st_t *s, th_rx_t *r) {
  cr_assert(r->m.has_load);
  s->load = r->m.load;
  if (r->m.load.active > s->max_active) s->max_active = r->m.load.active;
  if (r->m.load.queued > s->max_queued) s->max_queued = r->m.load.queued;
  if (r->m.type == LT_MSG_DONE) {
    for (uint32_t i = 0; i < r->m.u.done.ncompl; i++) {
      const lt_completion_t *c = &r->m.u.done.compl [i];
      cr_assert_lt(c->seq, MAXSEQ);
      cr_assert(!s->got[c->seq], "two completions for %llu", (unsigned long long)c->seq);
      s->got[c->seq] = true;
      s->status[c->seq] = c->status;
      s->service_us[c->seq] = c->service_us;
      s->order[s->ndone++] = (int)c->seq;
    }
  } else if (r->m.type == LT_MSG_HEARTBEAT) {
    s->last_hb = r->m.u.heartbeat.seq;
  } else {
    cr_assert_fail("unexpected %s", lt__msg_type_name(r->m.type));
  }
}

static void pump(st_t *s, int timeout_ms) {
  th_rx_t r;
  int rc = th_recv(&s->c, &r, timeout_ms);
  if (rc == LT_ETIMEDOUT) return;
  cr_assert_eq(rc, LT_OK, "undecodable reply: %s", lt_strerror(rc));
  record(s, &r);
  th_rx_clear(&r);
}

static void send_simple(st_t *s, lt_msg_type_t type, uint64_t seq) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = type;
  if (type == LT_MSG_HEARTBEAT) m.u.heartbeat.seq = seq;
  if (type == LT_MSG_CANCEL) {
    m.u.cancel.nseqs = 1;
    m.u.cancel.seqs = &seq;
  }
  cr_assert_eq(th_send(&s->c, &m, NULL, 0), LT_OK);
}

/* heartbeat sends one and waits for its reply: s->load is then current. */
static void heartbeat(st_t *s) {
  uint64_t seq = s->last_hb + 1;
  send_simple(s, LT_MSG_HEARTBEAT, seq);
  int64_t until = th_now_ms() + 10000;
  while (s->last_hb != seq) {
    cr_assert_lt(th_now_ms(), until, "no heartbeat reply");
    pump(s, 200);
  }
}

/* wait_done polls with heartbeats every ~20 ms (so that the load is sampled while the
 * kernels run) until `n` completions arrived. */
static void wait_done(st_t *s, int n) {
  int64_t until = th_now_ms() + 10000;
  while (s->ndone < n) {
    cr_assert_lt(th_now_ms(), until, "only %d of %d completions", s->ndone, n);
    heartbeat(s);
    pump(s, 20);
  }
}

static void start(st_t *s, const char *threads) {
  memset(s, 0, sizeof *s);
  const char *extra[] = {"--threads", threads, NULL};
  cr_assert_eq(th_server_start_default(&s->srv, extra), 0, "server did not start");
  cr_assert_eq(th_client_open(&s->c, s->srv.endpoint), 0);
  cr_assert_eq(th_hello_ok(&s->c, CLIENT), 0);
  const char *kernels[] = {"testk:sleep"};
  cr_assert_eq(th_program(&s->c, kernels, 1), 0);
}

static void stop(st_t *s) {
  th_client_close(&s->c);
  cr_assert_eq(th_server_stop(&s->srv, SIGTERM, 15000), 0, "server exits 0 on SIGTERM");
}

static lt_input_t g_in = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
static lt_oid_t g_out[MAXSEQ];

/* execute sends `n` sleeps of `ms` with seqs first.. and the window max_active. */
static void execute(st_t *s, uint64_t first, uint32_t n, const char *ms, uint32_t max_active) {
  lt_instr_t ins[16];
  cr_assert_leq(n, 16);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t seq = first + i;
    g_out[seq] = (lt_oid_t){CLIENT, 100 + seq};
    ins[i] = (lt_instr_t){.seq = seq,
                          .kernel = 0,
                          .param = {ms, strlen(ms)},
                          .ninputs = 1,
                          .inputs = &g_in,
                          .noutputs = 1,
                          .outputs = &g_out[seq],
                          .flags = LT_INSTR_RETURN};
  }
  unsigned char v[8];
  th_put_i64(v, 1);
  lt_bytes_t pay = {v, 8};
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = n;
  m.u.execute.instrs = n ? ins : NULL;
  m.u.execute.max_active = max_active;
  cr_assert_eq(th_send(&s->c, &m, n ? &pay : NULL, n ? 1 : 0), LT_OK);
}

Test(throttle, window_of_one_serialises_in_order) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "4");
  int64_t t0 = th_now_ms();
  execute(s, 1, 4, "100", 1);
  heartbeat(s);
  cr_assert_eq(s->load.active + s->load.queued, 4, "the waiting ones count as queued");
  wait_done(s, 4);
  int64_t took = th_now_ms() - t0;
  cr_assert_leq(s->max_active, 1, "a report showed %u active", s->max_active);
  cr_assert_geq(s->max_queued, 2);
  cr_assert_geq(took, 400, "4 x 100 ms one at a time took only %lld ms", (long long)took);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(s->status[i + 1], LT_OK);
    cr_assert_eq(s->order[i], i + 1, "completion %d was seq %d", i, s->order[i]);
  }
  heartbeat(s);
  cr_assert_eq(s->load.queued, 0);
  cr_assert_eq(s->load.completed, 4);
  stop(s);
  free(s);
}

Test(throttle, no_window_overlaps) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "4");
  /* Overlap is seen in the load reports sampled while they run (no upper bound on time:
   * a loaded machine may be slow, never wrong). */
  execute(s, 1, 4, "300", 0);
  wait_done(s, 4);
  cr_assert_geq(s->max_active, 2, "4 sleeps on 4 threads never overlapped");
  for (int i = 1; i <= 4; i++)
    cr_assert_eq(s->status[i], LT_OK);
  stop(s);
  free(s);
}

Test(throttle, later_execute_widens_the_window) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "6");
  execute(s, 1, 4, "400", 1);
  heartbeat(s);
  cr_assert_eq(s->load.active + s->load.queued, 4);
  cr_assert_leq(s->load.active, 1);
  /* The latest message wins: a wider window starts the waiting ones at once, and this
   * message's own instruction with them. */
  execute(s, 5, 1, "400", 5);
  int64_t until = th_now_ms() + 5000;
  while (s->load.active < 5) {
    cr_assert_lt(th_now_ms(), until, "never 5 active (last %u)", s->load.active);
    cr_assert_eq(s->ndone, 0, "something finished before the window was widened");
    heartbeat(s);
  }
  wait_done(s, 5);
  for (int i = 1; i <= 5; i++)
    cr_assert_eq(s->status[i], LT_OK);
  /* Narrowed again: two at a time. */
  s->max_active = 0;
  execute(s, 6, 4, "100", 2);
  wait_done(s, 9);
  cr_assert_leq(s->max_active, 2);
  stop(s);
  free(s);
}

Test(throttle, an_execute_without_instructions_sets_the_window) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "6");
  execute(s, 1, 4, "400", 1);
  /* The client sends a changed window at once, with no work: the waiting ones start. */
  execute(s, 5, 0, "", 4);
  int64_t until = th_now_ms() + 5000;
  while (s->load.active < 4) {
    cr_assert_lt(th_now_ms(), until, "never 4 active (last %u)", s->load.active);
    cr_assert_eq(s->ndone, 0, "something finished before the window was widened");
    heartbeat(s);
  }
  wait_done(s, 4);
  for (int i = 1; i <= 4; i++)
    cr_assert_eq(s->status[i], LT_OK);
  stop(s);
  free(s);
}

Test(throttle, cancel_a_waiting_one) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "4");
  execute(s, 1, 3, "300", 1);
  send_simple(s, LT_MSG_CANCEL, 3);
  int64_t until = th_now_ms() + 5000;
  while (!s->got[3]) {
    cr_assert_lt(th_now_ms(), until, "no answer to the cancel");
    pump(s, 200);
  }
  cr_assert_eq(s->status[3], LT_ECANCELED);
  cr_assert_eq(s->service_us[3], 0);
  cr_assert_eq(s->ndone, 1, "answered at once, before the running one ends");
  heartbeat(s);
  cr_assert_eq(s->load.active + s->load.queued, 2);
  wait_done(s, 3);
  cr_assert_eq(s->status[1], LT_OK);
  cr_assert_eq(s->status[2], LT_OK);
  cr_assert_eq(s->order[1], 1);
  cr_assert_eq(s->order[2], 2);
  heartbeat(s);
  cr_assert_eq(s->load.completed, 2, "the canceled one never ran");
  cr_assert_eq(s->load.queued, 0);
  stop(s);
  free(s);
}

/* bye drops waiting ones with the session; a new session is not held back by them. */
Test(throttle, bye_drops_waiting_ones) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "2");
  execute(s, 1, 4, "200", 1);
  heartbeat(s);
  cr_assert_eq(s->load.active + s->load.queued, 4);
  send_simple(s, LT_MSG_BYE, 0);
  th_client_close(&s->c);
  cr_assert_eq(th_client_open(&s->c, s->srv.endpoint), 0);
  cr_assert_eq(th_hello_ok(&s->c, CLIENT), 0); /* a new session, as bye ended the old one */
  const char *kernels[] = {"testk:sleep"};
  cr_assert_eq(th_program(&s->c, kernels, 1), 0);
  heartbeat(s);
  cr_assert_eq(s->load.queued, 0, "the waiting ones were dropped");
  /* A worker that just finished may still count as active while the next starts (slow
   * under a sanitizer): the count settles to the one running, or none. */
  for (int64_t until = th_now_ms() + 5000; s->load.active > 1 && th_now_ms() < until;) {
    usleep(20 * 1000);
    heartbeat(s);
  }
  cr_assert_leq(s->load.active, 1, "only the running one is left");
  execute(s, 1, 1, "10", 1);
  wait_done(s, 1);
  cr_assert_eq(s->status[1], LT_OK);
  heartbeat(s);
  cr_assert_leq(s->load.completed, 2, "no dropped one ran");
  stop(s);
  free(s);
}

/* SIGTERM answers waiting ones with LT_ESHUTDOWN; the running one finishes. */
Test(throttle, shutdown_answers_waiting_ones) {
  st_t *s = calloc(1, sizeof *s);
  start(s, "2");
  execute(s, 1, 3, "300", 1);
  /* Wait until the first one runs: before a worker takes it, it is only queued, and
   * shutdown rightly answers it LT_ESHUTDOWN too. */
  int64_t started = th_now_ms() + 3000;
  do {
    heartbeat(s);
  } while (s->load.active < 1 && th_now_ms() < started);
  cr_assert_eq(s->load.active, 1);
  cr_assert_eq(s->load.active + s->load.queued, 3);
  kill(s->srv.pid, SIGTERM);
  int64_t until = th_now_ms() + 5000;
  while (s->ndone < 3) {
    cr_assert_lt(th_now_ms(), until, "only %d answers", s->ndone);
    pump(s, 200);
  }
  cr_assert_eq(s->status[1], LT_OK);
  cr_assert_eq(s->status[2], LT_ESHUTDOWN);
  cr_assert_eq(s->status[3], LT_ESHUTDOWN);
  th_client_close(&s->c);
  cr_assert_eq(th_server_stop(&s->srv, 0, 5000), 0, "already signaled: exits 0");
  free(s);
}

/* started_speed starts a server with `extra`, returns its welcome speed and stops it. */
static double started_speed(const char *const *extra) {
  th_server_t srv;
  th_client_t c;
  cr_assert_eq(th_server_start_default(&srv, extra), 0);
  cr_assert_eq(th_client_open(&c, srv.endpoint), 0);
  cr_assert_eq(th_hello(&c, 77, LT_PROTO_VERSION), 0);
  th_rx_t r;
  cr_assert_eq(th_recv(&c, &r, 5000), 0);
  cr_assert_eq(r.m.type, LT_MSG_WELCOME);
  double speed = r.m.u.welcome.speed;
  th_rx_clear(&r);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&srv, SIGTERM, 15000), 0);
  return speed;
}

Test(throttle, speed_calibration) {
  const char *slow[] = {"--slowdown", "4", NULL};
  const char *fixed[] = {"--speed", "2.5", NULL};
  double slower = started_speed(slow);
  /* The calibration times a short CPU loop at start-up, and the suite shares the CPU (two
   * tests at once, other jobs on the machine): a preempted loop measures slow, down to
   * about the --slowdown 4 speed (seen 0.28 vs 0.21 on a loaded machine). Preemption only
   * ever makes it slower, so the unslowed speed is the best of up to five starts. */
  double fast = 0;
  for (int tries = 0; tries < 5 && !(slower < 0.5 * fast); tries++) {
    double f = started_speed(NULL);
    if (f > fast) fast = f;
  }
  double set = started_speed(fixed);
  cr_assert_gt(fast, 0.01, "speed %g", fast);
  cr_assert_lt(fast, 100.0, "speed %g", fast);
  cr_assert_gt(slower, 0.0);
  cr_assert_lt(slower, 0.5 * fast, "--slowdown 4: %g, without (best of 5): %g", slower, fast);
  cr_assert_float_eq(set, 2.5, 1e-9);
}
