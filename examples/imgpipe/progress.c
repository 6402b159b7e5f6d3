/* progress.c: imgpipe's progress bar (progress.h). The bar is redrawn in place with a carriage
 * return and an erase-to-end-of-line, the only terminal controls it assumes. Any thread, under
 * the bar's lock. */
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

#define BAR_WIDTH 30

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void img_progress_init(img_progress_t *p, size_t total) {
  pthread_mutex_init(&p->mu, NULL);
  p->on = isatty(STDERR_FILENO);
  p->total = total;
  p->done = p->failed = 0;
  p->t0 = now_s();
  p->drawn = 0;
  p->shown = 0;
}

/* draw writes the bar; the lock is held. */
static void draw(img_progress_t *p, double t) {
  double elapsed = t - p->t0;
  double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
  size_t filled = p->total > 0 ? p->done * BAR_WIDTH / p->total : BAR_WIDTH;
  char bar[BAR_WIDTH + 1];
  for (size_t i = 0; i < BAR_WIDTH; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  fprintf(stderr, "\r\033[Kimgpipe [%s] %zu/%zu images", bar, p->done, p->total);
  if (p->failed > 0) fprintf(stderr, ", %zu failed", p->failed);
  fprintf(stderr, ", %.1f images/s", rate);
  if (rate > 0 && p->done < p->total)
    fprintf(stderr, ", %.0f s left", (double)(p->total - p->done) / rate);
  fflush(stderr);
  p->drawn = t;
  p->shown = 1;
}

void img_progress_step(img_progress_t *p, int failed) {
  pthread_mutex_lock(&p->mu);
  p->done++;
  if (failed) p->failed++;
  double t = now_s();
  if (p->on && (!p->shown || t - p->drawn >= 0.1 || p->done == p->total)) draw(p, t);
  pthread_mutex_unlock(&p->mu);
}

void img_progress_say(img_progress_t *p, const char *fmt, ...) {
  pthread_mutex_lock(&p->mu);
  if (p->shown) fputs("\r\033[K", stderr);
  fputs("imgpipe: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (p->shown) draw(p, now_s());
  fflush(stderr);
  pthread_mutex_unlock(&p->mu);
}

void img_progress_end(img_progress_t *p) {
  pthread_mutex_lock(&p->mu);
  if (p->shown) fputs("\r\033[K", stderr);
  fflush(stderr);
  p->shown = 0;
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_destroy(&p->mu);
}
