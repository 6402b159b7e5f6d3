/* test_entries.c: the server table's entries over their lives (client/entries.c) on a
 * hand-built dispatcher state: three ready servers, no sockets. A token names its holder's
 * session, not its entry: once the session's entry is reclaimed and reused, the token
 * resolves to no holder, never to the new session. An entry is reclaimed only when its
 * session ended, its server's next session was welcomed (its losses settled), nothing is out
 * there, and no task's current run began before the end; its policies' blobs are kept,
 * zeroed, and its successor no longer names it. */
#include <criterion/criterion.h>

#include "world.h"

/* end_session makes entry `old` a welcomed session that ended, its server greeted again in
 * entry `next` and welcomed there (losses settled: not a crash). */
static void end_session(world_t *w, size_t old, size_t next) {
  w->srv[old].conn.state = LT_CONN_DEAD;
  w->srv[old].slot.was_ready = 1;
  w->srv[old].slot.watch_fd = -1;
  w->srv[old].slot.predecessor = -1;
  lt__entry_ended(&w->s, old);
  w->srv[old].slot.successor = (long)next;
  w->srv[next].slot.predecessor = (long)old;
  w->srv[old].slot.crashed = -1;
}

Test(entries, a_token_of_an_ended_session_never_names_the_next_one) {
  world_t w;
  world_init(&w);
  lt_token_t held = {0};
  cr_assert_eq(lt__holder(&w.s, &held), -1, "zeroed memory names no holder");
  lt__holder_set(&w.s, &held, 1);
  cr_assert_eq(lt__holder(&w.s, &held), 1);
  end_session(&w, 1, 2);
  cr_assert_eq(lt__holder(&w.s, &held), 1, "an ended session's entry stays until reclaimed");
  cr_assert_eq(lt__entries_reclaim(&w.s), 1);
  cr_assert_eq(w.srv[1].sid, 0, "reclaimed: free");
  cr_assert_eq(lt__entries_used(&w.s), 2);
  cr_assert_eq(w.srv[2].slot.predecessor, -1, "its successor names it no more");
  cr_assert_eq(lt__holder(&w.s, &held), -1, "a reclaimed session holds nothing");
  /* The next session (of any server) takes the free entry. */
  cr_assert_eq(lt__entry_reuse(&w.s), 1);
  w.srv[1].sid = lt__entry_sid(&w.s);
  w.srv[1].conn.state = LT_CONN_READY;
  cr_assert_eq(lt__holder(&w.s, &held), -1, "the old session's token is not the new one's");
  lt_token_t fresh = {0};
  lt__holder_set(&w.s, &fresh, 1);
  cr_assert_eq(lt__holder(&w.s, &fresh), 1);
  cr_assert_neq(fresh.at, held.at);
  world_fini(&w);
}

Test(entries, an_entry_is_reclaimed_only_when_nothing_can_refer_to_it) {
  world_t w;
  world_init(&w);
  /* A run that held a value before the session ended may hold one of its values. */
  lt_job_rec_t j = {.num = 7, .epoch = w.s.ends};
  HASH_ADD(hh, w.s.jobs, num, sizeof j.num, &j);
  end_session(&w, 0, 2);
  w.srv[0].slot.crashed = 0; /* the successor has not said how it ended yet */
  j.epoch = w.s.ends;        /* its first value came after: only the losses hold it */
  cr_assert_eq(lt__entries_reclaim(&w.s), 0, "its losses are not settled");
  w.srv[0].slot.crashed = 1;
  j.epoch = w.s.ends - 1;
  cr_assert_eq(lt__entries_reclaim(&w.s), 0,
               "a run that held a value before its end still goes on");
  j.epoch = w.s.ends; /* it started again, its first value after the end */
  lt_instr_rec_t r = {.seq = 9};
  w.srv[0].slot.out = &r;
  cr_assert_eq(lt__entries_reclaim(&w.s), 0, "a record is still out there");
  w.srv[0].slot.out = NULL;
  w.srv[0].slot.successor = -1;
  cr_assert_eq(lt__entries_reclaim(&w.s), 0, "the last session of its server stays in the stats");
  w.srv[0].slot.successor = 2;
  cr_assert_eq(lt__entries_reclaim(&w.s), 1);
  cr_assert_eq(lt__entries_reclaim(&w.s), 0, "once");
  HASH_DEL(w.s.jobs, &j);
  world_fini(&w);
}

Test(entries, a_reclaimed_entry_keeps_its_policies_blobs_zeroed) {
  world_t w;
  world_init(&w);
  cr_assert_eq(world_policies(&w), LT_OK);
  size_t k = 0;
  while (k < w.s.npolicies && w.s.policies[k].ops->server_size == 0)
    k++;
  cr_assert_lt(k, w.s.npolicies, "some policy on by default keeps state per server");
  void *blob = w.srv[1].blob[k];
  memset(blob, 0xab, w.s.policies[k].ops->server_size);
  w.srv[1].limit[k] = 0;
  w.srv[1].conn.bytes_out = 100;
  end_session(&w, 1, 0);
  cr_assert_eq(lt__entries_reclaim(&w.s), 1);
  cr_assert_eq(w.srv[1].blob[k], blob, "kept for the next session");
  const unsigned char *b = blob;
  for (size_t i = 0; i < w.s.policies[k].ops->server_size; i++)
    cr_assert_eq(b[i], 0, "zeroed");
  cr_assert_eq(w.srv[1].limit[k], LT_NO_LIMIT);
  cr_assert_eq(w.s.gone_bytes_to, 100, "its traffic stays in the totals");
  world_fini(&w);
}
