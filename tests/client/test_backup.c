/* test_backup.c: when an instruction counts as running, and for how long, and when it is a
 * straggler for a copy (client/instr.c, client/backup.c), on a hand-built dispatcher state:
 * three ready servers taking two instructions at once, no sockets. An instruction runs since
 * the client saw it come into its server's threads, and a later completion of another one
 * there does not move that start. One whose migration's cancel is on its way may have begun
 * before the cancel arrives, and gets a copy too: if the copy wins the original is dropped,
 * and if the cancel is confirmed the copy carries on alone (client/instr.c, lt__rec_settle). */
#include <criterion/criterion.h>

#include "exec.h"
#include "world.h"

#define THREADS 2
#define COST_US 100000.0 /* 100 ms an instruction on every server */
#define RECS    5

/* Instruction records of one task, out of a farm's one-stage chain. */
typedef struct recs {
  lt_job_rec_t job;
  lt_tstage_t stage; /* the chain's key */
  lt_instr_rec_t r[RECS];
} recs_t;

/* setup_cost makes a world whose servers run THREADS instructions at once and have run the
 * chain (2 * cost_us of service two at a time, cost_us / 2 of CPU), and RECS queued records. */
static void setup_cost(world_t *w, recs_t *q, double cost_us) {
  world_init(w);
  memset(q, 0, sizeof *q);
  for (size_t i = 0; i < WORLD_SERVERS; i++) {
    lt__pace_init(&w->srv[i].pace, 4, &w->opts, 0);
    w->srv[i].pace.window = THREADS;
    w->srv[i].pace.workers = THREADS;
    w->srv[i].pace.cores = 1;
    lt__pace_service(&w->srv[i].pace, &q->stage, 2 * cost_us, cost_us / 2);
  }
  for (size_t k = 0; k < RECS; k++) {
    lt_instr_rec_t *r = &q->r[k];
    r->seq = (k + 1) * (LT_MAX_PARTS + 1);
    r->job = &q->job;
    r->op = LT_OP_SEQ;
    r->final = 1;
    r->stages = &q->stage;
    r->nstages = 1;
    r->state = LT_IR_QUEUED;
    r->conn = -1;
  }
}

/* setup makes the world of setup_cost with instructions of COST_US (100 ms). */
static void setup(world_t *w, recs_t *q) {
  setup_cost(w, q, COST_US);
}

/* teardown takes every record off its server and frees the world. */
static void teardown(world_t *w) {
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    while (w->srv[i].slot.out != NULL)
      lt__sched_take_off(&w->s, w->srv[i].slot.out);
  world_fini(w);
}

/* send puts record k on server idx at t_ms, with the cost expected there. */
static lt_instr_rec_t *send(world_t *w, recs_t *q, size_t k, int idx, int64_t t_ms) {
  lt_instr_rec_t *r = &q->r[k];
  r->sent_ms = t_ms;
  r->cost_us = lt__pace_cost_us(&w->s, (size_t)idx, r->stages);
  r->cost_known = 1;
  lt__sched_put_on(&w->s, r, idx);
  return r;
}

/* A world whose server 0 was sent a, b and c at t0 (records 0, 1 and 2): a and b run, c waits. */
typedef struct fixture {
  world_t w;
  recs_t q;
  lt_instr_rec_t *a, *b, *c;
} fixture_t;

static void start(fixture_t *f, int64_t t0) {
  setup(&f->w, &f->q);
  f->a = send(&f->w, &f->q, 0, 0, t0);
  f->b = send(&f->w, &f->q, 1, 0, t0);
  f->c = send(&f->w, &f->q, 2, 0, t0);
}

