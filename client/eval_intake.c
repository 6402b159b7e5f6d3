/* eval_intake.c: tasks coming in (eval_state.h): lt_eval_submit and lt_eval_submit_owned
 * with backpressure (at most max_pending unfinished tasks: a submit waits, or fails with
 * nonblocking=on), a result found in the journal replayed instead of computed, lt_eval_close,
 * and the intake side of the backend's door (take, woken, stopping, input closed). It opens
 * the journal on the first submit or start. Results are eval_results.c's. Any thread, under
 * ev->mu as each call says; the door's calls are the backend's thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "buf.h"
#include "eval_state.h"
#include "future.h"
#include "log.h"
#include "queue.h"
#include "ship.h"

void lt__eval_door_woken(lt_eval_t *ev) {
  uint64_t junk;
  ssize_t n = read(ev->wake_fd, &junk, sizeof junk);
  (void)n; /* non-blocking: nothing to read is fine */
  atomic_store(&ev->wake_pending, 0);
  /* The wake that followed a lone result: how long the reader took to submit again. */
  if (ev->lone_at_us != 0) lt__spin_waited(&ev->turn, (double)(lt__clock_us() - ev->lone_at_us));
  ev->lone_at_us = 0;
}

lt_task_t *lt__eval_door_take(lt_eval_t *ev, size_t max) {
  lt_task_t *head = NULL, *tail = NULL, *t;
  pthread_mutex_lock(&ev->mu);
  /* Nothing goes out before lt_eval_start has found every kernel, nor after it failed. */
  if (ev->state != LT_EVAL_STARTED) max = 0;
  for (size_t n = 0; n < max && ev->intake_head != NULL; n++) {
    LT_QUEUE_POP(ev->intake_head, ev->intake_tail, t, next);
    LT_QUEUE_PUSH(head, tail, t, next);
  }
  pthread_mutex_unlock(&ev->mu);
  return head;
}

int lt__eval_door_stopping(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  int stop = ev->stop;
  pthread_mutex_unlock(&ev->mu);
  return stop;
}

int lt__eval_door_input_closed(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  int closed = ev->closed && ev->intake_head == NULL;
  pthread_mutex_unlock(&ev->mu);
  return closed;
}

/* journal_header returns the journal header text of this run (caller frees): the program's
 * canonical expression and the SHA-256 of the local copy of each module it uses, found in
 * the `modules` directory the way the servers and the sequential evaluator find them (the
 * hashes module shipping compares with the servers' welcomes). NULL on out of memory. */
static char *journal_header(lt_eval_t *ev) {
  char *program = lt_skel_format(ev->program);
  lt_template_t *tmpl = NULL;
  lt_ship_t *sh = NULL;
  char *text = NULL;
  if (program != NULL && lt__template_compile(&tmpl, ev->program, ev->opts.normal_form) == LT_OK &&
      lt__ship_new(&sh, ev->opts.modules, tmpl->kernels, tmpl->nkernels, 0) == LT_OK) {
    const char *const *names;
    uint32_t n;
    lt__ship_modules(sh, &names, &n);
    const char **shas = calloc(n ? n : 1, sizeof *shas);
    for (uint32_t i = 0; shas != NULL && i < n; i++) {
      shas[i] = lt__ship_sha256(sh, i);
      if (shas[i][0] == '\0')
        lt__log(LT_LOG_WARN,
                "journal %s: module '%s' has no local copy (modules=%s): a rebuild of it "
                "cannot be told from the journal",
                ev->opts.journal, names[i], ev->opts.modules ? ev->opts.modules : "not set");
    }
    if (shas != NULL) text = lt__jheader_text(program, names, shas, n);
    free(shas);
  }
  lt__ship_free(sh);
  lt__template_free(tmpl);
  free(program);
  return text;
}

