/* future.h: the client-side future handle of a task submitted with `out`. Two owners: the
 * user (until lt_future_release) and the evaluator (until it resolves the future). Any
 * thread. */
#ifndef LT_FUTURE_H
#define LT_FUTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <lithium.h>

/* A thread in lt_future_wait_any: woken by whichever of its futures resolves first. */
typedef struct lt_future_any {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int fired;         /* under mu */
} lt_future_any_t;

/* One registration of an lt_future_any_t on one future (a list per future, under its mu). */
typedef struct lt_future_link {
  lt_future_any_t *any;
  struct lt_future_link *next;
} lt_future_link_t;

struct lt_future {
  atomic_int refs;
  pthread_mutex_t mu; /* taken before any lt_future_any_t's mu, never after */
  pthread_cond_t cv;
  int ready;
  int taken;
  lt_buf_t *buf;
  lt_future_link_t *links; /* threads in lt_future_wait_any on this future */
};

/* lt__future_new returns a future with two references (user and evaluator). */
lt_future_t *lt__future_new(void);

/* lt__future_resolve hands `b` (taken) to the future, wakes waiters (also those of
 * lt_future_wait_any) and drops the evaluator's reference. */
void lt__future_resolve(lt_future_t *f, lt_buf_t *b);

#endif