Test(backup, instructions_run_in_the_order_sent_up_to_the_threads) {
  fixture_t f;
  int64_t t0 = lt__clock_ms() - 100;
  start(&f, t0);
  cr_assert_eq(f.a->run_ms, t0);
  cr_assert_eq(f.b->run_ms, t0);
  cr_assert_eq(f.c->run_ms, -1, "a third waits behind two threads' worth");
  lt__sched_take_off(&f.w.s, f.a); /* a completes: c takes its thread */
  cr_assert_geq(f.c->run_ms, t0 + 100);
  cr_assert_eq(f.b->run_ms, t0, "a completion there does not restart what was already running");
  cr_assert_eq(f.w.srv[0].slot.idle_ms, 0);
  lt__sched_take_off(&f.w.s, f.b);
  lt__sched_take_off(&f.w.s, f.c);
  cr_assert(f.w.s.freed, "server 0 runs nothing of ours: copies are looked for now");
  cr_assert_geq(f.w.srv[0].slot.idle_ms, f.c->run_ms);
  teardown(&f.w);
}

Test(backup, more_threads_let_the_next_in_line_run) {
  fixture_t f;
  start(&f, 1000);
  f.w.srv[0].pace.workers = THREADS + 1;
  lt__sched_mark_running(&f.w.s, 0, 1500);
  cr_assert_eq(f.c->run_ms, 1500);
  teardown(&f.w);
}

Test(backup, a_window_runs_below_the_threads_only_under_throttle) {
  fixture_t f;
  start(&f, 1000);
  f.w.srv[0].pace.window = THREADS;
  f.w.srv[0].pace.workers = THREADS + 1;
  f.w.opts.throttle = 1; /* the server keeps to the window */
  lt__sched_mark_running(&f.w.s, 0, 1500);
  cr_assert_eq(f.c->run_ms, -1);
  f.w.opts.throttle = 0; /* the window only bounds what the client admits: all three run */
  lt__sched_mark_running(&f.w.s, 0, 1600);
  cr_assert_eq(f.c->run_ms, 1600);
  teardown(&f.w);
}

Test(backup, a_straggler_is_judged_by_how_long_it_has_run) {
  /* Server 0 runs a and b since t0 and c waits; server 1 runs d; server 2 has nothing. */
  fixture_t f;
  start(&f, lt__clock_ms() - 100);
  lt_instr_rec_t *d = send(&f.w, &f.q, 3, 1, f.a->sent_ms);
  cr_assert_float_eq(f.b->cost_us, COST_US, 1e-6); /* backup_factor 2: a straggler after 200 ms */
  lt__sched_take_off(&f.w.s, f.a); /* a completes at least 100 ms after t0: c runs */
  int64_t t = f.c->run_ms + 120;   /* b has run 220 ms or more, c 120 ms */
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "b straggles and server 2 is idle");
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.c, t), -1, "c has run less than twice its cost");
  cr_assert_eq(lt__sched_backup_target(&f.w.s, d, t), 2);
  send(&f.w, &f.q, 4, 2, t); /* server 2 gets work: no server is idle */
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), -1);
  teardown(&f.w);
}

/* half_ms_running makes the world of setup_cost with instructions of 0.5 ms and returns
 * one running on server 0 since 100 ms ago. */
static lt_instr_rec_t *half_ms_running(world_t *w, recs_t *q) {
  setup_cost(w, q, 500.0);
  lt_instr_rec_t *a = send(w, q, 0, 0, lt__clock_ms() - 100);
  cr_assert_geq(a->run_ms, 0, "a runs");
  return a;
}

/* A straggler is at least BACKUP_RTTS (4) round trips to its server old, and at least
 * BACKUP_MIN_MS (2 ms): younger, a copy's hand-off and its twin's cancel cost more than a
 * copy can save, however short its chain. Instructions of 0.5 ms (backup_factor 2: due a
 * copy after 1 ms): at a round trip of 3 ms, not before 12 ms; at one of 0.1 ms, not before
 * 2 ms. */
