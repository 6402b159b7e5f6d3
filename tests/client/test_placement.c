/* test_placement.c: the placement policies (client/placement.c) on a hand-built dispatcher
 * state: three ready servers, no sockets. rr cycles over the servers with room; eft sends new
 * work where it would finish first (what running instructions have done counted; before
 * any cost is known, by the cores each server gets) and keeps a successor with its input
 * unless another server would finish it clearly sooner (only once its chain has a cost). */
#include <criterion/criterion.h>

#include "world.h"

#define SERVERS WORLD_SERVERS

/* A dispatcher state whose servers each take 4 instructions at once. */
static void world_with(world_t *w, int placement, int lookahead) {
  world_init(w);
  w->opts.placement = placement;
  w->opts.lookahead = lookahead;
  w->s.placement = lt__placement_of(&w->opts);
  for (size_t i = 0; i < SERVERS; i++) {
    w->srv[i].pace.cap = 4;
    w->srv[i].pace.per_us = 100;
  }
}

static int place(world_t *w, const lt_fire_t *fi, int chained) {
  return w->s.placement->place(&w->s, fi, chained);
}

/* assert_cycles checks that new work goes round the servers, the fastest included. */
static void assert_cycles(world_t *w) {
  lt_fire_t fi = {0};
  w->srv[2].pace.per_us = 1;
  for (int k = 0; k < 2 * SERVERS; k++)
    cr_assert_eq(place(w, &fi, 0), k % SERVERS);
}

Test(placement, chosen_from_the_option) {
  lt_options_t o;
  lt__options_init(&o);
  o.placement = LT_PLACE_EFT;
  cr_assert_str_eq(lt__placement_of(&o)->name, "eft");
  o.placement = LT_PLACE_RR;
  cr_assert_str_eq(lt__placement_of(&o)->name, "rr");
  lt__options_clear(&o);
}

Test(placement, rr_cycles_over_servers_with_room) {
  world_t w;
  world_with(&w, LT_PLACE_RR, 1);
  assert_cycles(&w);
  lt_fire_t fi = {0};
  w.srv[1].admitted = w.srv[1].pace.cap; /* full: skipped */
  cr_assert_eq(place(&w, &fi, 0), 0);
  cr_assert_eq(place(&w, &fi, 0), 2);
  w.srv[0].conn.state = LT_CONN_DEAD;
  w.srv[2].admitted = w.srv[2].pace.cap;
  cr_assert_eq(place(&w, &fi, 0), -1);
  world_fini(&w);
}

Test(placement, eft_picks_the_earliest_finish) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_fire_t fi = {0};
  w.srv[1].pace.per_us = 10;
  w.srv[2].pace.per_us = 50;
  cr_assert_eq(place(&w, &fi, 0), 1);
  w.srv[1].pace.others = 20; /* 200 µs queued there: server 2 finishes first */
  cr_assert_eq(place(&w, &fi, 0), 2);
  world_fini(&w);
}

Test(placement, eft_is_round_robin_in_plain_mode) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 0);
  assert_cycles(&w);
  world_fini(&w);
}

/* costed gives chain `key` a measured cost of `us` on server i (one completion, one core). */
static void costed(world_t *w, size_t i, const void *key, double us) {
  w->srv[i].pace.cores = 1;
  lt__pace_service(&w->srv[i].pace, key, us, us);
}

Test(placement, a_successor_follows_its_input_unless_much_faster_elsewhere) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_tstage_t chain = {0};
  lt_token_t in = {.size = 1000};
  lt__holder_set(&w.s, &in, 0); /* held by server 0 */
  lt_fire_t fi = {.stages = &chain, .nstages = 1, .inputs = &in, .ninputs = 1};
  w.srv[1].pace.per_us = 10;
  cr_assert_eq(place(&w, &fi, 1), 0, "a chain that never ran has no cost to move for");
  costed(&w, 0, &chain, 90);
  costed(&w, 1, &chain, 90);
  costed(&w, 2, &chain, 90);
  w.srv[0].admitted = w.srv[0].pace.cap; /* full: a successor goes there all the same */
  cr_assert_eq(place(&w, &fi, 1), 0);
  costed(&w, 1, &chain, 10);
  w.srv[1].pace.costs[0].raw = w.srv[1].pace.costs[0].cpu = 10; /* 10 µs + 10 µs to fetch */
  cr_assert_eq(place(&w, &fi, 1), 1);
  world_fini(&w);
  world_with(&w, LT_PLACE_RR, 1);
  w.srv[1].pace.per_us = 10;
  cr_assert_eq(place(&w, &fi, 1), 0);
  world_fini(&w);
}

