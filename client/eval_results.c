/* eval_results.c: where finished tasks go (eval_state.h). A result goes to its future, to
 * the stream (in submission order with ordered=on, in arrival order otherwise), or to the
 * stream's reduce, whose combines go back to the intake; journaled results are appended and
 * synced once a batch. lt_eval_next takes the next result of the stream, from a finished task
 * or read back from the journal, spinning briefly for a lone task's result before it sleeps.
 * It never takes a task in nor touches the hosts. Under ev->mu unless a call says otherwise;
 * the door's calls are the backend's thread. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "buf.h"
#include "eval_state.h"
#include "future.h"
#include "log.h"
#include "queue.h"

/* The task numbers of the stream reduce's combines, apart from the submission indices. */
#define LT_COMBINE_SEQ (UINT64_C(1) << 63)

void lt__task_free(lt_task_t *t) {
  if (t == NULL) return;
  lt__value_unref(t->input);
  lt__value_unref(t->input2);
  lt_buf_free(t->result);
  free(t);
}

/* journaled tells whether a result is worth keeping: a value, or a kernel's own failure
 * (the same input fails the same way); never a loss to the runtime or the network. */
static int journaled(const lt_buf_t *b) {
  int err = lt_buf_error(b);
  return err == LT_OK || err == LT_EKERNEL;
}

/* sync_journal makes the results journaled so far durable, once per batch of results; under
 * ev->mu. */
static void sync_journal(lt_eval_t *ev) {
  if (ev->journal != NULL && lt__journal_sync(ev->journal) != LT_OK)
    lt__log(LT_LOG_ERROR, "journal %s: cannot sync: %s", ev->opts.journal, strerror(errno));
}

/* lt__eval_wake_readers wakes the threads in lt_eval_next's wait, noting when (spin.h). */
void lt__eval_wake_readers(lt_eval_t *ev) {
  atomic_store(&ev->woke_at_us, lt__clock_us());
  pthread_cond_broadcast(&ev->cv_result);
}

/* stream_put puts result `b` (taken) of `t` (taken) in the result stream and wakes the
 * reader it is for; under ev->mu. In order, a task's place was reserved when it was
 * submitted (eval_intake.c), so only the stream reduce's one result may find no memory. */
static int stream_put(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  t->result = b;
  if (ev->opts.ordered) {
    if (lt__reorder_put(&ev->ordered, t->stream_seq, ev->next_out, t) != 0) return LT_ENOMEM;
  } else {
    LT_QUEUE_PUSH(ev->ready_head, ev->ready_tail, t, next);
  }
  t->arrival = ev->arrivals++;
  atomic_fetch_add(&ev->puts, 1);
  /* In order, only the result the reader waits for can wake it. */
  if (ev->result_waiters > 0 && (!ev->opts.ordered || t->stream_seq == ev->next_out)) {
    if (ev->delivering)
      ev->readers_to_wake = true;
    else
      lt__eval_wake_readers(ev);
  }
  return LT_OK;
}

/* lt__eval_sreduce_end puts the stream reduce's one result in the stream once it is made (or
 * `fail`, taken, a failure of the reduce itself, at once); under ev->mu. */
void lt__eval_sreduce_end(lt_eval_t *ev, lt_buf_t *fail) {
  lt_buf_t *b = fail != NULL ? fail : lt__sreduce_take(ev->sreduce, ev->closed);
  if (b == NULL || ev->sreduce_done) {
    lt_buf_free(b);
    return;
  }
  lt_task_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    lt_buf_free(b);
    lt__log(LT_LOG_ERROR, "out of memory delivering the stream's reduced result");
    return;
  }
  ev->sreduce_done = 1;
  uint64_t parts = lt__sreduce_parts(ev->sreduce);
  t->seq = parts > 0 ? parts - 1 : 0; /* it names the last task it reduced */
  lt__buf_set_task(b, t->seq);
  if (stream_put(ev, t, b) != LT_OK) { /* stream_seq 0: the stream's one result */
    lt__log(LT_LOG_ERROR, "out of memory delivering the stream's reduced result");
    lt__task_free(t);
  }
}

/* named_failure returns failure `b` (taken) with its task named in its message: the
 * stream's one result says which of its tasks failed. */
