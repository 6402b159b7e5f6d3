/* progress.h: imgpipe's progress bar on stderr when it is a terminal: a bar, images done of
 * the total, images per second and the time left, redrawn at most ten times a second; and the
 * messages printed meanwhile, which go above the bar. Disabled (messages only) when stderr is
 * not a terminal. Any thread: every call takes the bar's lock. */
#ifndef LT_EXAMPLE_PROGRESS_H
#define LT_EXAMPLE_PROGRESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

typedef struct img_progress {
  pthread_mutex_t mu;
  int on;       /* stderr is a terminal */
  size_t total; /* images of the run */
  size_t done, failed;
  double t0;    /* start, seconds on the monotonic clock */
  double drawn; /* when the bar was last drawn */
  int shown;    /* the bar is on the terminal now */
} img_progress_t;

/* img_progress_init starts a bar of `total` images; it draws only when stderr is a terminal. */
void img_progress_init(img_progress_t *p, size_t total);

/* img_progress_step counts one more image finished (failed or not) and redraws the bar unless
 * it was drawn less than 100 ms ago. */
void img_progress_step(img_progress_t *p, int failed);

/* img_progress_say prints "imgpipe: <message>" on stderr, above the bar. */
void img_progress_say(img_progress_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* img_progress_end erases the bar (the summary goes to stdout) and frees the lock. */
void img_progress_end(img_progress_t *p);

#endif
