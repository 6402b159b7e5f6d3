/* top_screen.c: one frame of `lithium top` from a stats snapshot (the keys of
 * lt_eval_stats_json): the evaluation's line, then a row a server. Rates are taken over the
 * time between this snapshot and the one before, or over the whole run for the first.
 * Main thread only. */
#include <stdlib.h>
#include <string.h>

#include "top.h"

/* bytes writes n as a short size ("812", "3.4K", "12.0M", "1.1G"). */
static void bytes(char *buf, size_t len, double n) {
  const char *unit = " KMGT";
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%.0f", n);
  else
    snprintf(buf, len, "%.1f%c", n, unit[u]);
}

/* seconds writes s as a short duration ("45 s", "12 min", "3.2 h"), "-" when unknown. */
static void seconds(char *buf, size_t len, double s) {
  if (!(s >= 0) || s > 1e9)
    snprintf(buf, len, "-");
  else if (s < 120)
    snprintf(buf, len, "%.0f s", s);
  else if (s < 7200)
    snprintf(buf, len, "%.0f min", s / 60);
  else
    snprintf(buf, len, "%.1f h", s / 3600);
}

/* prev_done returns what the frame before said server `ep` had done, or -1. */
static double prev_done(const lt_top_prev_t *prev, const char *ep) {
  for (size_t i = 0; i < prev->n; i++)
    if (strcmp(prev->endpoints[i], ep) == 0) return prev->done[i];
  return -1;
}

/* rate returns (now - before) per second over dt_ms, or now per second over the run when
 * there was no frame before. */
static double rate(double now, double before, double dt_ms, double elapsed_ms) {
  if (before >= 0 && dt_ms > 0) return (now - before) * 1000 / dt_ms;
  return elapsed_ms > 0 ? now * 1000 / elapsed_ms : 0;
}

static void server_row(FILE *f, const lt_jv_t *sv, const lt_top_prev_t *prev, double dt_ms,
                       double elapsed_ms) {
  const char *ep = lt__jv_str(sv, "endpoint", "?");
  double done = lt__jv_num(sv, "completed", 0);
  double per_s = rate(done, prev_done(prev, ep), dt_ms, elapsed_ms);
  const char *state = lt__jv_str(sv, "state", "?");
  if (lt__jv_num(sv, "removed", 0)) state = "removed";
  const lt_jv_t *q = lt__jv_get(sv, "quarantined");
  const char *quar = q == NULL ? "-" : q->num ? "yes" : "no";
  char in[16], out[16];
  bytes(in, sizeof in, lt__jv_num(sv, "bytes_from", 0));
  bytes(out, sizeof out, lt__jv_num(sv, "bytes_to", 0));
  fprintf(f, "%-28.28s %-10.10s %4.0f %6.0f %4.0f %8.0f %8.1f %8.2f %8.2f %6.0f %4s %7s %7s\n", ep,
          state, lt__jv_num(sv, "window", 0), lt__jv_num(sv, "queued", 0),
          lt__jv_num(sv, "running", 0), done, per_s, lt__jv_num(sv, "service_us", 0) / 1000,
          lt__jv_num(sv, "service_p95_us", 0) / 1000, lt__jv_num(sv, "copies", 0), quar, in, out);
}

/* remember makes prev the servers' counts of this snapshot. */
static void remember(lt_top_prev_t *prev, const lt_jv_t *servers, double elapsed_ms,
                     double completed) {
  lt__top_prev_free(prev);
  prev->elapsed_ms = elapsed_ms;
  prev->completed = completed;
  size_t n = servers != NULL && servers->type == LT_JV_ARR ? servers->n : 0;
  prev->endpoints = calloc(n ? n : 1, sizeof *prev->endpoints);
  prev->done = calloc(n ? n : 1, sizeof *prev->done);
  if (prev->endpoints == NULL || prev->done == NULL) return; /* rates over the run next */
  for (size_t i = 0; i < n; i++) {
    char *ep = strdup(lt__jv_str(&servers->kids[i], "endpoint", "?"));
    if (ep == NULL) break;
    prev->endpoints[prev->n] = ep;
    prev->done[prev->n++] = lt__jv_num(&servers->kids[i], "completed", 0);
  }
}

void lt__top_screen(FILE *f, const char *path, const lt_jv_t *snap, lt_top_prev_t *prev) {
  double elapsed_ms = lt__jv_num(snap, "elapsed_ms", 0);
  double dt_ms = prev->elapsed_ms > 0 ? elapsed_ms - prev->elapsed_ms : 0;
  double completed = lt__jv_num(snap, "tasks_completed", 0);
  double pending = lt__jv_num(snap, "tasks_pending", 0);
  double per_s = rate(completed, prev->elapsed_ms > 0 ? prev->completed : -1, dt_ms, elapsed_ms);
  int closed = lt__jv_num(snap, "input_closed", 0) != 0;
  char eta[32], up[32], to[16], from[16];
  seconds(eta, sizeof eta, per_s > 0 ? pending / per_s : -1);
  seconds(up, sizeof up, elapsed_ms / 1000);
  bytes(to, sizeof to, lt__jv_num(snap, "bytes_to_servers", 0));
  bytes(from, sizeof from, lt__jv_num(snap, "bytes_from_servers", 0));
  fprintf(f, "lithium top  %s  up %s\n", path, up);
  fprintf(f, "tasks  %.0f submitted  %.0f done  %.1f/s  %.0f pending  %.0f failed  ETA %s%s\n",
          lt__jv_num(snap, "tasks_submitted", 0), completed, per_s, pending,
          lt__jv_num(snap, "tasks_failed", 0), eta, closed ? "" : " (input open)");
  fprintf(f,
          "instructions %.0f  retries %.0f  copies %.0f (%.0f won)  reruns %.0f  "
          "bytes out %s in %s\n\n",
          lt__jv_num(snap, "instructions", 0), lt__jv_num(snap, "retries", 0),
          lt__jv_num(snap, "backups", 0), lt__jv_num(snap, "backups_won", 0),
          lt__jv_num(snap, "reruns", 0), to, from);
  fprintf(f, "%-28s %-10s %4s %6s %4s %8s %8s %8s %8s %6s %4s %7s %7s\n", "SERVER", "STATE", "WIN",
          "QUEUED", "RUN", "DONE", "DONE/S", "MEAN ms", "P95 ms", "COPIES", "QUAR", "IN", "OUT");
  const lt_jv_t *servers = lt__jv_get(snap, "servers");
  for (size_t i = 0; servers != NULL && servers->type == LT_JV_ARR && i < servers->n; i++)
    if (servers->kids[i].type == LT_JV_OBJ)
      server_row(f, &servers->kids[i], prev, dt_ms, elapsed_ms);
  remember(prev, servers, elapsed_ms, completed);
}

void lt__top_prev_free(lt_top_prev_t *prev) {
  for (size_t i = 0; i < prev->n; i++)
    free(prev->endpoints[i]);
  free(prev->endpoints);
  free(prev->done);
  memset(prev, 0, sizeof *prev);
}
