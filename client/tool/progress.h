/* progress.h: the progress line `lithium run` keeps on a terminal: tasks done of the total,
 * failures, rate and elapsed time, redrawn at most ten times a second. Silent when disabled
 * (stderr is not a terminal). Main thread only. */
#ifndef LT_PROGRESS_H
#define LT_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

typedef struct lt_progress {
  FILE *f;      /* NULL: disabled */
  size_t total; /* tasks of the run */
  double t0;    /* start, seconds on the monotonic clock */
  double drawn; /* when the line was last drawn */
  int shown;    /* a line is on the terminal now */
} lt_progress_t;

/* lt__progress_init prepares a progress line of `total` tasks on `f`, or a disabled one when
 * `f` is NULL. */
void lt__progress_init(lt_progress_t *p, FILE *f, size_t total);

/* lt__progress_update redraws the line with `done` tasks finished, `failed` of them failed,
 * unless it was drawn less than 100 ms ago (`force` draws anyway). */
void lt__progress_update(lt_progress_t *p, size_t done, size_t failed, int force);

/* lt__progress_clear erases the line so a message or result can be written; the next
 * update draws it again. */
void lt__progress_clear(lt_progress_t *p);

/* lt__progress_end draws the final line and ends it with a newline. */
void lt__progress_end(lt_progress_t *p, size_t done, size_t failed);

#endif