static lt_buf_t *named_failure(lt_buf_t *b, uint64_t seq) {
  char msg[1024]; /* a kernel's message is at most 512 bytes and a name */
  snprintf(msg, sizeof msg, "task %llu: %s", (unsigned long long)seq, b->errmsg);
  lt_buf_t *named = lt__buf_fail(b->err, msg);
  if (named == NULL) return b;
  lt_buf_free(b);
  return named;
}

/* sreduce_arrive gives result `b` (taken) of `t` (taken: a task of the program, or a
 * combine) to the stream reduce and queues the combines it can run now; under ev->mu. */
static void sreduce_arrive(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  lt_task_t *head = NULL, *tail = NULL;
  uint64_t seg = t->combine ? t->seg : t->seq;
  if (!t->combine && b != NULL && b->err != LT_OK) b = named_failure(b, t->seq);
  int rc = ev->sreduce_done ? LT_OK : lt__sreduce_arrive(ev->sreduce, seg, b, &head, &tail);
  if (ev->sreduce_done) lt_buf_free(b);
  lt__task_free(t);
  while (head != NULL) { /* combines go first: they hold the stream's result back */
    lt_task_t *c = head;
    head = c->next;
    c->next = NULL;
    c->seq = LT_COMBINE_SEQ | ev->combines_out++; /* a task number of its own */
    LT_QUEUE_PUSH_FRONT(ev->intake_head, ev->intake_tail, c, next);
  }
  if (tail != NULL) lt__eval_wake(ev);
  if (rc != LT_OK)
    lt__eval_sreduce_end(ev, lt__buf_fail(rc, "the stream's reduce failed: out of memory"));
  else
    lt__eval_sreduce_end(ev, NULL);
}

/* lt__eval_finish delivers the result `b` (taken) of `t` (taken) to its future, the stream or the
 * stream's reduce and wakes readers; under ev->mu. */
void lt__eval_finish(lt_eval_t *ev, lt_task_t *t, lt_buf_t *b) {
  if (t->combine) { /* a combine of the stream reduce, not a task of the user's */
    ev->combines++;
    sreduce_arrive(ev, t, b);
    return;
  }
  lt__buf_set_task(b, t->seq); /* every result, also a failure or a replay, names its task */
  ev->pending--;
  ev->completed++;
  if (b != NULL && lt_buf_error(b) != LT_OK) ev->failed++;
  if (ev->journal != NULL && !t->replayed && b != NULL && journaled(b) &&
      lt__journal_append(ev->journal, t->digest, b) != LT_OK)
    lt__log(LT_LOG_ERROR, "journal %s: cannot append: %s", ev->opts.journal, strerror(errno));
  /* Submitters blocked on a full window wake once it has drained by an eighth, not at
   * every result. */
  uint64_t low = ev->opts.max_pending - (ev->opts.max_pending + 7) / 8;
  if (ev->space_waiters > 0 && ev->pending <= low) pthread_cond_broadcast(&ev->cv_space);
  if (t->future != NULL) {
    lt__future_resolve(t->future, b);
    lt__task_free(t);
    return;
  }
  if (ev->sreduce != NULL) {
    sreduce_arrive(ev, t, b);
    return;
  }
  if (stream_put(ev, t, b) != LT_OK) { /* its place was reserved: a broken promise */
    lt__log(LT_LOG_ERROR, "task %llu: no place in the ordered stream", (unsigned long long)t->seq);
    lt__task_free(t);
  }
}

