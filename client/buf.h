/* buf.h: result buffers (lt_buf_t): a task's result value, shared without copying with the
 * value it came from, or an error code and message. Any thread. */
#ifndef LT_BUF_H
#define LT_BUF_H

#include <stdint.h>
#include <lithium.h>
#include "value.h"

struct lt_buf {
  lt_value_t *value; /* NULL for an error */
  int err;
  char *errmsg;  /* never NULL; a static "" in a result (buf.c), else allocated */
  uint64_t task; /* submission index of its task (lt_buf_task), set by lt__buf_set_task */
};

/* lt__buf_ok returns a result holding a new reference to `v`; NULL on out of memory. */
lt_buf_t *lt__buf_ok(lt_value_t *v);

/* lt__buf_fail returns an error result with `err` and a copy of `msg` (NULL: the code's
 * description); NULL on out of memory. */
lt_buf_t *lt__buf_fail(int err, const char *msg);

/* lt__buf_set_task records that `b` is the result of the task with submission index `task`;
 * accepts NULL. */
void lt__buf_set_task(lt_buf_t *b, uint64_t task);

#endif