Test(backup, a_straggler_is_four_round_trips_and_two_ms_old_at_least) {
  world_t w;
  recs_t q;
  lt_instr_rec_t *a = half_ms_running(&w, &q);
  w.srv[0].pace.rtt_us = 3000.0;
  cr_assert_eq(lt__sched_backup_target(&w.s, a, a->run_ms + 11), -1, "11 ms < 4 round trips");
  cr_assert_geq(lt__sched_backup_target(&w.s, a, a->run_ms + 13), 1, "13 ms: a straggler");
  w.srv[0].pace.rtt_us = 100.0;
  cr_assert_eq(lt__sched_backup_target(&w.s, a, a->run_ms + 1), -1, "1 ms < BACKUP_MIN_MS");
  cr_assert_geq(lt__sched_backup_target(&w.s, a, a->run_ms + 3), 1, "3 ms: a straggler");
  teardown(&w);
}

/* A straggler has also run longer than its expected time by twice the servers' noise, the
 * longest delay beyond work each saw lately (a scheduling pause of a loaded machine),
 * halving every LT_NOISE_HALF_MS; the least of the servers', since a pause of the client
 * delays them all, while a slow server is late alone. Instructions of 0.5 ms (due a copy
 * after 1 ms) when the servers' completions came up to 10 ms late: not before 21 ms; the
 * noise of a longer pause replaces it, a shorter one does not. */
Test(backup, a_straggler_is_older_than_twice_the_servers_noise) {
  world_t w;
  recs_t q;
  lt_instr_rec_t *a = half_ms_running(&w, &q);
  for (size_t i = 0; i < WORLD_SERVERS; i++) {
    lt__pace_noise(&w.srv[i].pace, 10000.0, a->run_ms);
    lt__pace_noise(&w.srv[i].pace, 3000.0, a->run_ms); /* shorter: the longest stays */
  }
  lt_pace_t *p = &w.srv[0].pace;
  cr_assert_float_eq(lt__pace_noise_us(p, a->run_ms), 10000.0, 1e-6);
  cr_assert_eq(lt__sched_backup_target(&w.s, a, a->run_ms + 20), -1, "20 ms: a pause");
  cr_assert_geq(lt__sched_backup_target(&w.s, a, a->run_ms + 22), 1, "22 ms: a straggler");
  cr_assert_float_eq(lt__pace_noise_us(p, a->run_ms + LT_NOISE_HALF_MS), 5000.0, 1e-6);
  cr_assert_float_eq(lt__pace_noise_us(p, a->run_ms + 2 * LT_NOISE_HALF_MS), 2500.0, 1e-6);
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    lt__pace_noise(&w.srv[i].pace, 40000.0, a->run_ms + 1);
  cr_assert_eq(lt__sched_backup_target(&w.s, a, a->run_ms + 80), -1, "a longer pause: 81 ms");
  cr_assert_geq(lt__sched_backup_target(&w.s, a, a->run_ms + 82), 1);
  teardown(&w);
}

/* A server late on its own is slow, not noise: server 0's completions came 40 ms late, the
 * others' 1 ms; its instructions of 0.5 ms straggle after 3 ms (1 ms + twice 1 ms). */
Test(backup, a_slow_servers_own_lateness_is_no_noise) {
  world_t w;
  recs_t q;
  lt_instr_rec_t *a = half_ms_running(&w, &q);
  lt__pace_noise(&w.srv[0].pace, 40000.0, a->run_ms);
  for (size_t i = 1; i < WORLD_SERVERS; i++)
    lt__pace_noise(&w.srv[i].pace, 1000.0, a->run_ms);
  cr_assert_eq(lt__sched_backup_target(&w.s, a, a->run_ms + 2), -1, "2 ms: not yet");
  cr_assert_geq(lt__sched_backup_target(&w.s, a, a->run_ms + 4), 1, "4 ms: a straggler");
  teardown(&w);
}

