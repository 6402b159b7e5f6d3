/* world.c: one run of the simulator (sim.h). The seed draws the program, its options, the
 * servers (speeds, threads) and a schedule of faults; the sequential evaluator computes the
 * expected results; then the real dispatcher (lt__sched_backend, its loop in turns) runs on
 * the virtual clock against the simulated servers: each step advances the clock to the next
 * event (a message arriving, a kernel ending, a fault, the dispatcher's tick), runs what is
 * due there, and runs one turn of the dispatcher. The invariants are checked after every
 * turn and at the end; the first violation stops the run with its report. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium/error.h>
#include "clock.h"
#include "local.h"
#include "log.h"
#include "sched_loop.h"
#include "sim.h"
#include "template.h"

#define BASE_US  1000000000LL /* the virtual clock starts here (the dispatcher's 0 is "unset") */
#define LIMIT_US (600LL * 1000000) /* a run longer than this (virtual) is a hang */
/* After the last result the run goes on until nothing of the client is out or waiting on a
 * server (stale records of recomputed tasks end too: a fetch from a holder that lost the
 * value waits out its grace, one from a paused holder its pause) and CALM_US have passed for
 * the releases to land, at most CALM_MAX_US; then the values left are checked. */
#define CALM_US     (3LL * 1000000)
#define CALM_MAX_US (45LL * 1000000)

static sim_world_t *current; /* the world whose clock the process reads */

static int64_t virtual_us(void) {
  return BASE_US + current->now;
}

/* The dispatcher's CPU clock (its own cost per hand-off, grain=auto): SIM_CPU_US a message
 * it sends or reads, about what a real one costs; from the run, so a seed replays exactly. */
#define SIM_CPU_US 2
static int64_t virtual_cpu_us(void) {
  return (int64_t)current->handled * SIM_CPU_US;
}

void sim_note(sim_world_t *w, const char *fmt, ...) {
  char *line = w->log[w->nlog++ % SIM_LOG];
  int n = snprintf(line, sizeof w->log[0], "%9.3f ms  ", (double)w->now / 1000.0);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof w->log[0] - (size_t)n, fmt, ap);
  va_end(ap);
  if (w->p.verbose) fprintf(stderr, "sim: %s\n", line);
}

void sim_violation(sim_world_t *w, const char *fmt, ...) {
  if (w->violated) return;
  w->violated = 1;
  w->violated_at = w->now;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->why, sizeof w->why, fmt, ap);
  va_end(ap);
  sim_note(w, "VIOLATION: %s", w->why);
}

/* ---- faults -------------------------------------------------------------------------------- */

enum { F_KILL, F_RESTART, F_PAUSE, F_STOP, F_NKINDS, F_MUTE = F_NKINDS, F_LOSE };

typedef struct fault {
  int kind, srv;
  int64_t len; /* a pause's length; a kill's or a stop's wait before the restart (0: none) */
} fault_t;

static void on_fault(sim_world_t *w, void *arg) {
  fault_t *f = arg;
  if (!w->tearing && !w->calm) {
    static const char *const names[] = {"kill", "restart", "pause", "stop", "mute", "lose"};
    int was_up = sim_server_up(w, f->srv);
    if (f->kind == F_RESTART && sim_server_stopping(w, f->srv)) {
      sim_at(w, w->now + 1000, on_fault, f); /* it restarts once the stop is over */
      return;
    }
    if (!was_up && f->kind != F_RESTART) {
      free(f);
      return; /* nothing to stop, pause or kill */
    }
    switch (f->kind) {
    case F_KILL:
      sim_server_kill(w, f->srv);
      break;
    case F_STOP:
      sim_server_stop(w, f->srv);
      break;
    case F_PAUSE:
      sim_server_pause(w, f->srv, w->now + f->len);
      break;
    case F_MUTE:
      if (w->mute_until[f->srv] < w->now + f->len) w->mute_until[f->srv] = w->now + f->len;
      break;
    case F_LOSE:
      w->lose_dones[f->srv]++;
      break;
    default:
      sim_server_restart(w, f->srv);
      break;
    }
    if (was_up != sim_server_up(w, f->srv) || f->kind == F_PAUSE || f->kind == F_STOP ||
        f->kind == F_MUTE || f->kind == F_LOSE) {
      w->faults += f->kind != F_RESTART;
      if (f->kind == F_PAUSE || f->kind == F_MUTE)
        sim_note(w, "fault: %s server %d for %lld ms", names[f->kind], f->srv,
                 (long long)(f->len / 1000));
      else
        sim_note(w, "fault: %s server %d", names[f->kind], f->srv);
    }
    if ((f->kind == F_KILL || f->kind == F_STOP) && f->len > 0) {
      fault_t *r = malloc(sizeof *r);
      *r = (fault_t){F_RESTART, f->srv, 0};
      sim_at(w, w->now + f->len, on_fault, r);
    }
  } else if (!w->tearing && f->kind == F_RESTART) {
    if (sim_server_stopping(w, f->srv)) {
      sim_at(w, w->now + 1000, on_fault, f);
      return;
    }
    sim_server_restart(w, f->srv); /* calm: what went down comes back */
  }
  free(f);
}

