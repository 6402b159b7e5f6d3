/* policy_view.h: what a policy (policy.h, the registry in policy.c) and a placement
 * (placement.h) may touch of the dispatcher. They read its state (sched_state.h), through a
 * const lt_sched_t; they ask the server table's answers, the pacing's figures and a record's
 * predicates declared here, none of which changes anything; and they act only by filing a
 * request (lt__policy_ask) that the loop applies between its phases (requests.c), after
 * checking that it still makes sense. The calls that move a record, end it, or change a
 * server, a job or a session are declared only in the core's headers (sched_records.h,
 * sched_jobs.h, sched_servers.h, sched_links.h, sched_loop.h), which a policy does not
 * include: a policy that calls one does not compile (tests/layers checks it). Dispatcher
 * thread only. */
#ifndef LT_POLICY_VIEW_H
#define LT_POLICY_VIEW_H

#include "policy.h"
#include "sched_state.h"

#define LT_LINK_BPUS 100.0 /* bytes per µs assumed for moving a value (100 MB/s) */

/* ---- the server table's answers (servers.c) ------------------------------------------------ */

/* lt__server_alive: its session answers (ready or stopping) and it is not marked dead. */
int lt__server_alive(const lt_sched_t *s, size_t i);
/* lt__server_takes: it may be given new work (ready, not marked, no policy limit of 0). */
int lt__server_takes(const lt_sched_t *s, size_t i);
/* lt__servers_takers counts the servers that take work, and, when `greeting`, those whose
 * session is being greeted too (they may take work soon: a server restarting, or one that
 * lost its link). */
int lt__servers_takers(const lt_sched_t *s, int greeting);
/* lt__server_held: it would take work but for a policy's limit of 0 (a cool-down, a late
 * server's): it may take work again soon. */
int lt__server_held(const lt_sched_t *s, size_t i);
/* lt__server_cap: the instructions it may have admitted at once: its pacing's cap, lowered
 * by the policies' limits. */
uint32_t lt__server_cap(const lt_sched_t *s, size_t i);
/* lt__server_has_room: it may be given one more instruction now. */
int lt__server_has_room(const lt_sched_t *s, size_t i);
/* lt__server_left_us estimates how long server i needs to finish what it has admitted, at
 * `now_ms`: its backlog (pace.c) less what the instructions running there have done. A
 * running one advances at 1/n of the server when n run at once; it is counted at most 90 %
 * done, since nothing says it is nearly over. */
double lt__server_left_us(const lt_sched_t *s, size_t i, int64_t now_ms);
/* lt__server_idle: it takes work, no policy limits it, and nothing of ours is there. */
int lt__server_idle(const lt_sched_t *s, size_t i);
/* lt__server_frame_need returns the largest frame server i (-1: any) would receive for
 * these inputs: values the client sends, and values held elsewhere that it would fetch. */
uint64_t lt__server_frame_need(const lt_sched_t *s, const lt_fire_t *fi, int i);
/* lt__server_fits: it takes frames as large as these inputs need. */
int lt__server_fits(const lt_sched_t *s, size_t i, const lt_fire_t *fi);
/* lt__server_least_frame: the smallest frame limit among the servers that take work
 * (UINT64_MAX: none has one). */
uint64_t lt__server_least_frame(const lt_sched_t *s);
/* lt__server_gone tells whether server i is dead or marked dead (its session ends at the
 * loop's next reap). */
int lt__server_gone(const lt_sched_t *s, size_t i);

/* ---- holders (entries.c) ------------------------------------------------------------------ */

/* A holder id (lt_token_t.at) names one session: its entry's index + 1 in the low 32 bits,
 * the session's id (lt_server_t.sid, never 0) in the high 32. An entry reclaimed and reused
 * has another sid, so an id of the ended session resolves to no entry: O(1), no lookup. */

/* lt__holder_id returns the holder id of entry idx's session. */
static inline uint64_t lt__holder_id(const lt_sched_t *s, size_t idx) {
  return (uint64_t)s->srv[idx].sid << 32 | (uint64_t)(idx + 1);
}

