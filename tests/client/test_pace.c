/* test_pace.c: the lookahead depth of client/pace.c on a hand-built pace, no sockets: what a
 * server with a window of 2 threads is admitted for a given round trip and service time
 * (Little's law), and the spare depth learnt from starvation — a report of a free thread of
 * the window and nothing queued while work waited at the client for room there — which
 * quiet control periods take back. */
#include <criterion/criterion.h>

#include "sched_servers.h"

#define WINDOW 2
#define KEY    ((const void *)1) /* a chain of the template, by its address */

/* busy makes p the pace of a server with WINDOW threads on 2 cores, whose completions of
 * 1 ms kernels (1 ms of CPU each) have come in, with a ping round trip of rtt_us. */
static void busy(lt_pace_t *p, lt_options_t *o, double rtt_us) {
  lt__options_init(o);
  o->max_threads = WINDOW;
  o->min_threads = 1;
  lt__pace_init(p, WINDOW, o, 0);
  lt__pace_welcome(p, 2, 0);
  p->workers = WINDOW;
  lt__pace_rtt(p, rtt_us);
  for (int i = 0; i < 4 * WINDOW; i++) /* past the young estimates' cap */
    lt__pace_service(p, KEY, 1000, 1000);
}

static void report(lt_pace_t *p, uint32_t active, uint32_t queued) {
  lt_load_t load = {.active = active, .queued = queued};
  lt__pace_load(p, &load);
}

/* starve_once reports a starvation: work waited at the client, then one thread free. */
static void starve_once(lt_pace_t *p) {
  lt__pace_full(p);
  report(p, WINDOW - 1, 0);
}

Test(pace, the_depth_covers_the_ping_round_trip) {
  lt_pace_t p;
  lt_options_t o;
  /* 0.5 ms per instruction when busy (1 ms over 2 threads): a 0.2 ms round trip needs one
   * more than the window, a 1.2 ms one three more (2.4 rounded up). */
  busy(&p, &o, 200);
  cr_assert_float_eq(p.per_us, 500, 1e-6);
  cr_assert_eq(p.cap, WINDOW + 1);
  lt__options_clear(&o);
  busy(&p, &o, 1200);
  cr_assert_eq(p.cap, WINDOW + 3);
  lt__options_clear(&o);
}

Test(pace, a_starvation_while_work_waits_adds_a_spare_up_to_one_per_thread) {
  lt_pace_t p;
  lt_options_t o;
  busy(&p, &o, 200);
  starve_once(&p);
  cr_assert_eq(p.cap, WINDOW + 2);
  starve_once(&p);
  cr_assert_eq(p.cap, WINDOW + 3);
  starve_once(&p);
  cr_assert_eq(p.cap, WINDOW + 3, "at most one spare per thread of the window");
  cr_assert_eq(p.starved, 3);
  lt__options_clear(&o);
}

Test(pace, long_kernels_get_one_spare_at_most) {
  lt_pace_t p;
  lt_options_t o;
  busy(&p, &o, 200);
  for (int i = 0; i < 64; i++) /* 100 ms kernels: 50 ms per instruction, over LT_SPARE_US */
    lt__pace_service(&p, KEY, 100000, 100000);
  cr_assert_eq(p.cap, WINDOW + 1);
  starve_once(&p);
  starve_once(&p);
  cr_assert_eq(p.cap, WINDOW + 2);
  cr_assert_eq(p.starved, 2);
  lt__options_clear(&o);
}

Test(pace, no_starvation_without_work_waiting_or_with_the_window_full) {
  lt_pace_t p;
  lt_options_t o;
  busy(&p, &o, 200);
  report(&p, WINDOW - 1, 0); /* the end of the stream: nothing waited at the client */
  lt__pace_full(&p);
  report(&p, WINDOW - 1, 1); /* something queued there: the next one is at hand */
  lt__pace_full(&p);
  report(&p, WINDOW, 0);     /* every thread busy */
  report(&p, WINDOW - 1, 0); /* the wait was seen by the report before */
  cr_assert_eq(p.starved, 0);
  cr_assert_eq(p.cap, WINDOW + 1);
  lt__options_clear(&o);
}

Test(pace, quiet_control_periods_take_the_spares_back) {
  lt_pace_t p;
  lt_options_t o;
  busy(&p, &o, 200);
  starve_once(&p);
  starve_once(&p);
  cr_assert_eq(p.cap, WINDOW + 3);
  int64_t now = 0;
  lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0); /* the period of the starvations */
  for (int k = 0; k < LT_SPARE_QUIET - 1; k++)
    lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0);
  cr_assert_eq(p.cap, WINDOW + 3, "not before LT_SPARE_QUIET quiet periods");
  lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0);
  cr_assert_eq(p.cap, WINDOW + 2);
  for (int k = 0; k < LT_SPARE_QUIET - 1; k++)
    lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0);
  starve_once(&p); /* a starvation in the fifth period: it keeps its spare, and gets one */
  lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0);
  cr_assert_eq(p.cap, WINDOW + 3);
  for (int k = 0; k < 3 * LT_SPARE_QUIET; k++)
    lt__pace_control(&p, &o, now += LT_CONTROL_MS, 0);
  cr_assert_eq(p.cap, WINDOW + 1, "back to the round trip's depth, no lower");
  lt__options_clear(&o);
}

Test(pace, plain_mode_learns_nothing) {
  lt_pace_t p;
  lt_options_t o;
  lt__options_init(&o);
  o.lookahead = 0;
  lt__pace_init(&p, 1, &o, 0);
  p.workers = 6;
  lt__pace_service(&p, KEY, 1000, 1000);
  starve_once(&p);
  cr_assert_eq(p.cap, 1);
  cr_assert_eq(p.starved, 0);
  lt__options_clear(&o);
}