/* draw_faults schedules the seed's faults over the first `horizon` µs. Server 0 is spared
 * when there are others (one live server must be left); alone, it only pauses briefly or
 * restarts at once. */
static void draw_faults(sim_world_t *w, int64_t horizon) {
  uint32_t n = (uint32_t)sim_below(&w->rng, 8);
  for (uint32_t i = 0; i < n; i++) {
    fault_t *f = malloc(sizeof *f);
    f->srv = w->nsrv > 1 ? 1 + (int)sim_below(&w->rng, w->nsrv - 1) : 0;
    f->kind = (int)sim_below(&w->rng, F_NKINDS);
    if (f->kind == F_RESTART) f->kind = F_KILL;
    int alone = w->nsrv == 1;
    /* A restart comes at once (a supervisor) or after a while; some servers stay down. */
    int64_t back = sim_chance(&w->rng, 1, 3) ? 200 + (int64_t)sim_below(&w->rng, 5000)
                                             : 1000 + (int64_t)sim_below(&w->rng, 3000000);
    f->len = f->kind == F_PAUSE ? 10000 + (int64_t)sim_below(&w->rng, alone ? 500000 : 6000000)
             : alone || sim_chance(&w->rng, 4, 5) ? back
                                                  : 0;
    sim_at(w, (int64_t)sim_below(&w->rng, (uint64_t)horizon), on_fault, f);
  }
  /* From the second stream: in half the seeds, up to 3 stalls of a server's link to the
   * client (its heartbeats and completions come late, all at once, or after it was taken
   * for dead and greeted again). */
  uint32_t mutes =
      w->nsrv > 1 && sim_chance(&w->more, 1, 2) ? 1 + (uint32_t)sim_below(&w->more, 3) : 0;
  for (uint32_t i = 0; i < mutes; i++) {
    fault_t *f = malloc(sizeof *f);
    *f = (fault_t){F_MUTE, 1 + (int)sim_below(&w->more, w->nsrv - 1),
                   100000 + (int64_t)sim_below(&w->more, 4000000)};
    sim_at(w, (int64_t)sim_below(&w->more, (uint64_t)horizon), on_fault, f);
  }
  /* From the fifth stream: in half the seeds, up to 3 dones of a server lost on the
   * way to the client (its next one after the fault; the client learns of it from the next
   * done or heartbeat answer of that session). */
  uint32_t losses =
      w->nsrv > 1 && sim_chance(&w->fifth, 1, 2) ? 1 + (uint32_t)sim_below(&w->fifth, 3) : 0;
  for (uint32_t i = 0; i < losses; i++) {
    fault_t *f = malloc(sizeof *f);
    *f = (fault_t){F_LOSE, 1 + (int)sim_below(&w->fifth, w->nsrv - 1), 0};
    sim_at(w, (int64_t)sim_below(&w->fifth, (uint64_t)horizon), on_fault, f);
  }
}

/* ---- invariants ------------------------------------------------------------------------------ */

/* check_records: each server's counts are its records out there, and every record out is
 * where it says. */
static void check_records(sim_world_t *w, lt_sched_t *s) {
  size_t out = 0;
  for (size_t i = 0; i < s->nsrv; i++) {
    size_t n = 0;
    for (lt_instr_rec_t *r = s->srv[i].slot.out; r != NULL; r = r->out_next) {
      n++;
      if (r->conn != (int)i || r->state == LT_IR_QUEUED)
        sim_violation(w, "record %llu in the out list of entry %zu is %s on %d",
                      (unsigned long long)r->seq, i, r->state == LT_IR_QUEUED ? "queued" : "out",
                      r->conn);
    }
    out += n;
    if (s->srv[i].conn.inflight != n || s->srv[i].admitted != n)
      sim_violation(w, "entry %zu (%s): in flight %u, admitted %u, but %zu records out there", i,
                    s->srv[i].conn.endpoint ? s->srv[i].conn.endpoint : "?",
                    s->srv[i].conn.inflight, s->srv[i].admitted, n);
  }
  if (HASH_COUNT(s->inflight) != out)
    sim_violation(w, "%u records in flight, %zu in the servers' out lists", HASH_COUNT(s->inflight),
                  out);
  for (lt_instr_rec_t *r = s->fire_head; r != NULL; r = r->next)
    if (r->state != LT_IR_QUEUED)
      sim_violation(w, "record %llu is in the fireable queue but not queued",
                    (unsigned long long)r->seq);
}

