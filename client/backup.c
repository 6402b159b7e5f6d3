/* backup.c: the backup policy, copies of stragglers (option backup, on in `optimized`).
 * Once the input is closed, an instruction that has run for more than backup_factor times
 * its expected cost on its server (run: since the client saw it come into the server's
 * threads, instr.c), and that an idle server (nothing of ours there: a thread free on a
 * server whose CPU is capped is no spare CPU) would finish in less time than it has already
 * run, gets a copy there (LT_REQ_COPY). Stragglers are looked for on every tick and as soon
 * as a server comes to run nothing of ours. The core makes the two twins: the first to
 * complete wins and is applied as usual; the other is cancelled on its server and, when it
 * still completes, only releases what it left (instr.c). Instructions at any stage get
 * copies: their inputs held by the client travel with the copy, those held by a server are
 * fetched from it peer to peer (the copy leaves them there, since its twin may read them;
 * the client releases them if the copy wins), so the oil of an image whose blur ran on the
 * slow server, or the last stage of a lazy chain, is copied too. What they need: an output
 * nobody references yet (a farm's task, a chain's last stage, a stage whose successors are
 * not out), inputs made already (instr.c, lt__rec_copyable), and a chain that has completed
 * somewhere (so that there is an expected time). The idle server must finish the copy,
 * inputs fetched included, in less time than the straggler has already run. A straggler no
 * copy can stand in for — an inner stage whose output is named to successors waiting on its
 * server — has its whole task run again from the client's input (LT_REQ_RERUN, once a task)
 * when an idle server would run all of it in less time than the straggler has run: the old
 * run's records are cancelled where they wait and dropped when they come back. Kernels are
 * pure functions of their inputs, which is what makes this safe.
 * Only when it pays: a stand-in redoes at least what the straggler has done so far (the time
 * it has run, times the share of the CPU its server's latest load report shows it getting,
 * at the idle server's speed relative to its own) and, for a run again, all the task's work
 * so far, besides moving what it reads; it must still finish before the straggler would,
 * taken to need as long again as it has run. So a straggler that makes progress as expected
 * on a server as fast as the idle one (a dc step on a big input, a kernel whose time follows
 * its input: the only task of a merge sort) gets no stand-in; one on a slower server, or on
 * one whose CPU is taken from it, or stopped, or whose kernel waits, does. State: when it
 * last looked, and its counters: copies sent (in all and per server), copies that won, tasks
 * run again (stats `backups`, `backups_won`, `reruns`, each server's `copies`), counted as
 * the loop applies its requests (on_applied) and as records end (on_end). Dispatcher thread
 * only. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "policy_view.h"

/* Nothing is a straggler before BACKUP_RTTS round trips to its server (a copy costs its
 * hand-off, its twin's cancel and its result), nor before BACKUP_MIN_MS: the client sees
 * run times to the millisecond. Nor before backup_factor times its expected time and
 * BACKUP_NOISE times the servers' noise (noise_us): on a loaded machine a pause of a few
 * milliseconds, the client's or the servers' threads waiting for a CPU, is as long as many
 * fine tasks, and a pause as long again as the longest seen lately is still a pause, not a
 * straggler. */
#define BACKUP_MIN_MS 2
#define BACKUP_RTTS   4
#define BACKUP_NOISE  2

typedef struct backup_state {
  int64_t looked_ms;    /* when it last looked for stragglers */
  uint64_t backups;     /* copies of stragglers sent to idle servers */
  uint64_t backups_won; /* of those, the ones that finished first */
  uint64_t reruns;      /* tasks run again from their input for a straggling inner stage */
} backup_state_t;

typedef struct backup_srv {
  uint64_t copies; /* copies of stragglers sent here */
} backup_srv_t;

/* eligible tells whether r may get a copy: out (a migration's cancel may be on its way:
 * it may have begun before the cancel arrives, and then runs where it is), one output, and
 * copyable (instr.c). */
static int eligible(const lt_sched_t *s, const lt_instr_rec_t *r) {
  return (r->state == LT_IR_OUT || r->state == LT_IR_MIGRATING) &&
         lt__op(r->op)->outputs == LT_OP_OUT_ONE && lt__rec_copyable(s, r);
}

