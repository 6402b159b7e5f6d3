/* sched_records.h: the calls of instr.c, the owner of instruction records (DESIGN.md 7a,
 * "records"): making, copying and freeing a record's inputs, the fireable queue, the legal
 * moves between a record's states (lt__rec_to), putting a record on a server and taking it
 * off (the only code that counts a server's in-flight, window and backlog), and how a
 * record's time on a server ends (lt__rec_settle). Cancelling one is failures.c's
 * (sched_failures.h). The core's files only: a policy sees
 * records through policy_view.h and never moves one. Dispatcher thread only. */
#ifndef LT_SCHED_RECORDS_H
#define LT_SCHED_RECORDS_H

#include "policy_view.h"

/* lt__rec_to moves r to state `to`, which must be a legal move from its state (an illegal
 * one is logged and asserted); queued, r names no server. */
void lt__rec_to(lt_instr_rec_t *r, lt_ir_state_t to);
/* lt__rec_new makes a queued record of job j under a fresh instruction id, counted live in
 * j; NULL without memory. Caller owns the record (lt__sched_rec_done frees it). */
lt_instr_rec_t *lt__rec_new(lt_sched_t *s, lt_job_rec_t *j);
/* lt__rec_copy makes a queued copy of r (the same work under an instruction id of its own,
 * marked `backup`); NULL without memory. */
lt_instr_rec_t *lt__rec_copy(lt_sched_t *s, const lt_instr_rec_t *r);
/* lt__rec_ins_alloc returns room for n input tokens of r: inside r when they fit, else
 * calloc'd; lt__rec_ins_free frees r->ins (either way) and clears it. */
lt_token_t *lt__rec_ins_alloc(lt_instr_rec_t *r, uint32_t n);
void lt__rec_ins_free(lt_instr_rec_t *r);
/* lt__sched_push_fireable queues r for placement, at the front or the back. */
void lt__sched_push_fireable(lt_sched_t *s, lt_instr_rec_t *r, int front);
lt_instr_rec_t *lt__sched_pop_fireable(lt_sched_t *s);
/* lt__sched_put_on records that queued r went out to server idx: in s->inflight, counted
 * in its in-flight count, window and backlog. */
void lt__sched_put_on(lt_sched_t *s, lt_instr_rec_t *r, int idx);
/* lt__sched_take_off takes r, out, off its server: the reverse of lt__sched_put_on. r keeps
 * its state and conn until it is queued again or freed. The server's next instruction in
 * line is seen to run from now on (lt__sched_mark_running). */
void lt__sched_take_off(lt_sched_t *s, lt_instr_rec_t *r);
/* lt__sched_mark_running notes, on server idx, that the instructions it now runs run since
 * now_ms at the latest. A server runs a session's instructions in the order they arrived, as
 * many at once as it has worker threads (under throttle, as its window allows), so the first
 * that many of its out list run; one that was waiting began when a completion or a larger
 * window freed a thread for it, no later than when the client saw that. */
void lt__sched_mark_running(lt_sched_t *s, size_t idx, int64_t now_ms);

/* How a record's time on a server ends (lt__rec_settle). */
typedef enum lt_settle {
  LT_SETTLE_APPLY = 0, /* the caller applies the outcome for the reason given */
  LT_SETTLE_REQUEUED,  /* its migration was confirmed: it is queued for placement again */
  LT_SETTLE_DROP       /* its twin won or carries on: it ends without effect */
} lt_settle_t;
/* lt__rec_settle ends r's time on its server (if it is out) for `why` (cp: its completion,
 * or NULL): takes it off, tells the policies, settles its migration and its copy. Called
 * only by lt__sched_end (jobs.c), the one place every end goes through. */
lt_settle_t lt__rec_settle(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why,
                           const lt_completion_t *cp);

#endif
