/* sched_stats.c: the dispatcher's stats as lt_eval_stats_json reports them. The dispatcher
 * publishes a snapshot of its counters and of each server (lt__stats_publish) under a short
 * lock, once a turn before it hands results over and whenever an initial server answers
 * lt_eval_start; lt_eval_stats_json formats the latest snapshot and never waits for a turn.
 * lt__stats_publish: dispatcher thread; lt__sched_stats_json: any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sched_loop.h"
#include "sched_servers.h"
#include "vec.h"

void lt__stats_init(lt_stats_snap_t *st) {
  memset(st, 0, sizeof *st);
  pthread_mutex_init(&st->mu, NULL);
}

void lt__stats_free(lt_stats_snap_t *st) {
  for (size_t i = 0; i < st->cap; i++) {
    free(st->servers[i].endpoint);
    free(st->servers[i].server_id);
  }
  free(st->servers);
  pthread_mutex_destroy(&st->mu);
}

/* set_str makes *dst a copy of `src`, keeping it when it is the same already; LT_ENOMEM
 * leaves it empty. */
static void set_str(char **dst, const char *src) {
  if (*dst != NULL && strcmp(*dst, src) == 0) return;
  free(*dst);
  *dst = strdup(src);
}

/* snap_server copies what the stats say of server i into `out`, as of now_ms. */
static void snap_server(const lt_sched_t *s, size_t i, lt_stats_server_t *out, int64_t now_ms) {
  const lt_conn_t *c = &s->srv[i].conn;
  const lt_slot_t *sl = &s->srv[i].slot;
  const lt_pace_t *pc = &s->srv[i].pace;
  set_str(&out->endpoint, c->endpoint != NULL ? c->endpoint : s->eps[sl->host]);
  set_str(&out->server_id, c->server_id != NULL ? c->server_id : "");
  out->state = c->state;
  out->alive = lt__server_alive(s, i);
  memcpy(out->reason, sl->why, sizeof out->reason);
  out->sessions = sl->sessions;
  out->removed = sl->removed;
  out->incarnation = c->incarnation;
  out->max_frame = c->max_frame;
  out->completed = c->completed;
  out->cpu_s = c->cpu_s;
  out->inflight = c->inflight;
  out->threads = c->threads;
  out->load = c->load;
  out->speed = c->speed;
  out->bytes_to = c->bytes_out;
  out->bytes_from = c->bytes_in;
  out->window = pc->window;
  out->admit = pc->cap;
  out->rtt_us = pc->rtt_us;
  out->noise_us = lt__pace_noise_us(pc, now_ms);
  out->service_us = pc->svc_us;
  out->cores = pc->cores;
  out->starved = pc->starved;
  /* The running ones lead the server's list (instr.c): O(window), not O(inflight). */
  uint32_t running = 0;
  for (const lt_instr_rec_t *r = s->srv[i].slot.out; r != NULL && r->run_ms >= 0; r = r->out_next)
    running++;
  out->running = running;
  out->queued = c->inflight > running ? c->inflight - running : 0;
  int same = out->slot == i && out->sid == s->srv[i].sid; /* the same session as before */
  if (!same || out->svc_n != pc->svc_n) {
    out->svc_n = pc->svc_n;
    memcpy(out->svc_last, pc->svc_last, sizeof out->svc_last);
  }
  size_t max = sizeof out->pstats / sizeof out->pstats[0];
  out->npstats = lt__policies_stats(s, i, out->pstats, max);
  /* A server's history only grows with its count of changes. */
  if (!same || out->changes != pc->changes) {
    out->slot = i;
    out->sid = s->srv[i].sid;
    out->changes = pc->changes;
    memcpy(out->hist_ms, pc->hist_ms, sizeof out->hist_ms);
    memcpy(out->hist_w, pc->hist_w, sizeof out->hist_w);
  }
}

