/* progress.c: the terminal progress line of `lithium run` (progress.h). The line is redrawn
 * in place with a carriage return and an erase-to-end-of-line; nothing else is assumed of
 * the terminal. Main thread only. */
#include "progress.h"

#include "cli.h"

static double now_s(void) {
  return (double)lt__cli_clock_us() / 1e6;
}

void lt__progress_init(lt_progress_t *p, FILE *f, size_t total) {
  p->f = f;
  p->total = total;
  p->t0 = now_s();
  p->drawn = 0;
  p->shown = 0;
}

static void draw(lt_progress_t *p, size_t done, size_t failed, double t) {
  double elapsed = t - p->t0;
  double rate = elapsed > 0 ? (double)done / elapsed : 0;
  fprintf(p->f, "\r\033[Klithium: %zu/%zu tasks", done, p->total);
  if (failed > 0) fprintf(p->f, ", %zu failed", failed);
  fprintf(p->f, ", %.1f tasks/s, %.1f s", rate, elapsed);
  fflush(p->f);
  p->drawn = t;
  p->shown = 1;
}

void lt__progress_update(lt_progress_t *p, size_t done, size_t failed, int force) {
  if (p->f == NULL) return;
  double t = now_s();
  if (!force && p->shown && t - p->drawn < 0.1) return;
  draw(p, done, failed, t);
}

void lt__progress_clear(lt_progress_t *p) {
  if (p->f == NULL || !p->shown) return;
  fputs("\r\033[K", p->f);
  fflush(p->f);
  p->shown = 0;
}

void lt__progress_end(lt_progress_t *p, size_t done, size_t failed) {
  if (p->f == NULL) return;
  draw(p, done, failed, now_s());
  fputc('\n', p->f);
  fflush(p->f);
  p->shown = 0;
}