/* check_left: once every task is done and the releases had time to arrive, no value of the
 * client is left on a server whose session with it is live (a session the client gave up,
 * on a paused server say, goes with the next hello, or the server's idle timeout). */
static void check_left(sim_world_t *w, lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++) {
    const lt_conn_t *c = &s->srv[i].conn;
    if (c->state != LT_CONN_READY || !lt__server_alive(s, i) || c->sock == NULL) continue;
    int srv = ((const sim_link_t *)c->sock)->srv;
    char first[200] = "";
    size_t n = sim_server_values(w, srv, first, sizeof first);
    if (n > 0) sim_violation(w, "%zu values left on server %d after the run (%s)", n, srv, first);
  }
}

/* check_holders: a reclaimed entry is free and holds nothing, and no reference of a task's
 * current run names a session whose entry was reclaimed (entries.c reclaims only what no
 * current run can hold: stale records may, they only release). */
static void check_holders(sim_world_t *w, lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++) {
    const lt_server_t *v = &s->srv[i];
    if (v->sid == 0 && (v->conn.state != LT_CONN_DEAD || v->slot.out != NULL ||
                        v->slot.successor >= 0 || v->slot.nlost > 0))
      sim_violation(w, "free entry %zu holds something", i);
  }
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (lt__rec_stale(r)) continue;
    for (uint32_t k = 0; k < r->nins; k++)
      if (r->ins[k].value == NULL && r->ins[k].at != 0 && lt__holder(s, &r->ins[k]) < 0)
        sim_violation(w, "record %llu of task %llu reads a value of a reclaimed session",
                      (unsigned long long)r->seq, (unsigned long long)r->job->num);
  }
}

/* ---- the run -------------------------------------------------------------------------------- */

typedef struct wave {
  sim_door_t *d;
  uint32_t k;
} wave_t;

static void on_wave(sim_world_t *w, void *arg) {
  wave_t *v = arg;
  if (!w->tearing) sim_door_submit(v->d, v->k);
  free(v);
}

/* next_time is when the next thing happens: an event, a message reaching the client, a
 * monitor event, the dispatcher's tick. */
static int64_t next_time(sim_world_t *w, const lt_sched_t *s) {
  int64_t t = sim_next_at(w);
  int64_t tick = s->next_tick * 1000 - BASE_US;
  if (tick < t) t = tick;
  for (size_t i = 0; i < w->nlinks; i++) {
    const sim_link_t *l = w->links[i];
    if (l->open && l->in != NULL && l->in->at < t) t = l->in->at;
    if (l->open && l->disconnected && l->disc_at < t) t = l->disc_at;
  }
  return t > w->now ? t : w->now + 1;
}

/* draw_servers draws a seed's servers (speeds, threads) and the links' delays. */
static int draw_servers(sim_world_t *w) {
  int rc = LT_OK;
  w->nsrv = w->p.servers ? w->p.servers : 1 + (uint32_t)sim_below(&w->rng, 5);
  if (w->nsrv > SIM_DRAW_MAX_SERVERS) w->nsrv = SIM_DRAW_MAX_SERVERS;
  w->nhosts = w->nsrv;
  static const double speeds[] = {0.5, 1, 1, 2, 4};
  for (uint32_t i = 0; rc == LT_OK && i < w->nsrv; i++) {
    snprintf(w->eps[i], sizeof w->eps[i], "tcp://sim%u:9000", i);
    rc = sim_server_new(w, (int)i, speeds[sim_below(&w->rng, 5)],
                        1 + (uint32_t)sim_below(&w->rng, 4));
  }
  w->delay_max = 1000 + (int64_t)sim_below(&w->rng, 50000);
  return rc;
}