/* with_policies turns the backup and migrate policies on in f's world. */
static void with_policies(fixture_t *f) {
  f->w.opts.backup = f->w.opts.migrate = f->w.opts.lookahead = 1;
  f->w.opts.placement = LT_PLACE_EFT;
  cr_assert_eq(world_policies(&f->w), LT_OK);
  cr_assert_neq(world_policy(&f->w, &lt__policy_backup), SIZE_MAX);
  cr_assert_neq(world_policy(&f->w, &lt__policy_migrate), SIZE_MAX);
}

/* applied tells policy `ops` that the loop applied its request of `kind` about r (to server
 * `to`), as requests.c does. */
static void applied(fixture_t *f, const lt_policy_ops_t *ops, lt_req_kind_t kind,
                    const lt_instr_rec_t *r, size_t to) {
  lt_req_t q = {.kind = kind, .policy = world_policy(&f->w, ops), .seq = r->seq, .server = to};
  lt__policies_applied(&f->w.s, &q);
}

/* end ends r's time on its server as lt__sched_end does: the policies hear of it, then it
 * is settled. */
static lt_settle_t end(fixture_t *f, lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp) {
  lt__policies_end(&f->w.s, r, (size_t)r->conn, why, cp);
  return lt__rec_settle(&f->w.s, r, why, cp);
}

static uint64_t stat(const fixture_t *f, const char *key) {
  return lt__policies_stat(&f->w.s, SIZE_MAX, key);
}

/* migrating_with_copy puts f's c (waiting on server 0) under a migration's cancel and
 * makes it run, as when the server took it before the cancel came, and gives it a copy on
 * server 1, idle. */
static lt_instr_rec_t *migrating_with_copy(fixture_t *f) {
  with_policies(f);
  lt__rec_to(f->c, LT_IR_MIGRATING);
  applied(f, &lt__policy_migrate, LT_REQ_RECALL, f->c, 0);
  cr_assert_eq(lt__migrate_cancels_out(&f->w.s), 1);
  lt__sched_take_off(&f->w.s, f->a); /* c takes a's thread */
  int64_t t = f->c->run_ms + 250;
  cr_assert_eq(lt__sched_backup_target(&f->w.s, f->c, t), 1, "a migrating straggler gets a copy");
  lt_instr_rec_t *copy = &f->q.r[3];
  copy->backup = 1;
  copy->twin = f->c;
  f->c->twin = copy;
  send(&f->w, &f->q, 3, 1, t);
  applied(f, &lt__policy_backup, LT_REQ_COPY, f->c, 1);
  cr_assert_eq(stat(f, "backups"), 1);
  cr_assert_eq(lt__policies_stat(&f->w.s, 1, "copies"), 1);
  return copy;
}

Test(backup, a_copy_that_wins_drops_its_migrating_twin) {
  fixture_t f;
  start(&f, 1000);
  lt_instr_rec_t *copy = migrating_with_copy(&f);
  lt_completion_t ok = {.seq = copy->seq, .status = LT_OK};
  cr_assert_eq(end(&f, copy, LT_END_DONE, &ok), LT_SETTLE_APPLY, "the copy's result is applied");
  cr_assert_eq(f.c->state, LT_IR_DROPPED);
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 0,
               "the cancel's answer only frees the dropped twin");
  cr_assert_eq(stat(&f, "backups_won"), 1);
  lt_completion_t cancelled = {.seq = f.c->seq, .status = LT_ECANCELED}; /* its answer comes */
  cr_assert_eq(lt__rec_settle(&f.w.s, f.c, LT_END_NOT_RUN, &cancelled), LT_SETTLE_DROP,
               "dropped: no effect (the policies hear of no end of a dropped twin)");
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 0);
  cr_assert_eq(stat(&f, "migrated"), 0);
  teardown(&f.w);
}