/* lt__holder returns the entry of the session holding t's value, or -1 when none does: no
 * holder, or a session whose entry was reclaimed (a reference to a value lost with it; the
 * entry's index may name a later session now). An entry it returns may be dead. */
static inline int32_t lt__holder(const lt_sched_t *s, const lt_token_t *t) {
  uint64_t at = lt__token_at(t);
  uint32_t i = (uint32_t)at;
  if (i == 0 || i > s->nsrv || s->srv[i - 1].sid != (uint32_t)(at >> 32)) return -1;
  return (int32_t)(i - 1);
}

/* lt__holder_set makes entry idx's session t's holder (-1: none). */
static inline void lt__holder_set(const lt_sched_t *s, lt_token_t *t, int32_t idx) {
  lt__token_set_at(t, idx < 0 ? 0 : lt__holder_id(s, (size_t)idx));
}

/* ---- the pacing's figures (pace.c) ---------------------------------------------------------- */

/* lt__pace_cost_us estimates server i's time per instruction of chain `key` when busy. */
double lt__pace_cost_us(const lt_sched_t *s, size_t i, const void *key);
/* lt__pace_backlog_us estimates how long server i needs for what it has admitted. */
double lt__pace_backlog_us(const lt_sched_t *s, size_t i);
/* lt__pace_usual_share is the share of the CPU the server's instructions usually get there
 * (the EWMA of its reports), 1 before any report of a running instruction. */
double lt__pace_usual_share(const lt_pace_t *p);
/* lt__pace_noise_us is the longest delay between server and client beyond the work taken
 * lately (lt__pace_noise), halving every LT_NOISE_HALF_MS: a pause of a loaded machine (the
 * client's or the server's threads waiting for a CPU) as this run measured it. */
double lt__pace_noise_us(const lt_pace_t *p, int64_t now_ms);
/* lt__pace_known_us returns the shortest service time chain `key` has shown on any server,
 * or 0 when it never completed. */
double lt__pace_known_us(const lt_sched_t *s, const void *key);
/* lt__pace_service_us returns server i's service time of chain `key`, or when it never ran
 * there the shortest it has shown on any server (0: never completed). */
double lt__pace_service_us(const lt_sched_t *s, size_t i, const void *key);
/* lt__pace_chains points *keys at the chains measured on some server (looked up once a
 * millisecond; without the memo, none) and returns how many. */
size_t lt__pace_chains(const lt_sched_t *s, const void ***keys);
/* lt__pace_parallel returns how many instructions run at once there: window and workers. */
double lt__pace_parallel(const lt_pace_t *p);

/* ---- a record's predicates (instr.c) -------------------------------------------------------- */

/* lt__rec_stale tells whether r belongs to an older generation of its task's instance (it
 * was recomputed) or its task is over: such a record touches no frame. */
int lt__rec_stale(const lt_instr_rec_t *r);
/* lt__rec_portable tells whether r may run on another server than the one it was sent to,
 * there and then: alone (no twin), its task's current generation, every input held by the
 * client, and its output not named to successors on its server (a farm's task, a last
 * stage). Migration and copies of stragglers ask this. */
int lt__rec_portable(const lt_instr_rec_t *r);
/* lt__rec_copyable tells whether r may get a copy on another server (backup.c): out alone,
 * its output not named to successors yet (or the task's result), and every input either
 * held by the client or made already and held by a live server, which the copy fetches
 * from peer to peer. */
int lt__rec_copyable(const lt_sched_t *s, const lt_instr_rec_t *r);
/* lt__end_status returns the status an end of a record carries: its completion's, else
 * LT_ECANCELED for one its server says it never ran, else LT_ELOST. What a migration's
 * cancel means follows from it: ECANCELED only when the server says so. */
int lt__end_status(lt_end_t why, const lt_completion_t *cp);
/* lt__end_decides tells whether r's end for `why` settles its copies: a result, or a failure
 * of the kernel itself. A copy that was lost, never ran, or missed a value lost elsewhere
 * leaves its twin to carry on; a copy that failed never decides: it may have missed an input
 * its twin, the last reader, took (the twin fails the same way if the kernel does). */