void lt__stats_publish(lt_sched_t *s) {
  lt_stats_snap_t *st = &s->stats;
  pthread_mutex_lock(&st->mu);
  st->instructions = s->instructions;
  st->retries = s->retries;
  st->stray = s->stray;
  st->protocol_errors = s->protocol_errors;
  st->lost_dones = s->lost_dones;
  st->groups = s->groups;
  st->grouped = s->grouped;
  st->packs = s->packs;
  st->packed = s->packed;
  st->t0_ms = s->t0_ms;
  st->npstats =
      lt__policies_stats(s, SIZE_MAX, st->pstats, sizeof st->pstats / sizeof st->pstats[0]);
  /* Traffic of reclaimed entries stays in the totals (entries.c). */
  st->bytes_to = s->gone_bytes_to;
  st->bytes_from = s->gone_bytes_from;
  st->entries = lt__entries_used(s);
  size_t n = 0;
  int room = LT_VEC_RESERVE(st->servers, st->cap, s->nsrv) == LT_OK;
  int64_t now = lt__clock_ms();
  for (size_t i = 0; i < s->nsrv; i++) {
    st->bytes_to += s->srv[i].conn.bytes_out;
    st->bytes_from += s->srv[i].conn.bytes_in;
    /* A later session with the same server stands for it; a free entry stands for none. */
    if (room && s->srv[i].sid != 0 && s->srv[i].slot.successor < 0)
      snap_server(s, i, &st->servers[n++], now);
  }
  if (room) st->nservers = n;
  pthread_mutex_unlock(&st->mu);
}

static const char *conn_state_name(lt_conn_state_t st) {
  switch (st) {
  case LT_CONN_HELLO:
    return "connecting";
  case LT_CONN_READY:
    return "ready";
  case LT_CONN_STOPPING:
    return "stopping";
  default:
    return "dead";
  }
}

/* Policies' numbers that keep the place in the stats they had before the policies kept them
 * (backup.c, migrate.c, deadline.c and watchdog.c): shown there, summed over the policies
 * that publish them (0 when none is on), and not again among the rest. */
static const char *const placed[] = {"migrations",  "migrated", "overdue", "backups",
                                     "backups_won", "reruns",   "copies"};

static int is_placed(const char *key) {
  for (size_t k = 0; k < sizeof placed / sizeof placed[0]; k++)
    if (strcmp(placed[k], key) == 0) return 1;
  return 0;
}

