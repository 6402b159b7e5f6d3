/* sched_jobs.h: the calls of the owners of tasks while they run: jobs.c (a task as a graph
 * instance, its fired records, completions, restarts, results, and lt__sched_end, the one
 * function every end of a record goes through), fetch.c (results fetched from the server
 * holding them) and done_check.c (whether a server's completions match what was sent there).
 * What a loss costs a task is failures.c's (sched_failures.h). The core's files only.
 * Dispatcher thread only. */
#ifndef LT_SCHED_JOBS_H
#define LT_SCHED_JOBS_H

#include "policy_view.h"

/* lt__status_lost tells whether a completion's status says that a value the instruction
 * needed is gone: lost with a server (LT_ELOST), or not found where it was to be (LT_ENOENT:
 * its holder restarted, or dropped it). Either way the task starts again from its input
 * while retries remain, as for a server loss: no fault of its own kernels. */
static inline int lt__status_lost(int status) {
  return status == LT_ELOST || status == LT_ENOENT;
}

/* lt__sched_on_fire queues a fired instruction at the back; lt__sched_on_fire_chained, for
 * a successor fired by its predecessor's dispatch, at the front, placed as a successor. */
void lt__sched_on_fire(void *ud, lt_instance_t *inst, lt_frame_t *frame);
void lt__sched_on_fire_chained(void *ud, lt_instance_t *inst, lt_frame_t *frame);
void lt__sched_take_intake(lt_sched_t *s);
/* lt__sched_pools_clear frees the records and jobs kept for reuse. */
void lt__sched_pools_clear(lt_sched_t *s);
void lt__sched_rec_done(lt_sched_t *s, lt_instr_rec_t *r);
void lt__sched_job_fail(lt_sched_t *s, lt_job_rec_t *j, int err, const char *msg);
void lt__sched_on_completion(lt_sched_t *s, size_t idx, const lt_completion_t *cp,
                             const lt_msg_t *m);

void lt__sched_restart(lt_sched_t *s, lt_job_rec_t *j, const char *why);
/* lt__sched_rerun runs task j again from its input, not charged to max_retries, once a task
 * (a straggling inner stage, backup.c): the old run's records are stale from now on. 1 when
 * it did; 0 when the task is done, kept no input, or ran again before. */
int lt__sched_rerun(lt_sched_t *s, lt_job_rec_t *j, const char *why);
/* lt__sched_restart_lost is lt__sched_restart for a value lost with the session of dead entry
 * `lost` (-1: not known): the restart is held until that server's next welcome says whether
 * the session ended in a crash, and refunded if it did (failures.c). */
void lt__sched_restart_lost(lt_sched_t *s, lt_job_rec_t *j, long lost, const char *why);

/* lt__sched_job_result finishes job `j` with value `v` (a reference is taken; NULL: out of
 * memory). */
void lt__sched_job_result(lt_sched_t *s, lt_job_rec_t *j, lt_value_t *v);

/* lt__sched_job_settle frees job `j` when it is finished and no instruction of it is left
 * (for a job that finished outside an instruction's completion, e.g. by a fetch); j must
 * not be used after. */
void lt__sched_job_settle(lt_sched_t *s, lt_job_rec_t *j);

/* lt__sched_end ends record r for `why` and applies the outcome to its task: a result or a
 * failure (cp and m: the completion and its message), placed again or its task recomputed
 * (lost, not run, taken back; `endpoint` names the server), or its task failed with `err`
 * and `msg` (cancelled). r is freed or queued again: the caller must not use it after. */
void lt__sched_end(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp,
                   const lt_msg_t *m, int err, const char *msg);

/* fetch.c: fetching a result that a task ended on while it sat on a server.
 * lt__sched_fetch_results asks the holders of the results due for them (a failure to ask
 * recomputes or fails the task); lt__sched_on_value applies a VALUE from server `idx`;
 * lt__sched_fetches_lost recomputes the tasks whose result was on dead server `idx`;
 * lt__sched_fetches_free drops what is still asked at the end. */
void lt__sched_fetch_results(lt_sched_t *s);
void lt__sched_on_value(lt_sched_t *s, size_t idx, const lt_msg_t *m);
void lt__sched_fetches_lost(lt_sched_t *s, size_t idx);
void lt__sched_fetches_free(lt_sched_t *s);
void lt__sched_fail_all(lt_sched_t *s, int err, const char *msg);
void lt__sched_deliver(lt_sched_t *s);

/* done_check.c: lt__done_check tells whether the completions of DONE `m` from server idx
 * can be reports of what the client sent there (1), or are a protocol error of that server
 * (0, the reason written to why): a packed one naming a member twice, an id the client never
 * made, or another count or order than the pack still out there had; a single one for a
 * member of a pack still out there. */
int lt__done_check(const lt_sched_t *s, size_t idx, const lt_msg_t *m, char *why, size_t len);

#endif
