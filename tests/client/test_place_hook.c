/* test_place_hook.c: the policies' place hook (policy.h) on a hand-built dispatcher state of
 * three ready servers: a server a policy excludes is never chosen, by `eft` or `rr`; a
 * weight shapes eft's choice; the placed hook hears where an instruction went and where it
 * would have gone; with no policy that has the hook, placement runs none of it; and the
 * locality policy keeps work on the holder of its inputs within its factor, and counts it;
 * migrate works under rr, and says it does nothing without lookahead when set on. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "world.h"

#define SERVERS WORLD_SERVERS

/* A policy of the test's own: it excludes server `out` (-1: none) and multiplies the weight
 * of server `favour` by `factor`, and remembers what it was told last. */
typedef struct probe {
  int out, favour;
  double factor;
  int to, unshaped;
  int calls;
} probe_t;

static int probe_place(lt_policy_t *p, const lt_place_t *c, double *weight) {
  probe_t *st = p->state;
  (void)c;
  st->calls++;
  if (st->out >= 0) weight[st->out] = LT_PLACE_OUT;
  if (st->favour >= 0) weight[st->favour] *= st->factor;
  return st->out >= 0 || st->favour >= 0;
}

static void probe_placed(lt_policy_t *p, const lt_place_t *c, int to, int unshaped) {
  probe_t *st = p->state;
  (void)c;
  st->to = to;
  st->unshaped = unshaped;
}

static const lt_policy_ops_t probe_ops = {
    .name = "probe", .place = probe_place, .placed = probe_placed};

/* world_probe makes w a state of SERVERS servers taking 4 instructions each, the options'
 * placement `placement`, and the probe as its only policy (its state in *st). */
static void world_probe(world_t *w, int placement, probe_t *st) {
  world_init(w);
  w->opts.placement = placement;
  w->s.placement = lt__placement_of(&w->opts);
  for (size_t i = 0; i < SERVERS; i++) {
    w->srv[i].pace.cap = 4;
    w->srv[i].pace.per_us = 100;
  }
  *st = (probe_t){.out = -1, .favour = -1, .factor = 1};
  w->s.policies[0] = (lt_policy_t){.ops = &probe_ops, .s = &w->s, .state = st, .places = 1};
  w->s.npolicies = 1;
  w->s.nplacers = 1;
}

/* probe_fini frees w, whose probe state is the test's own. */
static void probe_fini(world_t *w) {
  w->s.npolicies = 0;
  world_fini(w);
}

static int place(world_t *w, const lt_fire_t *fi, int chained) {
  return w->s.placement->place(&w->s, fi, chained);
}

Test(place_hook, an_excluded_server_is_never_chosen) {
  for (int placement = LT_PLACE_EFT; placement <= LT_PLACE_RR; placement++) {
    world_t w;
    probe_t st;
    world_probe(&w, placement, &st);
    w.srv[1].pace.per_us = 1; /* by far the fastest: eft would always choose it */
    st.out = 1;
    lt_fire_t fi = {0};
    for (int k = 0; k < 2 * 4; k++) { /* servers 0 and 2 take 4 each */
      int i = place(&w, &fi, 0);
      cr_assert(i == 0 || i == 2, "placement %d chose %d", placement, i);
      w.srv[i].admitted++;
    }
    cr_assert_eq(place(&w, &fi, 0), -1, "the others are full: it waits");
    /* A successor whose input is on the excluded server does not follow it there. */
    w.srv[0].admitted = w.srv[2].admitted = 0;
    lt_token_t in = {.size = 1000};
    lt__holder_set(&w.s, &in, 1); /* held by server 1 */
    lt_fire_t succ = {.inputs = &in, .ninputs = 1};
    int i = place(&w, &succ, 1);
    cr_assert(i == 0 || i == 2, "placement %d chose %d for a successor", placement, i);
    cr_assert_eq(st.calls, 2 * 4 + 2);
    probe_fini(&w);
  }
}

Test(place_hook, a_weight_shapes_eft_and_placed_hears_of_it) {
  world_t w;
  probe_t st;
  world_probe(&w, LT_PLACE_EFT, &st);
  w.opts.lookahead = 1;
  w.srv[0].pace.per_us = 300;
  w.srv[1].pace.per_us = 100;
  w.srv[2].pace.per_us = 200;
  lt_fire_t fi = {0};
  st.to = st.unshaped = -2;
  cr_assert_eq(place(&w, &fi, 0), 1);
  cr_assert_eq(st.to, -2, "no weight set: placed is not called");
  st.favour = 0;
  st.factor = 0.5; /* 150 µs as weighed: still behind server 1 */
  cr_assert_eq(place(&w, &fi, 0), 1);
  cr_assert_eq(st.to, 1);
  cr_assert_eq(st.unshaped, 1);
  st.factor = 0.3; /* 90 µs as weighed: ahead */
  cr_assert_eq(place(&w, &fi, 0), 0);
  cr_assert_eq(st.to, 0);
  cr_assert_eq(st.unshaped, 1, "without the weight it would have gone to server 1");
  st.factor = 10; /* a weight above 1 keeps work off server 0 */
  w.srv[1].pace.per_us = w.srv[2].pace.per_us = 2000;
  cr_assert_neq(place(&w, &fi, 0), 0);
  probe_fini(&w);
}

