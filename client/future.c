/* future.c: futures of single tasks. The result is moved out once by lt_future_wait or
 * lt_future_wait_any. A thread waiting for any of several futures (of one evaluator or
 * several) registers one condition variable of its own on each of them, and the first to
 * resolve wakes it: no polling. Any thread. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "future.h"
#include "lasterr.h"
#include "clock.h"

static void unref(lt_future_t *f) {
  if (atomic_fetch_sub(&f->refs, 1) != 1) return;
  lt_buf_free(f->buf);
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
  free(f);
}

lt_future_t *lt__future_new(void) {
  lt_future_t *f = calloc(1, sizeof *f);
  if (f == NULL) return NULL;
  atomic_init(&f->refs, 2);
  pthread_mutex_init(&f->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&f->cv, &attr);
  pthread_condattr_destroy(&attr);
  return f;
}

void lt__future_resolve(lt_future_t *f, lt_buf_t *b) {
  pthread_mutex_lock(&f->mu);
  f->buf = b;
  f->ready = 1;
  for (lt_future_link_t *l = f->links; l != NULL; l = l->next) {
    pthread_mutex_lock(&l->any->mu);
    l->any->fired = 1;
    pthread_cond_signal(&l->any->cv);
    pthread_mutex_unlock(&l->any->mu);
  }
  pthread_mutex_unlock(&f->mu);
  /* After the lock: a waiter woken under it would run into the held lock and sleep again.
   * Our reference keeps f (and its condition variable) alive until unref. */
  pthread_cond_broadcast(&f->cv);
  unref(f);
}

LT_API int lt_future_wait(lt_future_t *f, int timeout_ms, lt_buf_t **out) {
  if (f == NULL || out == NULL) return lt__fail_null("lt_future_wait", f == NULL ? "f" : "out", 0);
  *out = NULL;
  struct timespec deadline = lt__clock_deadline(timeout_ms);
  int rc = LT_OK;
  pthread_mutex_lock(&f->mu);
  while (!f->ready && rc == LT_OK) {
    if (timeout_ms < 0)
      pthread_cond_wait(&f->cv, &f->mu);
    else if (timeout_ms == 0 || pthread_cond_timedwait(&f->cv, &f->mu, &deadline) == ETIMEDOUT)
      rc = f->ready ? LT_OK : LT_ETIMEDOUT;
  }
  if (rc == LT_OK) {
    if (f->taken) {
      rc = LT_ESTATE;
    } else {
      *out = f->buf;
      f->buf = NULL;
      f->taken = 1;
    }
  }
  pthread_mutex_unlock(&f->mu);
  if (rc == LT_ESTATE) lt__fail(rc, "lt_future_wait: the result of f was taken already");
  if (rc == LT_ETIMEDOUT)
    lt__fail(rc, "lt_future_wait: no result within timeout_ms %d", timeout_ms);
  return rc;
}

/* take_any takes the result of the first ready future of `fs` not yet taken: its index in
 * *which, LT_OK. Otherwise it registers `links[i]` on every future still to come when
 * `links` is not NULL, and returns LT_EAGAIN, or LT_ESTATE when every result was taken
 * already (nothing can come). */
static int take_any(lt_future_t *const *fs, size_t n, lt_future_link_t *links, size_t *which,
                    lt_buf_t **out) {
  int waiting = 0;
  for (size_t i = 0; i < n; i++) {
    lt_future_t *f = fs[i];
    pthread_mutex_lock(&f->mu);
    if (f->ready && !f->taken) {
      *out = f->buf;
      f->buf = NULL;
      f->taken = 1;
      *which = i;
      pthread_mutex_unlock(&f->mu);
      return LT_OK;
    }
    if (!f->ready) {
      waiting = 1;
      if (links != NULL) {
        links[i].next = f->links;
        f->links = &links[i];
      }
    }
    pthread_mutex_unlock(&f->mu);
  }
  return waiting ? LT_EAGAIN : LT_ESTATE;
}

/* unlink_all removes the registrations take_any made (those that are there). */
static void unlink_all(lt_future_t *const *fs, size_t n, lt_future_link_t *links) {
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&fs[i]->mu);
    for (lt_future_link_t **p = &fs[i]->links; *p != NULL; p = &(*p)->next) {
      if (*p == &links[i]) {
        *p = links[i].next;
        break;
      }
    }
    pthread_mutex_unlock(&fs[i]->mu);
  }
}

/* wait_any is lt_future_wait_any over n > 0 futures, with the index as a size_t. */
static int wait_any(lt_future_t *const *fs, size_t n, int timeout_ms, size_t *which,
                    lt_buf_t **out) {
  for (size_t i = 0; i < n; i++)
    if (fs[i] == NULL) return lt__fail(LT_EINVAL, "lt_future_wait_any: fs[%zu] is NULL", i);
  int rc = take_any(fs, n, NULL, which, out);
  if (rc != LT_EAGAIN) return rc;
  if (timeout_ms == 0) return LT_ETIMEDOUT;
  lt_future_link_t *links = calloc(n, sizeof *links);
  if (links == NULL) return lt__fail(LT_ENOMEM, "lt_future_wait_any: out of memory");
  lt_future_any_t any = {.fired = 0};
  pthread_mutex_init(&any.mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&any.cv, &attr);
  pthread_condattr_destroy(&attr);
  for (size_t i = 0; i < n; i++)
    links[i].any = &any;
  struct timespec deadline = lt__clock_deadline(timeout_ms);
  /* Register, then sleep until a future fires; another thread may take that result first
   * (a second waiter on the same future), and then the wait goes on. */
  while ((rc = take_any(fs, n, links, which, out)) == LT_EAGAIN) {
    int timed_out = 0;
    pthread_mutex_lock(&any.mu);
    while (!any.fired && !timed_out) {
      if (timeout_ms < 0)
        pthread_cond_wait(&any.cv, &any.mu);
      else
        timed_out = pthread_cond_timedwait(&any.cv, &any.mu, &deadline) == ETIMEDOUT;
    }
    any.fired = 0;
    pthread_mutex_unlock(&any.mu);
    unlink_all(fs, n, links);
    if (timed_out) {
      rc = take_any(fs, n, NULL, which, out);
      if (rc == LT_EAGAIN) rc = LT_ETIMEDOUT;
      break;
    }
  }
  unlink_all(fs, n, links); /* take_any may have registered some before it found one */
  pthread_cond_destroy(&any.cv);
  pthread_mutex_destroy(&any.mu);
  free(links);
  return rc;
}

LT_API void lt_future_release(lt_future_t *f) {
  if (f != NULL) unref(f);
}

LT_API int lt_future_wait_any(lt_future_t **fs, int n, int timeout_ms, int *which, lt_buf_t **out) {
  if (out != NULL) *out = NULL;
  if (fs == NULL || which == NULL || out == NULL)
    return lt__fail_null("lt_future_wait_any",
                         fs == NULL      ? "fs"
                         : which == NULL ? "which"
                                         : "out",
                         0);
  if (n <= 0) return lt__fail(LT_EINVAL, "lt_future_wait_any: n %d is not positive", n);
  size_t w = 0;
  int rc = wait_any(fs, (size_t)n, timeout_ms, &w, out);
  if (rc == LT_OK) *which = (int)w;
  if (rc == LT_ESTATE)
    lt__fail(rc, "lt_future_wait_any: the results of all %d futures of fs were taken already", n);
  if (rc == LT_ETIMEDOUT)
    lt__fail(rc, "lt_future_wait_any: no result within timeout_ms %d", timeout_ms);
  return rc;
}
