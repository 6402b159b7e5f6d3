/* future.h: the client-side future handle of a task submitted with `out`. Two owners: the
 * user (until lt_future_release) and the evaluator (until it resolves the future). Any
 * thread. */
#ifndef LT_FUTURE_H
#define LT_FUTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <lithium.h>

struct lt_future {
  atomic_int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ready;
  int taken;
  lt_buf_t *buf;
};

/* lt__future_new returns a future with two references (user and evaluator). */
lt_future_t *lt__future_new(void);

/* lt__future_resolve hands `b` (taken) to the future, wakes waiters and drops the
 * evaluator's reference. */
void lt__future_resolve(lt_future_t *f, lt_buf_t *b);

#endif