/* A state of SERVERS servers with the policies the options enable (locality at `factor`). */
static void world_locality(world_t *w, const char *factor) {
  world_init(w);
  cr_assert_eq(lt__options_set(&w->opts, "locality", factor), LT_OK);
  w->s.placement = lt__placement_of(&w->opts);
  for (size_t i = 0; i < SERVERS; i++) {
    w->srv[i].pace.cap = 4;
    w->srv[i].pace.per_us = 200;
  }
  cr_assert_eq(world_policies(w), LT_OK);
}

Test(place_hook, without_a_place_hook_placement_runs_none) {
  world_t w;
  world_locality(&w, "0");
  cr_assert_gt(w.s.npolicies, 0);
  cr_assert_eq(w.s.nplacers, 0, "the default policies shape no placement under eft");
  world_fini(&w);
  world_locality(&w, "1.5");
  cr_assert_eq(w.s.nplacers, 1);
  world_fini(&w);
}

Test(place_hook, locality_keeps_work_on_the_holder_within_its_factor) {
  world_t w;
  world_locality(&w, "1.5");
  lt_token_t in = {.size = 1000};
  lt__holder_set(&w.s, &in, 0); /* 1000 bytes held by server 0: 10 µs to move */
  lt_fire_t fi = {.inputs = &in, .ninputs = 1};
  w.srv[0].pace.per_us = 100;
  w.srv[1].pace.per_us = 80; /* 90 µs with the move: ahead of 100, within 1.5 times */
  cr_assert_eq(place(&w, &fi, 0), 0);
  cr_assert_eq(lt__policies_stat(&w.s, SIZE_MAX, "locality_kept"), 1);
  cr_assert_eq(lt__policies_stat(&w.s, SIZE_MAX, "locality_bytes_saved"), 1000);
  w.srv[1].pace.per_us = 50; /* 60 µs: beyond the factor, the input moves */
  cr_assert_eq(place(&w, &fi, 0), 1);
  cr_assert_eq(lt__policies_stat(&w.s, SIZE_MAX, "locality_kept"), 1);
  world_fini(&w);
  world_locality(&w, "0"); /* off: eft as ever */
  w.srv[0].pace.per_us = 100;
  w.srv[1].pace.per_us = 80;
  cr_assert_eq(place(&w, &fi, 0), 1);
  cr_assert_eq(lt__policies_stat(&w.s, SIZE_MAX, "locality_kept"), 0);
  world_fini(&w);
}

/* Under rr, migrate's place hook sends a record it put back to a server with a thread free,
 * not to the next with room (the slow server it came from may be that one), and only it. */
Test(place_hook, migrate_under_rr_sends_what_it_put_back_to_a_free_thread) {
  world_t w;
  world_init(&w);
  w.opts.placement = LT_PLACE_RR;
  w.s.placement = lt__placement_of(&w.opts);
  cr_assert_eq(world_policies(&w), LT_OK);
  size_t k = world_policy(&w, &lt__policy_migrate);
  cr_assert_neq(k, SIZE_MAX);
  cr_assert_eq(w.s.nplacers, 1, "migrate shapes rr's placements");
  for (size_t i = 0; i < SERVERS; i++) {
    w.srv[i].pace.cap = 4;
    w.srv[i].pace.window = 1;
    w.srv[i].admitted = i < 2; /* servers 0 and 1 run one each: their one thread is taken */
  }
  lt_fire_t fi = {0};
  lt_instr_rec_t r = {.seq = LT_MAX_PARTS + 1, .state = LT_IR_MIGRATING, .conn = 0};
  lt__policies_applied(&w.s, &(lt_req_t){.kind = LT_REQ_RECALL, .policy = k, .seq = r.seq});
  lt__policies_end(&w.s, &r, 0, LT_END_NOT_RUN, NULL); /* its cancel confirmed */
  cr_assert_eq(lt__policies_stat(&w.s, SIZE_MAX, "migrated"), 1);
  cr_assert_eq(place(&w, &fi, 0), 2, "the record put back goes to the free thread");
  w.s.rr = 0;
  cr_assert_eq(place(&w, &fi, 0), 0, "then rr as ever");
  world_fini(&w);
}

/* policies_logged turns on w's policies with what they log on stderr meanwhile in buf. */
static void policies_logged(world_t *w, char *buf, size_t len) {
  FILE *tmp = tmpfile();
  cr_assert_not_null(tmp);
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  cr_assert_eq(world_policies(w), LT_OK);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(buf, 1, len - 1, tmp);
  buf[n] = '\0';
  fclose(tmp);
}

Test(place_hook, migrate_set_on_without_lookahead_says_it_does_nothing) {
  char log[4096];
  lt__log_set_level(LT_LOG_WARN); /* whatever LITHIUM_LOG says */
  world_t w;
  world_init(&w);
  cr_assert_eq(lt__options_set(&w.opts, "mode", "plain"), LT_OK); /* lookahead off */
  policies_logged(&w, log, sizeof log);
  cr_assert_eq(world_policy(&w, &lt__policy_migrate), SIZE_MAX);
  cr_assert_null(strstr(log, "migrate=on"), "left at its default, it is quiet: %s", log);
  world_fini(&w);
  world_init(&w);
  cr_assert_eq(lt__options_set(&w.opts, "mode", "plain"), LT_OK);
  cr_assert_eq(lt__options_set(&w.opts, "migrate", "on"), LT_OK);
  policies_logged(&w, log, sizeof log);
  cr_assert_eq(world_policy(&w, &lt__policy_migrate), SIZE_MAX);
  cr_assert_not_null(strstr(log, "migrate=on does nothing: without lookahead"), "%s", log);
  world_fini(&w);
}
