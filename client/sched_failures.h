/* sched_failures.h: the calls of failures.c, the one owner of failure accounting: a try
 * charged when a record is lost, a task's restart counted, what a lost session costs held
 * until its server says how the session ended and then refunded or counted for good, what a
 * loss of a record does to its task, and the cancels sent to servers (the only code that
 * sends one). Its read-only answers (would a loss fail a task, how a session ended, what its
 * crash is charged to) are in policy_view.h, for the policies to ask. The core's files only.
 * Dispatcher thread only. */
#ifndef LT_SCHED_FAILURES_H
#define LT_SCHED_FAILURES_H

#include "policy_view.h"

/* ---- tries and restarts ----------------------------------------------------------------- */

/* lt__fail_charge_try counts a try of r toward max_retries: a dispatch of r lost to a
 * failed server (or taken back from one). */
void lt__fail_charge_try(lt_sched_t *s, lt_instr_rec_t *r);
/* lt__fail_restart counts a restart of j that a loss with the session of dead entry `lost`
 * caused (-1: none known): not at all when that session is known to have crashed, held
 * until it is known, counted otherwise. */
void lt__fail_restart(lt_sched_t *s, lt_job_rec_t *j, long lost);
/* lt__fail_restarts_counted returns j's restarts counted toward max_retries (the held ones
 * are not). */
uint32_t lt__fail_restarts_counted(const lt_job_rec_t *j);
/* lt__fail_restarts_spent tells whether j may not start again from its input: its counted
 * restarts reached max_retries. */
int lt__fail_restarts_spent(const lt_sched_t *s, const lt_job_rec_t *j);

/* What a loss of a record does to its task (lt__fail_loss_outcome). */
typedef enum lt_loss_outcome {
  LT_LOSS_AGAIN = 0,  /* the record is placed again */
  LT_LOSS_FAILS,      /* its tries are spent: its task fails */
  LT_LOSS_RECOMPUTES, /* it cannot run elsewhere: its task starts again from its input,
                         unless its restarts are spent (lt__fail_restarts_spent) */
} lt_loss_outcome_t;
/* lt__fail_loss_outcome tells what a loss of r does to its task once `more` tries (0 or 1)
 * more are charged: placed again while an input is still somewhere and its counted tries
 * are within max_retries; its task failed when they are not; recomputed when r cannot run
 * elsewhere (its frame went on and named its output to successors on its server, or an
 * input is gone with a server, or was on r's own server and is not kept there). The one
 * rule: jobs.c applies it, and lt__fail_would_fail answers with it. */
lt_loss_outcome_t lt__fail_loss_outcome(const lt_sched_t *s, const lt_instr_rec_t *r,
                                        uint32_t more);

/* ---- what is held, and refunded ---------------------------------------------------------- */

/* lt__fail_note_loss remembers that r was lost with the session of entry idx, and holds the
 * try its loss is about to be charged. */
void lt__fail_note_loss(lt_sched_t *s, size_t idx, lt_instr_rec_t *r);
/* lt__fail_dead_holder returns the dead entry that held one of the n tokens' values, or -1. */
long lt__fail_dead_holder(const lt_sched_t *s, const lt_token_t *ins, uint32_t n);
/* lt__fail_session_ended takes the welcome w of entry idx, a successor: the verdict on how
 * its predecessor's session ended (lt__fail_crash_verdict) settles what that session cost,
 * in the loop's next apply phase (after what the policies asked on hearing the welcome: a
 * crash policy's failing of a poison task goes first). Nothing for a first session. */
void lt__fail_session_ended(lt_sched_t *s, size_t idx, const lt_msg_t *w);
/* lt__fail_settle settles what entry idx's session cost: refunded when it `crashed`,
 * counted for good otherwise; lt__fail_forget drops the list. */
void lt__fail_settle(lt_sched_t *s, size_t idx, int crashed);
void lt__fail_forget(lt_sched_t *s, size_t idx);

/* ---- cancels ------------------------------------------------------------------------------ */

/* lt__fail_cancel asks r's server to drop r where it waits (answered LT_ECANCELED when it
 * never ran). Not a packed member: a server knows a pack only whole, so its cancel would
 * cancel the other tasks' members too; it runs, and its completion comes back stale or
 * stray. */
void lt__fail_cancel(lt_sched_t *s, const lt_instr_rec_t *r);
/* lt__fail_cancel_seqs asks server idx to drop the n instructions `seqs`, in one message
 * (those that started complete as usual); nothing when its session is over; a send that
 * fails marks the server dead. */
void lt__fail_cancel_seqs(lt_sched_t *s, size_t idx, uint64_t *seqs, uint32_t n);
/* lt__fail_cancel_server asks server idx to drop everything of ours it holds, packs too
 * (a server drained: the whole of it goes). */
void lt__fail_cancel_server(lt_sched_t *s, size_t idx);

#endif
