/* test_chaos.c: the chaos soak (issue 21 item 6). A lazy pipeline runs on four real
 * lithium-server processes while, at random, a server is killed (SIGKILL), paused
 * (SIGSTOP, then SIGCONT), stopped (SIGTERM) and restarted on its own endpoint; every
 * result must come back right, in order. The soak is bounded in time (LT_CHAOS_MS, 20 s by
 * default, of chaos, then the rest is drained with every server up) and seeded: the seed is
 * printed, and LT_CHAOS_SEED replays one. Losses here are no crash of a kernel, so they are
 * charged to max_retries, which is set out of reach: no task may fail. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NSERVERS    4
#define OUTSTANDING 64    /* tasks submitted and not yet read, at most */
#define DRAIN_MS    60000 /* every result after the chaos, with every server up */

typedef enum { UP, PAUSED, DOWN } state_t;

typedef struct server {
  lt_proc_t p;
  char endpoint[256];
  state_t state;
  int64_t until_ms; /* PAUSED, DOWN: when it continues or is started again */
} server_t;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng;

/* rnd returns a pseudo-random number below n (xorshift64*). */
static uint32_t rnd(uint32_t n) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (uint32_t)((rng * 0x2545F4914F6CDD1DULL) >> 33) % n;
}

static const char *const unsupervised[] = {"--no-supervise", NULL};

/* The servers, for the end of the test whatever its outcome: none is left paused or
 * running. */
static server_t sv[NSERVERS];

static void reap_all(void) {
  for (int i = 0; i < NSERVERS; i++) {
    if (sv[i].p.pid > 0 && sv[i].state == PAUSED) kill(sv[i].p.pid, SIGCONT);
    lt__proc_stop(&sv[i].p, 5000);
  }
}

/* restart starts server v again on its endpoint; another process may hold the port for a
 * moment (a socket of the dead one closing), so it tries for a while. */
static void restart(server_t *v) {
  const char *args[] = {"--no-supervise", "--listen", v->endpoint, NULL};
  char err[256] = "";
  for (int i = 0; i < 50; i++) {
    if (lt__proc_spawn(&v->p, LT_TEST_SERVER, LT_TEST_MODULES, 2, "chaos", args, 10000, err,
                       sizeof err) == LT_OK) {
      cr_assert_str_eq(v->p.endpoint, v->endpoint);
      v->state = UP;
      return;
    }
    usleep(100 * 1000);
  }
  cr_assert_fail("cannot restart %s: %s", v->endpoint, err);
}

/* heal continues or restarts server v when its time is up (now), or at once (force). */
static void heal(server_t *v, int64_t now, int force) {
  if (v->state == UP || (!force && now < v->until_ms)) return;
  if (v->state == PAUSED) {
    kill(v->p.pid, SIGCONT);
    v->state = UP;
  } else {
    restart(v);
  }
}

/* strike does one random thing to a random server that is up, keeping one up at least. */
static void strike(int64_t now, unsigned *counts) {
  int up = 0;
  for (int i = 0; i < NSERVERS; i++)
    up += sv[i].state == UP;
  if (up < 2) return;
  server_t *v = &sv[rnd(NSERVERS)];
  if (v->state != UP) return;
  uint32_t what = rnd(3);
  counts[what]++;
  if (what == 0) { /* killed: its values and work are lost at once */
    kill(v->p.pid, SIGKILL);
    lt__proc_stop(&v->p, 1000);
    v->state = DOWN;
    v->until_ms = now + 100 + rnd(600);
  } else if (what == 1) { /* paused: short of, or beyond, the heartbeat timeout */
    kill(v->p.pid, SIGSTOP);
    v->state = PAUSED;
    v->until_ms = now + 100 + rnd(1500);
  } else { /* stopped gracefully */
    lt__proc_stop(&v->p, 5000);
    v->state = DOWN;
    v->until_ms = now + 100 + rnd(600);
  }
}