Test(placement, eft_counts_what_running_instructions_have_done) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_tstage_t chain = {0};
  lt_fire_t fi = {.stages = &chain, .nstages = 1};
  w.srv[0].pace.per_us = w.srv[1].pace.per_us = w.srv[2].pace.per_us = 1e6;
  for (size_t i = 0; i < SERVERS; i++)
    costed(&w, i, &chain, 100000); /* 100 ms an instruction everywhere */
  /* Server 0 runs three that started 250 ms ago (at a third of its speed each: 250 ms of its
   * 300 done); server 1 two that started just now; server 2 is down. Counting only what they
   * were given, server 1 would finish first (300 against 400 ms); counting what is done,
   * server 0 will (150 ms). */
  int64_t now = lt__clock_ms();
  lt_instr_rec_t r[5] = {{0}};
  for (int k = 0; k < 5; k++) {
    r[k].seq = (uint64_t)(k + 1) * (LT_MAX_PARTS + 1);
    r[k].stages = &chain;
    r[k].cost_us = 100000;
    r[k].state = LT_IR_QUEUED;
    r[k].conn = -1;
    lt__sched_put_on(&w.s, &r[k], k < 3 ? 0 : 1);
    r[k].run_ms = k < 3 ? now - 250 : now;
  }
  w.srv[2].conn.state = LT_CONN_DEAD;
  cr_assert_lt(lt__server_left_us(&w.s, 0, now), 0.5 * lt__server_left_us(&w.s, 1, now));
  cr_assert_eq(place(&w, &fi, 0), 0);
  for (int k = 0; k < 5; k++)
    lt__sched_take_off(&w.s, &r[k]);
  world_fini(&w);
}

Test(placement, before_any_cost_is_known_work_follows_the_cores_a_server_gets) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_tstage_t chain = {0};
  lt_fire_t fi = {.stages = &chain, .nstages = 1};
  for (size_t i = 0; i < SERVERS; i++) {
    w.srv[i].pace.per_us = 0;
    w.srv[i].pace.cap = 100;
  }
  lt__pace_welcome(&w.srv[0].pace, 2, 0.25); /* a quota of a quarter core */
  lt__pace_welcome(&w.srv[1].pace, 2, 0);    /* no quota: the host's two cores */
  lt__pace_welcome(&w.srv[2].pace, 2, 0.0 / 0.0);
  cr_assert_float_eq(w.srv[0].pace.cores, 0.25, 1e-9);
  cr_assert_float_eq(w.srv[1].pace.cores, 2, 1e-9);
  cr_assert_float_eq(w.srv[2].pace.cores, 2, 1e-9, "NaN from the network is ignored");
  lt__pace_welcome(&w.srv[2].pace, 2, 7.5);
  cr_assert_float_eq(w.srv[2].pace.cores, 2, 1e-9, "more than the host has is ignored");
  int got[SERVERS] = {0};
  for (int k = 0; k < 34; k++) {
    int i = place(&w, &fi, 0);
    cr_assert_geq(i, 0);
    got[i]++;
    w.srv[i].admitted++;
    lt__pace_admit(&w.srv[i].pace, &chain);
  }
  /* 0.25 : 2 : 2 cores: the quarter-core server gets about 1 in 17. */
  cr_assert_leq(got[0], 3, "%d %d %d", got[0], got[1], got[2]);
  cr_assert_geq(got[1], 14, "%d %d %d", got[0], got[1], got[2]);
  cr_assert_geq(got[2], 14, "%d %d %d", got[0], got[1], got[2]);
  world_fini(&w);
}

Test(placement, a_fresh_server_is_costed_from_another_by_their_cores) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_tstage_t cheap = {0}, unknown = {0};
  w.srv[0].pace.cores = 0.9;
  lt__pace_service(&w.srv[0].pace, &cheap, 1800, 1800); /* its mean: 2 ms an instruction */
  w.srv[1].pace.per_us = 0;                             /* no completion yet */
  w.srv[1].pace.cores = 0.3;
  double fast = lt__pace_cost_us(&w.s, 0, &unknown), fresh = lt__pace_cost_us(&w.s, 1, &unknown);
  cr_assert_float_eq(fast, 2000, 1);
  cr_assert_float_eq(fresh, 6000, 1, "a third of the cores: three times the cost (%g)", fresh);
  world_fini(&w);
}