void lt__eval_door_deliver(lt_eval_t *ev, lt_task_t *done, int sync) {
  /* A finished task's inputs are not needed any more. They go before the lock is taken: the
   * free callback of an input given with lt_eval_submit_owned is the user's code. */
  for (lt_task_t *t = done; t != NULL; t = t->next) {
    lt__value_unref(t->input);
    lt__value_unref(t->input2);
    t->input = t->input2 = NULL;
  }
  pthread_mutex_lock(&ev->mu);
  ev->delivering = true;
  for (lt_task_t *t = done, *next; t != NULL; t = next) {
    next = t->next;
    t->next = NULL;
    lt_buf_t *b = t->result;
    t->result = NULL;
    lt__eval_finish(ev, t, b);
  }
  if (sync == LT_EVAL_SYNC_NOW || ev->intake_head == NULL) sync_journal(ev);
  bool wake = ev->readers_to_wake;
  /* Nothing else out: the backend may wait for the reader's next task without keeping any
   * other work waiting. */
  bool lone = wake && ev->pending == 0;
  ev->delivering = ev->readers_to_wake = false;
  pthread_mutex_unlock(&ev->mu);
  /* ev outlives its dispatcher, which calls this: the condition variable is still there. */
  if (wake) lt__eval_wake_readers(ev);
  ev->reader_woken = lone;
  if (lone) ev->lone_at_us = lt__clock_us();
}

int lt__eval_door_await_wake(lt_eval_t *ev) {
  if (!ev->reader_woken) return 0;
  ev->reader_woken = false;
  int64_t budget = lt__spin_budget(&ev->turn, atomic_load(&ev->wake_us));
  if (budget == 0) return 0;
  int64_t until = lt__clock_us() + budget;
  while (!atomic_load(&ev->wake_pending)) {
    if (lt__clock_us() >= until) return 0;
    sched_yield();
  }
  return 1;
}

/* take_result removes the next stream result: a task with its result into *t, or a
 * journaled one into *r; 0 if it is not there yet. Replayed results wait in ev->replays in
 * stream order, so the next one is there when it heads that queue. */
static int take_result(lt_eval_t *ev, lt_task_t **t, lt_replay_t *r) {
  *t = NULL;
  const lt_replay_t *head = lt__replayq_head(&ev->replays);
  if (ev->opts.ordered) {
    if (head != NULL && head->stream_seq == ev->next_out) {
      ev->next_out++;
      return lt__replayq_pop(&ev->replays, r);
    }
    *t = lt__reorder_take(&ev->ordered, ev->next_out);
    if (*t == NULL) return 0;
    ev->next_out++;
    return 1;
  }
  if (head != NULL && (ev->ready_head == NULL || head->arrival < ev->ready_head->arrival))
    return lt__replayq_pop(&ev->replays, r);
  LT_QUEUE_POP(ev->ready_head, ev->ready_tail, *t, next);
  return *t != NULL;
}

/* read_replay reads back the journaled result `r` for lt_eval_next, outside ev->mu: a record
 * that cannot be read any more is an LT_EIO failure of its task. */
static lt_buf_t *read_replay(lt_eval_t *ev, const lt_replay_t *r) {
  char err[512];
  lt_buf_t *b = NULL;
  int rc = lt__journal_read(ev->journal, r->off, &b, err, sizeof err);
  if (rc != LT_OK) b = lt__buf_fail(rc, rc == LT_EIO ? err : NULL);
  lt__buf_set_task(b, r->seq);
  return b;
}

/* spin_for_result looks for a new result in the stream without ev->mu, yielding the CPU
 * between looks, for the budget of a lone task's wait (spin.h), when the reader waits for a
 * lone task: a reader that sleeps must be woken. The caller looks at the stream again, under
 * ev->mu, whatever it saw: a result put or the input closed between its last look and the
 * lock woke nobody, since no reader was waiting then. Called and returns under ev->mu. */
static void spin_for_result(lt_eval_t *ev) {
  if (ev->pending != 1) return;
  int64_t budget = lt__spin_budget(&ev->lone, atomic_load(&ev->wake_us));
  if (budget == 0) return;
  unsigned seen = atomic_load(&ev->puts);
  pthread_mutex_unlock(&ev->mu);
  int64_t end = lt__clock_us() + budget;
  while (atomic_load(&ev->puts) == seen && lt__clock_us() < end)
    sched_yield();
  pthread_mutex_lock(&ev->mu);
}

/* woke_up notes how long a reader that slept from `slept_us` took to return after the
 * broadcast that woke it, if one came meanwhile (under ev->mu). */
static void woke_up(lt_eval_t *ev, int64_t slept_us) {
  int64_t at = atomic_load(&ev->woke_at_us);
  if (at < slept_us) return;
  atomic_store(&ev->wake_us,
               lt__spin_smooth(atomic_load(&ev->wake_us), (double)(lt__clock_us() - at)));
}

