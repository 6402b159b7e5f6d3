/* test_placement.c: the placement policies (client/placement.c) on a hand-built dispatcher
 * state: three ready servers, no sockets. rr cycles over the servers with room; eft sends new
 * work where it would finish first and keeps a successor with its input unless another
 * server would finish it clearly sooner. */
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

Test(placement, a_successor_follows_its_input_unless_much_faster_elsewhere) {
  world_t w;
  world_with(&w, LT_PLACE_EFT, 1);
  lt_token_t in = {.at = 1, .size = 1000}; /* held by server 0 */
  lt_fire_t fi = {.inputs = &in, .ninputs = 1};
  w.srv[0].admitted = w.srv[0].pace.cap; /* full: a successor goes there all the same */
  w.srv[1].pace.per_us = 90;
  w.srv[2].pace.per_us = 90;
  cr_assert_eq(place(&w, &fi, 1), 0);
  w.srv[1].pace.per_us = 10; /* 10 µs + 10 µs to fetch, against 100 µs */
  cr_assert_eq(place(&w, &fi, 1), 1);
  world_fini(&w);
  world_with(&w, LT_PLACE_RR, 1);
  w.srv[1].pace.per_us = 10;
  cr_assert_eq(place(&w, &fi, 1), 0);
  world_fini(&w);
}