static int setup(sim_world_t *w, sim_prog_t *p, lt_template_t **tmpl) {
  const char *dir = getenv("LT_SIM_MODULES") ? getenv("LT_SIM_MODULES") : LT_SIM_MODULES;
  int rc = w->p.scale ? sim_scale_draw(w, p, dir) : sim_draw(w, p, dir);
  if (rc == LT_OK) rc = lt__template_compile(tmpl, p->skel, p->opts.normal_form);
  if (rc != LT_OK) return rc;
  w->nkernels = (*tmpl)->nkernels;
  w->fns = calloc(w->nkernels, sizeof *w->fns);
  w->kcost = calloc(w->nkernels, sizeof *w->kcost);
  int *errs = calloc(w->nkernels, sizeof *errs);
  char **msgs = calloc(w->nkernels, sizeof *msgs);
  lt_modules_t *mods = NULL;
  rc = lt__local_resolve(&mods, dir, (*tmpl)->kernels, w->nkernels, w->fns, errs, msgs);
  for (uint32_t i = 0; i < w->nkernels; i++) {
    if (errs[i] != LT_OK) fprintf(stderr, "sim: kernel %s: %s\n", (*tmpl)->kernels[i], msgs[i]);
    if (errs[i] != LT_OK) rc = errs[i];
    free(msgs[i]);
    w->kcost[i] = 200.0 + (double)sim_below(&w->rng, 5000);
  }
  free(errs);
  free(msgs);
  w->mods = mods;
  if (w->p.scale) {
    if (rc == LT_OK) rc = sim_scale_servers(w);
  } else
    rc = rc == LT_OK ? draw_servers(w) : rc;
  w->fetch_timeout_us = 30LL * 1000000;
  w->client_id = sim_rand(&w->rng) | 1;
  w->secret = sim_rand(&w->rng) | 1;
  return rc;
}

/* quiet: no record of the dispatcher is out, no server holds an instruction, and no message
 * is on its way (a stray completion's release, say) nor waits for a paused server to read it. */
static int quiet(const sim_world_t *w, const lt_sched_t *s) {
  if (HASH_COUNT(s->inflight) > 0 || !sim_net_quiet(w)) return 0;
  for (uint32_t i = 0; i < w->nsrv; i++)
    if (sim_server_up(w, (int)i) &&
        (sim_server_tasks(w, (int)i) > 0 || sim_server_holds(w, (int)i)))
      return 0;
  return 1;
}

/* timed_turn runs one turn of the dispatcher, its CPU time (real) counted in `out`. */
static void timed_turn(sim_world_t *w, lt_sched_t *s, lt_turn_in_t *in, sim_result_t *out) {
  struct timespec a, b;
  if (w->p.scale) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  lt__sched_turn(s, in);
  out->turns++;
  if (!w->p.scale) return;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  out->turn_ns += (uint64_t)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
}

/* loop runs the dispatcher's turns until every task is done and the world is calm, or a
 * violation. */
static void loop(sim_world_t *w, lt_sched_t *s, sim_door_t *d, const sim_prog_t *p,
                 sim_result_t *out) {
  int64_t calm_at = 0;
  lt_turn_in_t in = {.woken = 1};
  while (!w->violated) {
    in.woken = sim_door_waiting(d);
    timed_turn(w, s, &in, out);
    /* A scale run checks now and then: every turn would cost more than the run. */
    if (!w->p.scale || out->turns % 4096 == 0) {
      check_records(w, s);
      check_holders(w, s);
    }
    if (w->violated) break;
    if (sim_door_delivered(d) == p->ntasks && calm_at == 0) {
      out->makespan_us = (double)w->now;
      calm_at = w->now + CALM_US;
      w->calm = 1;
      sim_note(w, "every task is done");
    }
    if (calm_at != 0 && w->now >= calm_at && (quiet(w, s) || w->now >= calm_at + CALM_MAX_US))
      break;
    if (w->now > LIMIT_US) {
      sim_violation(w, "the run did not end: %llu of %u tasks done after %lld s (virtual)",
                    (unsigned long long)sim_door_delivered(d), p->ntasks,
                    (long long)(LIMIT_US / 1000000));
      break;
    }
    w->now = next_time(w, s);
    sim_run_due(w);
  }
  if (!w->violated) check_left(w, s);
}