LT_API int lt_eval_next(lt_eval_t *ev, lt_buf_t **out) {
  return lt_eval_next_timeout(ev, -1, out);
}

LT_API int lt_eval_next_timeout(lt_eval_t *ev, int timeout_ms, lt_buf_t **out) {
  if (ev == NULL || out == NULL) return lt__fail_null("lt_eval_next", ev == NULL ? "ev" : "out", 0);
  *out = NULL;
  struct timespec until = lt__clock_deadline(timeout_ms);
  pthread_mutex_lock(&ev->mu);
  lt_task_t *t;
  lt_replay_t r;
  int rc = LT_OK, got;
  int64_t wait0 = 0; /* when a wait for a lone task's result began, 0: none */
  bool spun = false;
  while (!(got = take_result(ev, &t, &r))) {
    if (ev->stream_left == 0 && ev->closed) {
      rc = LT_ECLOSED;
      break;
    }
    if (ev->state != LT_EVAL_STARTED) {
      rc = LT_ESTATE; /* nothing could ever arrive */
      break;
    }
    if (timeout_ms == 0) {
      rc = LT_ETIMEDOUT;
      break;
    }
    if (!spun) {
      spun = true;
      if (ev->pending == 1) wait0 = lt__clock_us();
      spin_for_result(ev);
      continue; /* look again under the lock before sleeping */
    }
    /* A wait on a stream not closed with nothing pending may be for ever (a forgotten
     * lt_eval_close): it wakes after idle_warn_ms to say so, once. */
    bool idle = !ev->closed && ev->pending == 0 && !ev->idle_warned && ev->opts.idle_warn_ms > 0;
    struct timespec idle_until = lt__clock_deadline((int)ev->opts.idle_warn_ms);
    bool idle_first =
        idle && (timeout_ms < 0 || idle_until.tv_sec < until.tv_sec ||
                 (idle_until.tv_sec == until.tv_sec && idle_until.tv_nsec < until.tv_nsec));
    ev->result_waiters++;
    int64_t slept = lt__clock_us();
    int w = idle_first       ? pthread_cond_timedwait(&ev->cv_result, &ev->mu, &idle_until)
            : timeout_ms < 0 ? pthread_cond_wait(&ev->cv_result, &ev->mu)
                             : pthread_cond_timedwait(&ev->cv_result, &ev->mu, &until);
    ev->result_waiters--;
    woke_up(ev, slept);
    if (idle_first && w == ETIMEDOUT) {
      if (!ev->closed && ev->pending == 0 && !ev->idle_warned) {
        ev->idle_warned = true;
        lt__log(LT_LOG_WARN,
                "lt_eval_next has waited %u ms on a stream that is not closed, with no task "
                "pending: no result can come until more is submitted; call lt_eval_close "
                "after the last lt_eval_submit (this warning comes once; option "
                "idle_warn_ms)",
                (unsigned)ev->opts.idle_warn_ms);
      }
      if ((got = take_result(ev, &t, &r))) break;
      continue;
    }
    if (w == ETIMEDOUT && !(got = take_result(ev, &t, &r))) {
      rc = LT_ETIMEDOUT;
      break;
    }
    if (got) break;
  }
  if (got) ev->stream_left--;
  if (got && wait0 != 0) lt__spin_waited(&ev->lone, (double)(lt__clock_us() - wait0));
  pthread_mutex_unlock(&ev->mu);
  if (got && t == NULL) *out = read_replay(ev, &r);
  if (t != NULL) {
    *out = t->result;
    t->result = NULL;
    lt__task_free(t);
  }
  if (rc == LT_ECLOSED)
    lt__eval_fail(ev, rc, "lt_eval_next: the stream is closed and every result was read");
  else if (rc == LT_ESTATE)
    lt__eval_fail(ev, rc,
                  "lt_eval_next: ev is not started (lt_eval_start or lt_eval_run_local), or its "
                  "start failed: no result can come");
  else if (rc == LT_ETIMEDOUT)
    lt__eval_fail(ev, rc, "lt_eval_next_timeout: no result within timeout_ms %d", timeout_ms);
  return rc;
}
