/* future.c: futures of single tasks. The result is moved out once by lt_future_wait. Any
 * thread. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "future.h"
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
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  unref(f);
}

LT_API int lt_future_wait(lt_future_t *f, int timeout_ms, lt_buf_t **out) {
  if (f == NULL || out == NULL) return LT_EINVAL;
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
  return rc;
}

LT_API void lt_future_release(lt_future_t *f) {
  if (f != NULL) unref(f);
}