void sim_run(const sim_params_t *prm, sim_result_t *out) {
  sim_world_t *w = calloc(1, sizeof *w);
  w->p = *prm;
  w->rng.s = prm->seed;
  w->more.s = prm->seed ^ 0x6a09e667f3bcc909ull;
  w->third.s = prm->seed ^ 0xbb67ae8584caa73bull;
  w->fourth.s = prm->seed ^ 0x3c6ef372fe94f82bull;
  w->fifth.s = prm->seed ^ 0xa54ff53a5f1d36f1ull;
  lt__log_set_level(prm->verbose > 1 ? LT_LOG_DEBUG
                    : prm->verbose   ? LT_LOG_INFO
                                     : LT_LOG_ERROR + 1);
  sim_prog_t p;
  lt_template_t *tmpl = NULL;
  int rc = setup(w, &p, &tmpl);
  sim_door_t *d = rc == LT_OK ? sim_door_new(w, &p) : NULL;
  if (rc == LT_OK) rc = sim_expect(d, tmpl, &p.opts);
  if (rc != LT_OK) sim_violation(w, "cannot set the run up: %s", lt_strerror(rc));
  sim_note(w, "%s, %u tasks, %u servers; %s", p.shape, p.ntasks, w->nsrv, p.options);
  current = w;
  lt__clock_virtual(virtual_us);
  lt__clock_virtual_cpu(virtual_cpu_us);
  lt_net_t net = {&sim_net_ops, w};
  lt_backend_env_t env = {.ev = (lt_eval_t *)(void *)d,
                          .door = &sim_door_calls,
                          .opts = &p.opts,
                          .tmpl = tmpl,
                          .client_id = w->client_id,
                          .secret = w->secret,
                          .wake_fd = -1,
                          .initial_hosts = w->nsrv,
                          .net = &net};
  void *sv = NULL;
  if (!w->violated && lt__sched_backend.create(&sv, &env) != LT_OK)
    sim_violation(w, "cannot create the dispatcher");
  if (!w->violated) {
    lt_sched_t *s = sv;
    for (uint32_t k = 0; k < p.waves; k++) {
      wave_t *v = malloc(sizeof *v);
      *v = (wave_t){d, k};
      sim_at(w, k == 0 ? 0 : (int64_t)sim_below(&w->rng, 2000000), on_wave, v);
    }
    if (!w->p.scale) draw_faults(w, 3000000);
    if (!w->p.scale && sim_draw_hosts(w, 3000000) != LT_OK) sim_violation(w, "cannot add a server");
    lt__sched_start(s);
    if (w->p.scale) out->ideal_us = sim_scale_ideal(w, &p, tmpl);
    loop(w, s, d, &p, out);
    if (w->p.scale && w->p.verbose) sim_scale_profile(w, (int64_t)out->makespan_us);
    if (w->p.scale) sim_scale_use(w, (int64_t)out->makespan_us, out->use);
    out->instrs = s->instructions;
    out->backups = lt__policies_stat(s, SIZE_MAX, "backups");
    out->reruns = lt__policies_stat(s, SIZE_MAX, "reruns");
    out->migrated = lt__policies_stat(s, SIZE_MAX, "migrated");
    out->locality_kept = lt__policies_stat(s, SIZE_MAX, "locality_kept");
    out->peer_bytes = w->peer_bytes;
    sim_door_stop(d);
    lt__sched_stop(s);
  }
  /* Teardown: every server goes, every event left runs to free what it owns. */
  w->tearing = 1;
  if (sv != NULL) lt__sched_backend.destroy(sv);
  for (uint32_t i = 0; i < w->nsrv; i++)
    sim_server_kill(w, (int)i);
  w->now = INT64_MAX / 2;
  sim_run_due(w);
  lt__clock_virtual(NULL);
  lt__clock_virtual_cpu(NULL);
  current = NULL;
  out->events = w->events;
  out->work_run_us = w->work_run_us;
  out->work_us = w->work_us;
  out->faults = w->faults;
  out->tasks = d != NULL ? sim_door_delivered(d) : 0;
  out->violation = w->violated;
  out->drawn = p.ntasks;
  if (w->violated && !prm->quiet) {
    snprintf(out->what, sizeof out->what, "%s", w->why);
    fprintf(stderr, "sim: seed %llu: VIOLATION at %.3f ms (virtual): %s\n",
            (unsigned long long)prm->seed, (double)w->violated_at / 1000.0, w->why);
    fprintf(stderr, "sim: the last events:\n");
    uint64_t from = w->nlog > SIM_LOG ? w->nlog - SIM_LOG : 0;
    for (uint64_t i = from; i < w->nlog; i++)
      fprintf(stderr, "  %s\n", w->log[i % SIM_LOG]);
  }
  sim_door_free(d);
  lt__template_free(tmpl);
  sim_prog_free(&p);
  for (uint32_t i = 0; i < w->nsrv; i++)
    sim_server_free(w->srv[i]);
  sim_links_free(w);
  sim_events_free(w);
  lt__modules_free(w->mods);
  free(w->fns);
  free(w->kcost);
  free(w->busy);
  free(w);
}