/* stats_json appends the policies' own numbers, but those shown in their own place. */
static void stats_json(const lt_stat_t *st, size_t n, lt_json_t *j) {
  for (size_t k = 0; k < n; k++) {
    if (is_placed(st[k].key)) continue;
    if (st[k].is_bool)
      lt__json_bool(j, st[k].key, st[k].v != 0);
    else
      lt__json_u64(j, st[k].key, st[k].v);
  }
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* p95_us returns the 95th percentile of the server's latest LT_TAIL service times, 0 before
 * the first. */
static double p95_us(const lt_stats_server_t *sv) {
  size_t n = sv->svc_n < LT_TAIL ? (size_t)sv->svc_n : LT_TAIL;
  if (n == 0) return 0;
  float v[LT_TAIL];
  memcpy(v, sv->svc_last, n * sizeof v[0]);
  qsort(v, n, sizeof v[0], cmp_float);
  size_t k = (95 * n + 99) / 100; /* the rank of the 95th percentile, from 1 */
  return v[k - 1];
}

/* server_json appends one server's object. */
static void server_json(const lt_stats_server_t *sv, lt_json_t *j) {
  lt__json_object_open(j, NULL);
  lt__json_str(j, "endpoint", sv->endpoint != NULL ? sv->endpoint : "");
  lt__json_str(j, "server_id", sv->server_id != NULL ? sv->server_id : "");
  lt__json_bool(j, "alive", sv->alive);
  lt__json_str(j, "state", conn_state_name(sv->state));
  lt__json_str(j, "reason", sv->reason);
  lt__json_u64(j, "sessions", sv->sessions);
  lt__json_bool(j, "removed", sv->removed);
  char inc[20];
  snprintf(inc, sizeof inc, "%016llx", (unsigned long long)sv->incarnation);
  lt__json_str(j, "incarnation", inc);
  lt__json_u64(j, "max_frame", sv->max_frame);
  lt__json_u64(j, "completed", sv->completed);
  lt__json_double(j, "cpu_s", sv->cpu_s);          /* of those, as the server measured them */
  lt__json_u64(j, "executed", sv->load.completed); /* by the server, for every client */
  lt__json_u64(j, "inflight", sv->inflight);
  lt__json_u64(j, "running", sv->running);
  lt__json_u64(j, "queued", sv->queued);
  lt__json_u64(j, "active_threads", sv->load.active);
  lt__json_u64(j, "threads", sv->threads);
  lt__json_u64(j, "window", sv->window);
  lt__json_u64(j, "admit", sv->admit);
  lt__json_u64(j, "window_changes", sv->changes);
  lt__json_array_open(j, "window_history"); /* [ms since start, window], the latest last */
  uint32_t kept = sv->changes < LT_HISTORY ? sv->changes : LT_HISTORY;
  for (uint32_t k = sv->changes - kept; k < sv->changes; k++) {
    lt__json_array_open(j, NULL);
    lt__json_u64(j, NULL, (uint64_t)sv->hist_ms[k % LT_HISTORY]);
    lt__json_u64(j, NULL, sv->hist_w[k % LT_HISTORY]);
    lt__json_array_close(j);
  }
  lt__json_array_close(j);
  lt__json_double(j, "rtt_us", sv->rtt_us);
  lt__json_double(j, "noise_us", sv->noise_us); /* the longest delay beyond work, lately */
  lt__json_double(j, "service_us", sv->service_us);
  lt__json_double(j, "service_p95_us", p95_us(sv));
  lt__json_u64(j, "copies", lt__stat_sum(sv->pstats, sv->npstats, "copies"));
  lt__json_double(j, "cores", sv->cores);  /* the CPU it gets, learnt */
  lt__json_u64(j, "starved", sv->starved); /* reports of a free thread and nothing queued */
  lt__json_double(j, "speed", sv->speed);
  lt__json_u64(j, "bytes_to", sv->bytes_to);
  lt__json_u64(j, "bytes_from", sv->bytes_from);
  lt__json_u64(j, "bytes_peer_in", sv->load.peer_in);
  lt__json_u64(j, "bytes_peer_out", sv->load.peer_out);
  lt__json_u64(j, "bytes_shm_in", sv->load.shm_in); /* of bytes_peer_in: by memfd */
  lt__json_u64(j, "bytes_shm_out", sv->load.shm_out);
  lt__json_u64(j, "shm_values_in", sv->load.shm_values_in);
  lt__json_u64(j, "shm_values_out", sv->load.shm_values_out);
  lt__json_u64(j, "shm_fallbacks", sv->load.shm_fallbacks);
  lt__json_u64(j, "shm_us", sv->load.shm_us);
  lt__json_u64(j, "values_held", sv->load.values_held);
  stats_json(sv->pstats, sv->npstats, j);
  lt__json_object_close(j);
}

void lt__sched_stats_json(void *self, lt_json_t *j) {
  lt_sched_t *s = self;
  const lt_options_t *o = s->opts; /* fixed from start on */
  lt_stats_snap_t *st = &s->stats;
  pthread_mutex_lock(&st->mu);
  lt__json_u64(j, "elapsed_ms", st->t0_ms > 0 ? (uint64_t)(lt__clock_ms() - st->t0_ms) : 0);
  lt__json_u64(j, "instructions", st->instructions);
  lt__json_u64(j, "bytes_to_servers", st->bytes_to);
  lt__json_u64(j, "bytes_from_servers", st->bytes_from);
  lt__json_u64(j, "retries", st->retries);
  lt__json_u64(j, "migrations", lt__stat_sum(st->pstats, st->npstats, "migrations"));
  lt__json_u64(j, "migrated", lt__stat_sum(st->pstats, st->npstats, "migrated"));
  lt__json_u64(j, "stray_completions", st->stray);
  lt__json_u64(j, "protocol_errors", st->protocol_errors);
  lt__json_u64(j, "lost_dones", st->lost_dones);
  lt__json_u64(j, "server_entries", st->entries);
  lt__json_u64(j, "overdue", lt__stat_sum(st->pstats, st->npstats, "overdue"));
  lt__json_u64(j, "backups", lt__stat_sum(st->pstats, st->npstats, "backups"));
  lt__json_u64(j, "backups_won", lt__stat_sum(st->pstats, st->npstats, "backups_won"));
  lt__json_u64(j, "reruns", lt__stat_sum(st->pstats, st->npstats, "reruns"));
  lt__json_u64(j, "groups", st->groups);
  lt__json_u64(j, "grouped", st->grouped);
  lt__json_u64(j, "packs", st->packs);
  lt__json_u64(j, "packed", st->packed);
  stats_json(st->pstats, st->npstats, j);
  lt__json_str(j, "mode",
               o->lookahead && o->lazy     ? "optimized"
               : !o->lookahead && !o->lazy ? "plain"
                                           : "custom");
  lt__json_bool(j, "lookahead", o->lookahead);
  lt__json_bool(j, "lazy", o->lazy);
  lt__json_array_open(j, "servers");
  for (size_t i = 0; i < st->nservers; i++)
    server_json(&st->servers[i], j);
  lt__json_array_close(j);
  pthread_mutex_unlock(&st->mu);
}
