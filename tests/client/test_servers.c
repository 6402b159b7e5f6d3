/* test_servers.c: the server table's answers (client/servers.c) and a record's settle
 * (client/instr.c) on a hand-built dispatcher state: three ready servers, no sockets. A
 * release of another session's id is refused; a policy's limit lowers what a server takes
 * (0: nothing, so it is neither taking work nor idle); a server marked dead keeps its first
 * reason and takes nothing until it is reaped; a record that goes out and is settled as lost
 * leaves every count as it was; instructions a server reports parked for inputs leave room
 * for as many more. */
#include <criterion/criterion.h>

#include "exec.h"
#include "world.h"

#define CLIENT 0x1234

Test(servers, a_release_of_another_sessions_id_is_refused) {
  world_t w;
  world_init(&w);
  w.s.client_id = CLIENT;
  lt__server_release(&w.s, 1, (lt_oid_t){CLIENT + 1, 7});
  cr_assert_eq(w.srv[1].relq.n, 0, "an id of another session is never queued");
  lt__server_release(&w.s, 1, (lt_oid_t){CLIENT, 7});
  cr_assert_eq(w.srv[1].relq.n, 1);
  cr_assert_eq(w.srv[1].relq.ids[0].seq, 7);
  lt__server_release(&w.s, -1, (lt_oid_t){CLIENT, 8}); /* no holder: nothing */
  lt__server_release(&w.s, 5, (lt_oid_t){CLIENT, 8});  /* no such server: nothing */
  cr_assert_eq(w.srv[1].relq.n, 1);
  free(w.srv[1].relq.ids);
  world_fini(&w);
}

Test(servers, instructions_parked_for_inputs_leave_room) {
  world_t w;
  world_init(&w);
  w.srv[0].pace.cap = 4;
  w.srv[0].admitted = 4;
  cr_assert(!lt__server_has_room(&w.s, 0), "full");
  lt_load_t load = {.parked = 3};
  lt__pace_load(&w.srv[0].pace, &load);
  cr_assert(lt__server_has_room(&w.s, 0), "3 of the 4 hold no thread");
  w.srv[0].admitted = 7;
  cr_assert(!lt__server_has_room(&w.s, 0), "4 that may run, and 3 parked");
  load.parked = 9; /* other sessions' too: never below none of ours */
  lt__pace_load(&w.srv[0].pace, &load);
  cr_assert(lt__server_has_room(&w.s, 0));
  load.parked = 0;
  lt__pace_load(&w.srv[0].pace, &load);
  cr_assert(!lt__server_has_room(&w.s, 0));
  world_fini(&w);
}

Test(servers, a_policy_limit_lowers_what_a_server_takes) {
  world_t w;
  world_init(&w);
  w.srv[0].pace.cap = 8;
  cr_assert_eq(lt__server_cap(&w.s, 0), 8);
  cr_assert(lt__server_idle(&w.s, 0));
  lt__server_limit(&w.s, 0, 2, 1);
  cr_assert_eq(lt__server_cap(&w.s, 0), 1);
  cr_assert(lt__server_takes(&w.s, 0));
  cr_assert_not(lt__server_idle(&w.s, 0), "a limited server is no spare for copies");
  lt__server_limit(&w.s, 0, 3, 0);
  cr_assert_not(lt__server_takes(&w.s, 0), "a limit of 0 takes no work");
  cr_assert(lt__server_alive(&w.s, 0), "but it is alive: its work finishes");
  lt__server_limit(&w.s, 0, 3, LT_NO_LIMIT);
  lt__server_limit(&w.s, 0, 2, LT_NO_LIMIT);
  cr_assert_eq(lt__server_cap(&w.s, 0), 8);
  cr_assert(lt__server_idle(&w.s, 0));
  world_fini(&w);
}

Test(servers, a_server_marked_dead_takes_nothing_until_reaped) {
  world_t w;
  world_init(&w);
  w.srv[2].pace.cap = 4;
  lt__server_mark_dead(&w.s, 2, "connection lost", 0);
  lt__server_mark_dead(&w.s, 2, "missed 3 heartbeats", 1);
  cr_assert(lt__server_gone(&w.s, 2));
  cr_assert_not(lt__server_takes(&w.s, 2));
  cr_assert_not(lt__server_alive(&w.s, 2));
  cr_assert_str_eq(w.srv[2].why, "connection lost", "the first reason stays");
  cr_assert_eq(w.srv[2].final, 1, "not to be greeted again, once any mark says so");
  cr_assert_eq(w.srv[2].conn.state, LT_CONN_READY, "the session itself ends at the reap");
  world_fini(&w);
}

Test(servers, a_record_settled_as_lost_leaves_every_count_as_it_was) {
  world_t w;
  world_init(&w);
  lt_job_rec_t job = {0};
  lt_tstage_t stage = {0};
  lt_instr_rec_t r = {.seq = LT_MAX_PARTS + 1,
                      .job = &job,
                      .op = LT_OP_SEQ,
                      .stages = &stage,
                      .nstages = 1,
                      .state = LT_IR_QUEUED,
                      .conn = -1};
  lt__pace_init(&w.srv[1].pace, 4, &w.opts, 0);
  lt__sched_put_on(&w.s, &r, 1);
  cr_assert_eq(w.srv[1].admitted, 1);
  cr_assert_eq(w.srv[1].conn.inflight, 1);
  cr_assert_not(lt__server_idle(&w.s, 1));
  cr_assert_eq(lt__rec_settle(&w.s, &r, LT_END_LOST, NULL), LT_SETTLE_APPLY);
  cr_assert_eq(w.srv[1].admitted, 0);
  cr_assert_eq(w.srv[1].conn.inflight, 0);
  cr_assert_null(w.s.inflight);
  cr_assert_null(w.srv[1].slot.out);
  cr_assert_eq(r.conn, 1, "it keeps the server it was lost on until queued again");
  cr_assert(w.s.freed, "the on_idle hooks run this turn");
  cr_assert_gt(w.srv[1].slot.idle_ms, 0, "it runs nothing of ours since now");
  world_fini(&w);
}