/* lt__eval_open_journal opens the journal (journal=FILE) once; with ev->mu held. */
int lt__eval_open_journal(lt_eval_t *ev) {
  if (ev->opts.journal == NULL || ev->journal != NULL) return LT_OK;
  char *header = journal_header(ev);
  if (header == NULL) return lt__fail(LT_ENOMEM, "option journal: out of memory");
  char err[1024];
  int rc = lt__journal_open(&ev->journal, ev->opts.journal, header, ev->opts.journal_mismatch, err,
                            sizeof err);
  free(header);
  if (rc != LT_OK) {
    lt__log(LT_LOG_ERROR, "%s", err);
    /* Under ev->mu: the thread's text now, ev's by the caller (journal_failed). */
    lt__fail(rc, "option journal '%s': %s", ev->opts.journal, err);
  }
  return rc;
}

/* replay gives task `t` the result journaled for its input, if there is one: 1 when it did
 * (`t` is taken), 0 when `t` is to be computed. A result for the stream only takes its
 * place there, to be read when lt_eval_next reaches it; a future or the stream's reduce
 * gets it read now (and a record that cannot be read is computed again). Under ev->mu. */
static int replay(lt_eval_t *ev, lt_task_t *t) {
  uint64_t off;
  if (!lt__journal_find(ev->journal, t->digest, &off)) return 0;
  if (t->future == NULL && ev->sreduce == NULL) {
    lt_replay_t r = {t->stream_seq, t->seq, off, ev->arrivals};
    if (lt__replayq_push(&ev->replays, r) != LT_OK) return 0;
    ev->arrivals++;
    ev->replayed++;
    ev->submitted++;
    ev->completed++;
    if (ev->result_waiters > 0 && (!ev->opts.ordered || t->stream_seq == ev->next_out))
      lt__eval_wake_readers(ev);
    t->input = NULL; /* submit drops it, outside ev->mu */
    lt__task_free(t);
    return 1;
  }
  char err[512];
  lt_buf_t *done = NULL;
  if (lt__journal_read(ev->journal, off, &done, err, sizeof err) != LT_OK) {
    lt__log(LT_LOG_WARN, "%s; computed again", err);
    return 0;
  }
  t->replayed = 1;
  t->input = NULL;
  ev->replayed++;
  ev->pending++;
  ev->submitted++;
  lt__eval_finish(ev, t, done);
  return 1;
}

/* submit adds the task of `input` (taken: one reference, dropped also on failure, outside
 * ev->mu since its free callback is the user's code) to the stream, or to *out: the body of
 * lt_eval_submit and lt_eval_submit_owned. */