/* fetch_us estimates moving r's inputs held by servers other than i to server i. */
static double fetch_us(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i) {
  double bytes = 0;
  for (uint32_t k = 0; k < r->nins; k++)
    if (r->ins[k].value == NULL && lt__holder(s, &r->ins[k]) != (int)i)
      bytes += (double)r->ins[k].size;
  return bytes / LT_LINK_BPUS;
}

/* What it would cost idle server i to stand in for r now, in µs; below 0 when it cannot. */
typedef double (*stand_in_fn)(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i,
                              int64_t now_ms);

/* cheapest_idle returns the idle server, not r's and not in `taken`, that would stand in
 * for r at the least cost by `cost`, below `ran` (r, having run that long, is taken to need
 * as long again); or -1. */
static int cheapest_idle(const lt_sched_t *s, const lt_instr_rec_t *r, double ran, int64_t now_ms,
                         const unsigned char *taken, stand_in_fn cost) {
  int best = -1;
  double best_us = ran;
  for (size_t i = 0; i < s->nsrv; i++) {
    if ((int)i == r->conn || !lt__server_idle(s, i) || (taken != NULL && taken[i])) continue;
    double us = cost(s, r, i, now_ms);
    if (us >= 0 && us < best_us) {
      best = (int)i;
      best_us = us;
    }
  }
  return best;
}

/* instr_speed is how fast one instruction runs on server i: its calibrated speed (welcome)
 * on at most one core (a CPU quota below one core slows a lone instruction too); 0 when the
 * server did not say. */
static double instr_speed(const lt_sched_t *s, size_t i) {
  double cores = s->srv[i].pace.cores;
  return s->srv[i].conn.speed * (cores < 1 ? cores : 1);
}

/* speed_ratio is how long server i takes for r's chain against r's own server (below 1: i
 * is faster): from the servers' calibrated speeds, which do not depend on which inputs each
 * happened to run (a dc's steps differ in size by orders of magnitude), or, where a server
 * did not say, from the chain's costs measured there (or costed from another server's). */
static double speed_ratio(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i) {
  double mine = instr_speed(s, (size_t)r->conn), theirs = instr_speed(s, i);
  if (mine > 0 && theirs > 0) return mine / theirs;
  double there = lt__pace_cost_us(s, (size_t)r->conn, r->stages);
  return there > 0 ? lt__pace_cost_us(s, i, r->stages) / there : 1;
}

/* redo_us is what server i takes at least to redo `done_us` of work done on r's server:
 * the work does not shrink by moving, only by a faster server, at the share of its CPU its
 * instructions usually get there (a machine loaded for all is no faster elsewhere). That
 * share is taken as at least the straggler's own now: a server whose kernels wait (a sleep,
 * a call out) uses little CPU without being slow, and must not look slower than r's. */
static double redo_us(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i, double done_us) {
  double there = lt__pace_usual_share(&s->srv[i].pace);
  double here = s->srv[r->conn].pace.share_now;
  double share = there > here ? there : here;
  return share > 0 ? speed_ratio(s, r, i) * done_us / share : 0;
}

/* ran_us is how long r has run on its server, now (the time it came into a thread there). */
static double ran_us(const lt_instr_rec_t *r, int64_t now_ms) {
  return (double)(now_ms - r->run_ms) * 1000.0;
}

/* done_us is the work r has done on its server so far, in that server's time undisturbed:
 * how long it has run, at the share of the CPU its server's latest load report shows it
 * getting (about 1 while its kernels compute undisturbed, less when other load takes the
 * CPU or the server is stopped, 0 when its kernels wait). A ratio of the server's own
 * figures, whatever the machine's speed. */
static double done_us(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms) {
  return ran_us(r, now_ms) * s->srv[r->conn].pace.share_now;
}

/* copy_us: a copy of r on server i, which must take r's inputs (its fetches included) and
 * redo at least what r has done so far. */