Test(backup, a_migration_confirmed_leaves_the_copy_alone) {
  fixture_t f;
  start(&f, 1000);
  lt_instr_rec_t *copy = migrating_with_copy(&f);
  lt_completion_t cancelled = {.seq = f.c->seq, .status = LT_ECANCELED}; /* c never ran */
  cr_assert_eq(end(&f, f.c, LT_END_NOT_RUN, &cancelled), LT_SETTLE_DROP,
               "not placed again, and without effect: its copy runs");
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 0);
  cr_assert_eq(stat(&f, "migrated"), 0);
  cr_assert_null(copy->twin);
  cr_assert_eq(copy->backup, 0, "the copy is the instruction now, placed again if lost");
  cr_assert_eq(stat(&f, "backups_won"), 1);
  teardown(&f.w);
}

/* A migration whose cancel is confirmed for a record with no copy places it again: the
 * migrate policy counts it moved, and its cancel answered. One that had started stays. */
Test(backup, a_migration_confirmed_is_counted_moved) {
  fixture_t f;
  start(&f, 1000);
  with_policies(&f);
  lt__rec_to(f.b, LT_IR_MIGRATING);
  lt__rec_to(f.c, LT_IR_MIGRATING);
  applied(&f, &lt__policy_migrate, LT_REQ_RECALL, f.b, 0);
  applied(&f, &lt__policy_migrate, LT_REQ_RECALL, f.c, 0);
  cr_assert_eq(stat(&f, "migrations"), 2);
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 2, "a round's cancels hold the next round");
  lt_completion_t ran = {.seq = f.b->seq, .status = LT_OK}; /* b had started: it completes */
  cr_assert_eq(end(&f, f.b, LT_END_DONE, &ran), LT_SETTLE_APPLY);
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 1);
  lt_completion_t cancelled = {.seq = f.c->seq, .status = LT_ECANCELED};
  cr_assert_eq(end(&f, f.c, LT_END_NOT_RUN, &cancelled), LT_SETTLE_REQUEUED);
  cr_assert_eq(lt__migrate_cancels_out(&f.w.s), 0);
  cr_assert_eq(stat(&f, "migrated"), 1, "c moves, b does not");
  cr_assert_eq(stat(&f, "backups_won"), 0);
  lt__sched_pop_fireable(&f.w.s); /* c waits for placement: out of the queue before teardown */
  teardown(&f.w);
}

/* computing makes server idx report `active` instructions running on its one core, using
 * `cpu` cores. */
static void computing(world_t *w, size_t idx, uint32_t active, double cpu) {
  lt_load_t load = {.active = active, .cpu = (float)cpu};
  w->srv[idx].conn.load = load;
  lt__pace_load(&w->srv[idx].pace, &load);
}

/* straggling makes f's world with b straggling on server 0 (run 220 ms or more), server 1
 * busy and server 2 idle, and returns the time at which b is judged; with `speed`, every
 * server says that calibrated speed. */
static int64_t straggling(fixture_t *f, double speed) {
  start(f, lt__clock_ms() - 100);
  send(&f->w, &f->q, 3, 1, f->a->sent_ms);
  lt__sched_take_off(&f->w.s, f->a);
  for (size_t i = 0; i < WORLD_SERVERS; i++)
    f->w.srv[i].conn.speed = speed;
  return f->c->run_ms + 120;
}

/* A straggler on a server that computes undisturbed has done work a copy must redo: an
 * idle server of the same speed would finish no sooner, so it gets no copy; a server five
 * times faster for the chain does get one. On a server whose CPU is taken from it (a
 * quarter of what its kernels would use) the same straggler has done little, and an idle
 * server of the same speed gets the copy. */
Test(backup, a_copy_must_beat_the_straggler_s_own_progress) {
  fixture_t f;
  int64_t t = straggling(&f, 0); /* no calibrated speeds: the chain's costs judge */
  computing(&f.w, 0, 2, 1.0);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), -1, "server 2 is no faster than 0");
  computing(&f.w, 0, 2, 0.25);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "server 0 gets a quarter of its CPU");
  computing(&f.w, 0, 2, 1.0);
  for (int k = 0; k < 50; k++) /* server 2 runs the chain five times faster */
    lt__pace_service(&f.w.srv[2].pace, &f.q.stage, 2 * COST_US / 5, COST_US / 10);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "server 2 is faster");
  teardown(&f.w);
}

