/* sched_loop.h: the calls of the loop and its phases: scheduler.c (a turn in phases: intake,
 * messages, reap, requests, dispatch, ticks), dispatch.c (placing and sending records),
 * binding.c (how a record's inputs and outputs are bound), requests.c (applying what the
 * policies asked), policy.c's core side (running the policies' hooks) and sched_stats.c (the
 * stats snapshot). The core's files only. Dispatcher thread only, except
 * lt__sched_stats_json. */
#ifndef LT_SCHED_LOOP_H
#define LT_SCHED_LOOP_H

#include "policy_view.h"

/* scheduler.c: the loop, in turns (the real thread waits in zmq_poll between them; the
 * simulator, tests/sim, delivers a virtual instant's events instead). */
/* What the wait before a turn saw: the intake woken, and the poll items of the npolled
 * servers then (wake fd, then each server's socket, its monitor, its process's stdout); no
 * items: every server is read and its monitor looked at. */
typedef struct lt_turn_in {
  int woken;
  const zmq_pollitem_t *items;
  size_t npolled;
} lt_turn_in_t;
/* lt__sched_start greets the first hosts and starts the clock of the ticks. */
void lt__sched_start(lt_sched_t *s);
/* lt__sched_turn runs one turn in its phases; 1 when the evaluator asked it to stop. */
int lt__sched_turn(lt_sched_t *s, const lt_turn_in_t *in);
/* lt__sched_stop fails what is left, closes every session and publishes the stats. */
void lt__sched_stop(lt_sched_t *s);

/* dispatch.c: the dispatch phase, placing queued records and sending them in batches. */
void lt__sched_dispatch(lt_sched_t *s);
/* lt__sched_dispatch_to sends r to server idx at once; LT_EAGAIN when it cannot go there now,
 * LT_ESTATE for a backup copy that cannot go at all (an input lost, or over the frame limit
 * of idx): the record is then still the caller's, and its task untouched. */
int lt__sched_dispatch_to(lt_sched_t *s, lt_instr_rec_t *r, int idx);

/* How an instruction's inputs and outputs are bound (the `lazy` option): by value through
 * the client, or by reference on the servers. */
typedef struct lt_binding {
  int moves_on;        /* its frame goes on at dispatch, with a reference to its output */
  int returns;         /* its output comes back to the client (LT_INSTR_RETURN) */
  int release_inputs;  /* its server drops its inputs once run (LT_INSTR_RELEASE_INPUTS) */
  int keeps_inputs;    /* a copy that would release them but must not: its twin may still
                          read them there; the client releases them if the copy wins */
  int outputs_stay;    /* outputs stay on their server: a value that came back keeps its
                          holder, and outputs nobody will read are released there */
  uint64_t inline_max; /* stored outputs up to this size come back too (hello) */
} lt_binding_t;
/* lt__binding returns the binding of r now (it changes once r's frame moved on); r's frame
 * is read, so r must not be stale. NULL gives the session-wide fields alone (outputs_stay,
 * inline_max): completions use that, since their record may be stale. */
lt_binding_t lt__binding(const lt_sched_t *s, const lt_instr_rec_t *r);

/* requests.c: the loop's phase that applies what the policies asked. */
void lt__sched_apply_requests(lt_sched_t *s);

/* policy.c: the core's side of the policies' hook table. */
int lt__policies_init(lt_sched_t *s);
void lt__policies_free(lt_sched_t *s);
/* lt__policies_server_new resets entry idx's limits and makes each policy's blob for it;
 * lt__policies_server_free frees them. */
int lt__policies_server_new(lt_sched_t *s, size_t idx);
void lt__policies_server_free(lt_sched_t *s, size_t idx);
void lt__policies_server_ready(lt_sched_t *s, size_t idx, const lt_msg_t *welcome);
void lt__policies_server_lost(lt_sched_t *s, size_t idx);
void lt__policies_dispatch(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx);
void lt__policies_end(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                      const lt_completion_t *cp);
void lt__policies_idle(lt_sched_t *s, int64_t now_ms);
void lt__policies_tick(lt_sched_t *s, int64_t now_ms);
/* lt__policies_stats fills out[] (max entries) with the policies' stats of server idx, or
 * in all (SIZE_MAX); returns how many. */
size_t lt__policies_stats(const lt_sched_t *s, size_t idx, lt_stat_t *out, size_t max);
/* lt__policies_applied tells the policy that filed request q that the loop applied it. */
void lt__policies_applied(lt_sched_t *s, const lt_req_t *q);
/* lt__policies_stat returns the sum of the policies' stats named `key` of server idx, or in
 * all (SIZE_MAX): 0 when no enabled policy publishes it. */
uint64_t lt__policies_stat(const lt_sched_t *s, size_t idx, const char *key);
/* lt__stat_sum returns the sum of the n stats st[] named `key`. */
uint64_t lt__stat_sum(const lt_stat_t *st, size_t n, const char *key);

/* sched_stats.c: the stats snapshot. */
void lt__stats_init(lt_stats_snap_t *st);
void lt__stats_free(lt_stats_snap_t *st);
/* lt__stats_publish copies the counters and servers of s into s->stats for the readers. */
void lt__stats_publish(lt_sched_t *s);
/* lt__sched_stats_json appends the latest snapshot to the open JSON object (the backend's
 * stats_json). Any thread. */
void lt__sched_stats_json(void *self, lt_json_t *j);

#endif