static double copy_us(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i, int64_t now_ms) {
  lt_fire_t fi = {r->op, r->stages, r->nstages, r->ins, r->nins};
  if (!lt__server_fits(s, i, &fi)) return -1;
  double chain = lt__pace_cost_us(s, i, r->stages);
  double redo = redo_us(s, r, i, done_us(s, r, now_ms));
  return (chain > redo ? chain : redo) + fetch_us(s, r, i);
}

/* due_us is what r should take on its server: its cost there as expected when it was sent,
 * or, sent before any was measured (the first burst of lookahead), as expected now. */
static double due_us(const lt_sched_t *s, const lt_instr_rec_t *r) {
  return r->cost_known ? r->cost_us : lt__pace_cost_us(s, (size_t)r->conn, r->stages);
}

/* noise_us is the servers' noise: the least of the live servers' (pace.c,
 * lt__pace_noise_us; those never measured aside). A pause of the client's threads, or of a
 * machine the servers share with it, delays every server's pings and completions; a server
 * that is slow, stopped or starved of CPU is late on its own, and that is what a straggler
 * is, not noise. */
static double noise_us(const lt_sched_t *s, int64_t now_ms) {
  double least = 0;
  for (size_t i = 0; i < s->nsrv; i++) {
    if (!lt__server_alive(s, i) || s->srv[i].pace.noise_us <= 0) continue;
    double n = lt__pace_noise_us(&s->srv[i].pace, now_ms);
    if (least == 0 || n < least) least = n;
  }
  return least;
}

/* straggles returns how long r has run when it is a straggler (longer than BACKUP_MIN_MS
 * and BACKUP_RTTS round trips, and than backup_factor times its expected time, its chain
 * measured somewhere, plus BACKUP_NOISE times the servers' noise), else -1. */
static double straggles(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms) {
  if (r->run_ms < 0 || lt__rec_stale(r) || lt__pace_known_us(s, r->stages) <= 0) return -1;
  double ran = ran_us(r, now_ms);
  double young = BACKUP_RTTS * s->srv[r->conn].pace.rtt_us;
  if (young < BACKUP_MIN_MS * 1000.0) young = BACKUP_MIN_MS * 1000.0;
  double late = s->opts->backup_factor * due_us(s, r) + BACKUP_NOISE * noise_us(s, now_ms);
  if (ran < young || ran < late) return -1;
  return ran;
}

/* copy_target returns the idle server (not in `taken`) that should run a copy of r, an
 * eligible record, or -1. */
static int copy_target(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms,
                       const unsigned char *taken) {
  double ran = straggles(s, r, now_ms);
  return ran < 0 ? -1 : cheapest_idle(s, r, ran, now_ms, taken, copy_us);
}

/* chains_us estimates one run of each chain measured anywhere on server i (a pipeline's
 * stages are one chain each; a farm of it runs each once a task). */
static double chains_us(const lt_sched_t *s, size_t i) {
  const void **keys;
  size_t n = lt__pace_chains(s, &keys);
  double us = 0;
  for (size_t k = 0; k < n; k++)
    us += lt__pace_cost_us(s, i, keys[k]);
  return us > 0 ? us : -1; /* nothing measured yet: no estimate */
}

/* task_us estimates running r's whole task again on server i from its input: at least one
 * run of every chain, and at least the work the task has done so far (with what r has done)
 * at i's speed, besides moving the input there. */
static double task_us(const lt_sched_t *s, const lt_instr_rec_t *r, size_t i, int64_t now_ms) {
  double chains = chains_us(s, i);
  if (chains < 0) return -1; /* nothing measured yet: no estimate */
  const lt_job_rec_t *j = r->job;
  double redo = redo_us(s, r, i, j->work_us + done_us(s, r, now_ms));
  double bytes = (double)j->input->len + (j->input2 != NULL ? (double)j->input2->len : 0);
  return (chains > redo ? chains : redo) + bytes / LT_LINK_BPUS;
}

/* rerun_target returns the idle server (not in `taken`) that should run r's task again from
 * its input, or -1: r, a record no copy can stand in for (not eligible: its output is
 * named to successors on its server, or its inputs are not where a copy can read them), is
 * out alone and straggles, its task still has its input and was not run again before, and
 * the idle server would run the whole task in less time than r has already run. */