/* The servers' calibrated speeds judge a stand-in, not the chain's costs there, which
 * follow the inputs each happened to run (a dc's steps differ in size by orders of
 * magnitude): server 2 ran the chain five times faster, on smaller inputs, but is no faster
 * than server 0, and a straggler there that computes gets no copy; a server that is five
 * times faster does. */
Test(backup, calibrated_speeds_judge_a_stand_in_not_the_inputs_each_ran) {
  fixture_t f;
  int64_t t = straggling(&f, 1.0);
  for (int k = 0; k < 50; k++)
    lt__pace_service(&f.w.srv[2].pace, &f.q.stage, 2 * COST_US / 5, COST_US / 10);
  computing(&f.w, 0, 2, 1.0);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), -1, "as fast as server 0");
  f.w.srv[2].conn.speed = 5.0;
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "five times faster");
  teardown(&f.w);
}

/* On a machine loaded for all, a straggler that gets half the CPU its kernel would use is no
 * slower than it would be on an idle server whose instructions also got half of it when they
 * ran: no copy; on one whose instructions got all of it, a copy. */
Test(backup, a_machine_loaded_for_all_is_no_faster_elsewhere) {
  fixture_t f;
  int64_t t = straggling(&f, 1.0);
  computing(&f.w, 2, 1, 0.5); /* server 2's instructions got half a core when it ran them */
  computing(&f.w, 2, 0, 0.0); /* and it is idle now */
  computing(&f.w, 0, 2, 0.5);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), -1, "loaded alike");
  for (int k = 0; k < 20; k++) { /* server 2's instructions get a whole core */
    computing(&f.w, 2, 1, 1.0);
  }
  computing(&f.w, 2, 0, 0.0);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "server 2 runs undisturbed");
  teardown(&f.w);
}

/* An idle server whose kernels wait (a sleep, a call out) uses little CPU without being
 * slow: the little share its reports showed does not make it look slower than the
 * straggler's server, and, being five times faster, it gets the copy. */
Test(backup, a_server_whose_kernels_wait_is_not_slow) {
  fixture_t f;
  int64_t t = straggling(&f, 1.0);
  f.w.srv[2].conn.speed = 5.0;
  for (int k = 0; k < 20; k++) /* its kernels slept: 2 running, next to no CPU */
    computing(&f.w, 2, 2, 0.01);
  computing(&f.w, 2, 0, 0.0);
  computing(&f.w, 0, 2, 1.0);
  cr_assert_eq(lt__sched_backup_target(&f.w.s, f.b, t), 2, "five times faster");
  teardown(&f.w);
}

/* An original whose input was gone where it was to be read (LT_ENOENT: released, or its
 * holder restarted) failed for no fault of its kernel: like a loss, it leaves its copy to
 * carry on rather than deciding the task. */
Test(backup, an_input_gone_leaves_the_copy_to_carry_on) {
  fixture_t f;
  start(&f, 1000);
  with_policies(&f);
  lt__sched_take_off(&f.w.s, f.a);
  lt_instr_rec_t *copy = &f.q.r[3];
  copy->backup = 1;
  copy->twin = f.b;
  f.b->twin = copy;
  send(&f.w, &f.q, 3, 1, 1300);
  lt_completion_t gone = {.seq = f.b->seq, .status = LT_ENOENT};
  cr_assert_eq(end(&f, f.b, LT_END_FAILED, &gone), LT_SETTLE_DROP, "without effect: its copy runs");
  cr_assert_null(copy->twin);
  cr_assert_eq(copy->backup, 0, "the copy is the instruction now");
  cr_assert_eq(stat(&f, "backups_won"), 1, "the copy won");
  teardown(&f.w);
}
