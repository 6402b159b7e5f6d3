/* task.h: the server side of an instruction, from EXECUTE to its completion. A task holds
 * its inputs (inline payload frames kept alive zero copy, store values by reference), parks
 * in the store while a REF input is pending (using no thread), runs on the executor, and
 * finishes into its session's `done` batch and the store. Loop thread only. */
#ifndef LT_TASK_H
#define LT_TASK_H

#include "server.h"
#include "session.h"

/* lt__task_execute handles an EXECUTE of session `s`: `payloads` are the message's payload
 * frames (msg->nframes of them, borrowed: a task copies the ones it needs). Every
 * instruction is either accepted (parked or queued) or answered with a completion error.
 * The message's max_active becomes the session's thread window first: the executor runs
 * at most that many of its tasks at once; the others wait in order, holding no thread. */
void lt__task_execute(lt_server_t *srv, lt_session_t *s, const lt_msg_t *msg, zmq_msg_t *payloads);

/* lt__task_cancel drops the session's queued or parked instructions with these
 * sequence numbers, answering each with LT_ECANCELED; running and unknown ones are left
 * alone. A pack is named by its instruction seq and canceled whole (every member answered);
 * its other members' seqs are unknown here. */
void lt__task_cancel(lt_server_t *srv, lt_session_t *s, const uint64_t *seqs, uint32_t n);

/* lt__task_deadline checks the running job `run` against its instruction's deadline at
 * `now_us` (a pack: its member running, against the deadline of each member's own run):
 * past it, the instruction fails with LT_ETIMEDOUT now (the job stays on its worker; its
 * late result is dropped; a pack's earlier members keep their results and its later ones,
 * never run, fail with LT_ECANCELED). Returns true when the job overran by more than
 * `recycle_ms` as well: the process should be recycled. */
bool lt__task_deadline(lt_server_t *srv, const lt_job_running_t *run, uint64_t now_us,
                       uint64_t recycle_ms);

/* lt__task_on_done is the executor's done callback (data = the server). */
void lt__task_on_done(lt_executor_t *ex, lt_job_t *done, void *data);

/* lt__task_run_failq finishes every task queued for failure. Part of the server's settle. */
void lt__task_run_failq(lt_server_t *srv);

/* lt__task_drop_session detaches every task of `s`: parked, waiting and queued ones are
 * freed and their expected outputs released, running and failing ones are orphaned (their
 * results are discarded when they come back). */
void lt__task_drop_session(lt_server_t *srv, lt_session_t *s);

/* lt__task_shutdown queues an LT_ESHUTDOWN failure for every parked, waiting or queued task of
 * every session; running ones finish normally. */
void lt__task_shutdown(lt_server_t *srv);

#endif