static int rerun_target(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms,
                        const unsigned char *taken) {
  if (r->state != LT_IR_OUT || r->backup || r->twin != NULL || r->job->input == NULL ||
      r->job->reruns > 0)
    return -1;
  double ran = straggles(s, r, now_ms);
  return ran < 0 ? -1 : cheapest_idle(s, r, ran, now_ms, taken, task_us);
}

int lt__sched_backup_target(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms) {
  return eligible(s, r) ? copy_target(s, r, now_ms, NULL) : -1;
}

/* any_idle tells whether some server is idle; with `since`, one that came to be idle at or
 * after that time. */
static int any_idle(const lt_sched_t *s, int64_t since) {
  for (size_t i = 0; i < s->nsrv; i++)
    if (lt__server_idle(s, i) && s->srv[i].slot.idle_ms >= since) return 1;
  return 0;
}

/* look asks for copies of the stragglers, one per idle server. */
static void look(lt_policy_t *p, int64_t now_ms) {
  const lt_sched_t *s = p->s;
  backup_state_t *st = p->state;
  st->looked_ms = now_ms;
  if (!s->door->input_closed(s->ev)) return;
  unsigned char *taken = calloc(s->nsrv ? s->nsrv : 1, 1);
  if (taken == NULL) return;
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    int copy = eligible(s, r);
    int to = copy ? copy_target(s, r, now_ms, taken) : rerun_target(s, r, now_ms, taken);
    if (to < 0) continue;
    lt_req_kind_t kind = copy ? LT_REQ_COPY : LT_REQ_RERUN;
    taken[to] = 1;
    lt__policy_ask(
        p, &(lt_req_t){.kind = kind, .seq = r->seq, .task = r->job->num, .server = (size_t)to});
  }
  free(taken);
}

/* ready tells whether stragglers may be looked for now: nothing waits for placement and
 * something is out. */
static int ready(const lt_sched_t *s) {
  return s->fire_head == NULL && s->inflight != NULL;
}

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  if (ready(p->s) && any_idle(p->s, 0)) look(p, now_ms);
}

/* As soon as a server comes to run nothing of ours (not every turn it stays so). */
static void on_idle(lt_policy_t *p, int64_t now_ms) {
  backup_state_t *st = p->state;
  if (ready(p->s) && any_idle(p->s, st->looked_ms)) look(p, now_ms);
}

/* A copy that went out, or a task that runs again. */
static void on_applied(lt_policy_t *p, const lt_req_t *q) {
  backup_state_t *st = p->state;
  if (q->kind == LT_REQ_RERUN) {
    st->reruns++;
  } else if (q->kind == LT_REQ_COPY) {
    st->backups++;
    ((backup_srv_t *)lt__policy_server(p, q->server))->copies++;
  }
}

/* A copy wins when its end decides the twins (lt__end_decides), or when the original's
 * does not: the copy then carries on alone as the instruction. */
static void on_end(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                   const lt_completion_t *cp) {
  (void)idx;
  if (r->twin == NULL) return;
  int decides = lt__end_decides(r, why, cp);
  if (decides ? r->backup : r->twin->backup) ((backup_state_t *)p->state)->backups_won++;
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx != SIZE_MAX) {
    out[0] = (lt_stat_t){"copies", 0, ((const backup_srv_t *)lt__policy_server(p, idx))->copies};
    return 1;
  }
  const backup_state_t *st = p->state;
  out[0] = (lt_stat_t){"backups", 0, st->backups};
  out[1] = (lt_stat_t){"backups_won", 0, st->backups_won};
  out[2] = (lt_stat_t){"reruns", 0, st->reruns};
  return 3;
}

static int enabled(const lt_options_t *o) {
  return o->backup && o->lookahead;
}

const lt_policy_ops_t lt__policy_backup = {
    .name = "backup",
    .state_size = sizeof(backup_state_t),
    .server_size = sizeof(backup_srv_t),
    .enabled = enabled,
    .on_idle = on_idle,
    .on_tick = on_tick,
    .on_end = on_end,
    .on_applied = on_applied,
    .stats = stats,
};