static void submit(lt_eval_t *ev, int64_t v) {
  unsigned char tok[8];
  put_i64(tok, v);
  cr_assert_eq(lt_eval_submit(ev, tok, 8, NULL), LT_OK);
}

/* take reads the next result when one comes within `ms`: it must be task `next`'s, right.
 * Returns 1 when it read one. */
static int take(lt_eval_t *ev, int64_t next, int ms) {
  lt_buf_t *b = NULL;
  int rc = lt_eval_next_timeout(ev, ms, &b);
  if (rc == LT_ETIMEDOUT) return 0;
  cr_assert_eq(rc, LT_OK, "result %lld: %s", (long long)next, lt_strerror(rc));
  cr_assert_eq(lt_buf_error(b), LT_OK, "task %lld: %s %s", (long long)next,
               lt_strerror(lt_buf_error(b)), lt_buf_errmsg(b));
  cr_assert_eq(lt_buf_len(b), 8);
  cr_assert_eq(get_i64(lt_buf_data(b)), (next + 1) * 2, "task %lld", (long long)next);
  lt_buf_free(b);
  return 1;
}

Test(chaos, lazy_pipeline_under_kills_pauses_stops_and_restarts, .timeout = 240, .fini = reap_all) {
  const char *s = getenv("LT_CHAOS_SEED");
  rng = s != NULL ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  if (rng == 0) rng = 1;
  uint64_t seed = rng;
  const char *d = getenv("LT_CHAOS_MS");
  int64_t chaos_ms = d != NULL ? strtoll(d, NULL, 10) : 20000;
  fprintf(stderr, "chaos: seed %llu (LT_CHAOS_SEED=%llu replays it), %lld ms\n",
          (unsigned long long)seed, (unsigned long long)seed, (long long)chaos_ms);

  lt_proc_t procs[NSERVERS];
  memset(sv, 0, sizeof sv);
  for (int i = 0; i < NSERVERS; i++) {
    start_server_with(&sv[i].p, "chaos", 2, unsupervised);
    snprintf(sv[i].endpoint, sizeof sv[i].endpoint, "%s", sv[i].p.endpoint);
    procs[i] = sv[i].p;
  }
  /* Values stay on the servers between the stages (lazy binding), so a loss recomputes. */
  const char *opts[] = {"heartbeat_ms",       "200",   "max_retries", "1000",
                        "connect_timeout_ms", "30000", NULL};
  lt_eval_t *ev =
      eval_on_procs(lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq_with("testk:sleep", "2", 1),
                                        lt_seq("testk:dbl"), NULL)),
                    procs, NSERVERS, opts);
  unsigned counts[3] = {0};
  int64_t submitted = 0, read = 0;
  int64_t t0 = now_ms(), next_strike = t0 + 200;
  for (int64_t now = t0; now - t0 < chaos_ms; now = now_ms()) {
    while (submitted - read < OUTSTANDING)
      submit(ev, submitted++);
    read += take(ev, read, 20);
    for (int i = 0; i < NSERVERS; i++)
      heal(&sv[i], now, 0);
    if (now >= next_strike) {
      strike(now, counts);
      next_strike = now + 100 + rnd(400);
    }
  }
  for (int i = 0; i < NSERVERS; i++)
    heal(&sv[i], 0, 1);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  int64_t deadline = now_ms() + DRAIN_MS;
  while (read < submitted) {
    cr_assert_lt(now_ms(), deadline, "%lld of %lld results after the chaos (seed %llu)",
                 (long long)read, (long long)submitted, (unsigned long long)seed);
    read += take(ev, read, 100);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(ev, 10000, &b), LT_ECLOSED);
  fprintf(stderr, "chaos: seed %llu: %lld tasks right through %u kills, %u pauses, %u stops\n",
          (unsigned long long)seed, (long long)read, counts[0], counts[1], counts[2]);
  cr_assert_gt(counts[0] + counts[1] + counts[2], 0);
  lt_eval_free(ev);
}