int lt__end_decides(const lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp);
/* lt__end_migrates tells whether r's end for `why` completes its migration: its cancel was
 * on its way, the server confirms it never ran, and it has no copy out: it is placed again. */
int lt__end_migrates(const lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp);
/* lt__token_made tells whether input t exists already: the client holds it, or its producer
 * (output i of instruction seq is named seq + i) is no longer out. */
int lt__token_made(const lt_sched_t *s, const lt_token_t *t);

/* ---- the failure accounting's answers (failures.c) ----------------------------------------- */

/* lt__fail_would_fail tells whether one more charged loss of r (a take-back) fails its task
 * anyway: the rule jobs.c applies to every loss (lt__fail_loss_outcome), asked one try
 * ahead: r's tries would be spent, or r cannot run elsewhere and its task may not start
 * again from its input (restarts spent, or its input not kept). */
int lt__fail_would_fail(const lt_sched_t *s, const lt_instr_rec_t *r);

/* How the session before a server's new one ended, as its welcome tells (one verdict per
 * session: lt__fail_crash_verdict is a function of the welcome and the ended session's
 * losses, so every policy that asks, and the settle of what the session cost, get the same). */
typedef enum lt_crash_verdict {
  LT_CRASH_NONE = 0, /* no session before, or it did not end in a crash of its incarnation */
  LT_CRASH_FOREIGN,  /* a crash whose culprit is none of what we lost there (another client's,
                        or unknown): charged to nothing of ours, counted as no crash */
  LT_CRASH_OURS      /* a crash charged to what we lost there: the culprit the welcome names,
                        else every instruction of ours it lists as running */
} lt_crash_verdict_t;
/* lt__fail_crash_verdict returns the verdict on the session that entry idx's welcome w
 * follows (its predecessor's). */
lt_crash_verdict_t lt__fail_crash_verdict(const lt_sched_t *s, size_t idx, const lt_msg_t *w);
/* lt__fail_crash_next returns the next of the ended session's losses that its crash is
 * charged to, from *at on (start with *at = 0; it advances it), or NULL when there is none
 * left or the verdict is not LT_CRASH_OURS. Borrowed: valid until the loop's next apply
 * phase. */
const lt_loss_t *lt__fail_crash_next(const lt_sched_t *s, size_t idx, const lt_msg_t *w,
                                     uint32_t *at);

/* ---- backup.c's judgement, called by its unit test (tests/client/test_backup.c) -------------- */

/* lt__sched_backup_target returns the idle server that should run a copy of r at now_ms, or
 * -1 when r is no straggler (or may not be copied, or no idle server would finish sooner). */
int lt__sched_backup_target(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms);

/* ---- migrate.c's count, read by its unit test (tests/client/test_backup.c) ----------------- */

/* lt__migrate_cancels_out returns the migrations' cancels not answered yet (records in
 * LT_IR_MIGRATING), 0 when the policy is off. */
uint32_t lt__migrate_cancels_out(const lt_sched_t *s);

/* ---- a policy's requests and its state (policy.h) ------------------------------------------ */

/* lt__policy_ask queues request `req` of p for the loop's next apply phase (requests.c); without
 * memory it is dropped and logged. */
static inline void lt__policy_ask(lt_policy_t *p, const lt_req_t *req) {
  lt_req_queue_t *q = p->q;
  lt_req_t *r = LT_VEC_PUSH(q->reqs, q->n, q->cap);
  if (r == NULL) {
    lt__log(LT_LOG_WARN, "policy %s: a request dropped (out of memory)", p->ops->name);
    return;
  }
  *r = *req;
  r->policy = p->id;
}

/* lt__policy_server returns p's blob for server idx (borrowed: the core frees it with the
 * entry). */
static inline void *lt__policy_server(const lt_policy_t *p, size_t idx) {
  return p->s->srv[idx].blob[p->id];
}

#endif