static int submit(lt_eval_t *ev, lt_value_t *input, lt_future_t **out) {
  if (out != NULL && ev->sreduce != NULL) { /* one result: lt_eval_next */
    lt__value_unref(input);
    return lt__eval_fail(ev, LT_EINVAL,
                         "lt_eval_submit: out must be NULL: this program reduces its stream to one "
                         "result, read with lt_eval_next");
  }
  lt_task_t *t = calloc(1, sizeof *t);
  if (t == NULL) {
    lt__value_unref(input);
    return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory");
  }
  t->input = input;
  if (out != NULL && (t->future = lt__future_new()) == NULL) {
    lt__task_free(t);
    return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory");
  }
  if (ev->opts.journal != NULL) t->digest = lt__digest(input->data, input->len);
  pthread_mutex_lock(&ev->mu);
  int rc = LT_OK;
  if (ev->closed || ev->state == LT_EVAL_FAILED) rc = ev->closed ? LT_ECLOSED : LT_ESTATE;
  int jrc = rc == LT_OK ? (rc = lt__eval_open_journal(ev)) : LT_OK;
  /* Before start nothing can finish, so nothing blocks: Lithium's submit-all-then-parDo
   * pattern must work. */
  while (rc == LT_OK && ev->state == LT_EVAL_STARTED && ev->pending >= ev->opts.max_pending) {
    if (ev->opts.nonblocking) {
      rc = LT_EAGAIN;
      break;
    }
    ev->space_waiters++;
    pthread_cond_wait(&ev->cv_space, &ev->mu);
    ev->space_waiters--;
    if (ev->closed) rc = LT_ECLOSED;
  }
  if (rc != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    if (t->future != NULL) {
      lt_future_release(t->future); /* both references: nobody else saw it */
      lt_future_release(t->future);
    }
    t->future = NULL;
    lt__task_free(t);
    if (jrc != LT_OK) return lt__eval_fail(ev, rc, "lt_eval_submit: %s", lt_last_error());
    return lt__eval_fail(ev, rc, "lt_eval_submit: %s",
                         rc == LT_ECLOSED ? "the stream of ev is closed (lt_eval_close was called)"
                         : rc == LT_EAGAIN
                             ? "max_pending tasks are unfinished (option nonblocking is on): read "
                               "results, then submit again"
                             : "ev failed to start: make a new evaluator");
  }
  if (ev->sreduce != NULL && (rc = lt__sreduce_add(ev->sreduce)) != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    lt__task_free(t);
    return lt__eval_fail(ev, rc, "lt_eval_submit: out of memory");
  }
  t->seq = ev->next_task++;
  if (ev->sreduce != NULL) {
    ev->stream_left = 1; /* the reduced result, once */
  } else if (t->future == NULL) {
    /* Its place in an ordered stream is made now, so that its result always finds it. */
    if (ev->opts.ordered && lt__reorder_reserve(&ev->ordered, ev->next_stream, ev->next_out) != 0) {
      pthread_mutex_unlock(&ev->mu);
      lt__task_free(t);
      return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory");
    }
    t->stream_seq = ev->next_stream++;
    ev->stream_left++;
  }
  lt_future_t *future = t->future; /* replay may free t */
  if (ev->journal != NULL && replay(ev, t)) {
    /* Done in an earlier run: its result comes from the journal, in its place; its input
     * is not needed. */
    if (out != NULL) *out = future;
    pthread_mutex_unlock(&ev->mu);
    lt__value_unref(input);
    return LT_OK;
  }
  LT_QUEUE_PUSH(ev->intake_head, ev->intake_tail, t, next);
  ev->pending++;
  ev->submitted++;
  int started = ev->state == LT_EVAL_STARTED;
  if (out != NULL) *out = t->future;
  pthread_mutex_unlock(&ev->mu);
  if (started) lt__eval_wake(ev);
  return LT_OK;
}

LT_API int lt_eval_submit(lt_eval_t *ev, const void *data, size_t len, lt_future_t **out) {
  if (out != NULL) *out = NULL;
  if (ev == NULL) return lt__fail_null("lt_eval_submit", "ev", 0);
  if (data == NULL && len > 0)
    return lt__eval_fail(ev, LT_EINVAL,
                         "lt_eval_submit: data is NULL with len %zu (NULL needs len 0)", len);
  lt_value_t *input = lt__value_copy(data, len);
  return input != NULL
             ? submit(ev, input, out)
             : lt__eval_fail(ev, LT_ENOMEM, "lt_eval_submit: out of memory for %zu bytes", len);
}

LT_API int lt_eval_submit_owned(lt_eval_t *ev, void *data, size_t len,
                                void (*free_fn)(void *data, void *hint), void *hint,
                                lt_future_t **out) {
  if (out != NULL) *out = NULL;
  if (ev == NULL || (data == NULL && len > 0)) {
    if (free_fn != NULL) free_fn(data, hint); /* taken, also on failure */
    if (ev == NULL) return lt__fail_null("lt_eval_submit_owned", "ev", 0);
    return lt__eval_fail(ev, LT_EINVAL,
                         "lt_eval_submit_owned: data is NULL with len %zu (NULL needs len 0)", len);
  }
  lt_value_t *input = lt__value_user(data, len, free_fn, hint);
  return input != NULL ? submit(ev, input, out)
                       : lt__eval_fail(ev, LT_ENOMEM, "lt_eval_submit_owned: out of memory");
}

LT_API int lt_eval_close(lt_eval_t *ev) {
  if (ev == NULL) return lt__fail_null("lt_eval_close", "ev", 0);
  pthread_mutex_lock(&ev->mu);
  ev->closed = 1;
  if (ev->sreduce != NULL) lt__eval_sreduce_end(ev, NULL); /* every result may be in already */
  pthread_cond_broadcast(&ev->cv_result);
  pthread_cond_broadcast(&ev->cv_space);
  pthread_mutex_unlock(&ev->mu);
  lt__eval_wake(ev); /* end of stream: work may move (migrate.c) */
  return LT_OK;
}
