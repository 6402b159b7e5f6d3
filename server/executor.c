/* executor.c: the worker pool (see executor.h). One mutex + condvar guard the groups' FIFOs
 * of queued units (a job and the gang that rides with it) and the list of groups that have
 * some, another mutex the list of finished jobs; uv_async_send wakes the loop, which takes the
 * whole finished list at once. A worker takes a unit, runs its jobs back to back and hands
 * them back together: one wake-up and one completion hand-off for the whole gang. Workers
 * touch only the jobs they run and their slot in the crash log; they never see the store, the
 * sessions or the socket. The hot hand-offs (executor.h) are here too: a worker's hot wait in
 * worker_main, the loop's in on_prepare, both budgets from the estimates in `struct
 * lt_executor`, measured in this run. */
#include "executor.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lithium/error.h>
#include "clock.h"
#include "crashlog.h"
#include "log.h"

/* A job's state is written under qlock by workers, and by the loop thread otherwise. TAKEN:
 * a worker has its gang and runs it next; it can no longer be canceled. */
enum { JOB_IDLE = 0, JOB_QUEUED, JOB_TAKEN, JOB_RUNNING };

/* Hot waits (executor.h). Every budget is a multiple of a time measured in this run:
 * - A worker that runs out of work waits hot for the next job as long as the gaps measured
 *   between the pool running dry and the next submit say one comes: their mean plus
 *   GAP_DEVS mean deviations (TCP's retransmission timeout over its RTT, RFC 6298: most
 *   gaps of a steady stream of lone jobs fall inside it). It does so only when that budget
 *   is at most SPIN_WORTH measured wake-ups of a sleeping worker: a hot wait is bought with
 *   a core, and the latency it saves is one such wake-up, so a longer wait would cost more
 *   CPU than a client's round trip is worth (and a machine where wake-ups are slow, loaded
 *   or virtual, gets a longer budget, not a cliff).
 * - The loop thread, before it sleeps, waits hot for a job it submitted in that turn for at
 *   most one measured wake-up of the loop (ski rental: a job back sooner saves the wake-up,
 *   a later one costs at most one wake-up more than sleeping at once).
 * - SPIN_MAX_US bounds both whatever was measured: not a speed guess but the scheduler's
 *   tick (1 ms at CONFIG_HZ=1000, 4 ms at 250), past which a sleeping thread's wake-up is
 *   no longer dearer than the time spun, and the most a hot wait may hold the loop thread
 *   from the sockets.
 * Until the first measurements nothing waits hot. */
#define GAP_DEVS    4
#define SPIN_WORTH  8
#define SPIN_MAX_US 1000u

/* A measured time's smoothed mean and mean deviation, with TCP's gains (RFC 6298: 1/8 and
 * 1/4), so that old samples fade and one outlier moves it little. */
typedef struct estimate {
  double mean, dev;
  uint64_t n;
} estimate_t;

static void estimate_add(estimate_t *e, double x) {
  if (e->n++ == 0) {
    e->mean = x;
    e->dev = x / 2;
    return;
  }
  double d = x > e->mean ? x - e->mean : e->mean - x;
  e->dev += (d - e->dev) / 4;
  e->mean += (x - e->mean) / 8;
}

/* A worker reads its thread's CPU clock (a system call, not a vDSO read) once per this much
 * kernel time, or after any job this long, and gives the jobs in between the CPU share of
 * that span: short kernels then cost no system call each. A sampling interval, not a gate:
 * the share is the same on a machine of any speed, and a slower one pays more per reading,
 * still a small fraction of 2 ms (docs/architecture.md, "Thresholds"). */
#define CPU_SPAN_US 2000u
#define CPU_LONG_US 500u

struct lt_executor {
  uv_async_t async;
  uv_prepare_t prepare; /* the loop's hot wait, before it polls */
  uv_check_t check;     /* after the poll: the loop is awake */
  int open_handles;     /* of the three, not yet closed */
  lt_executor_done_cb cb;
  void *data;
  double slowdown;

  pthread_mutex_t qlock;
  pthread_cond_t qcond;
  lt_exgroup_t nogroup; /* jobs submitted without a group */
  lt_exgroup_t *groups; /* groups with queued jobs */
  uint64_t vclock;      /* service time of the group served last: where idle ones restart */
  lt_job_t **running;   /* by worker index, under qlock */
  int idle;             /* workers sleeping on qcond: a submit signals only when one is */
  int spinning;         /* workers waiting hot (at most one), under qlock */
  bool stop;
  /* Bumped by every submit, widened limit and stop: what a hot worker watches. */
  atomic_uint gen;
  estimate_t wake;          /* a sleeping worker's wake-up: submit to take, under qlock */
  estimate_t gap;           /* the pool running dry to the next submit, under qlock */
  uint64_t dry_us;          /* when the pool last ran dry (nothing running or queued), 0: not */
  _Atomic uint64_t spin_us; /* a worker's hot-wait budget, from wake and gap */
  _Atomic uint64_t n_hot, n_woken, n_spins, n_loop_hot;

  /* The loop thread's side. */
  bool submitted;                /* a unit was submitted this turn (loop thread) */
  estimate_t loop_wake;          /* hand-back to delivery, the loop asleep (loop thread) */
  _Atomic uint64_t loop_wake_ns; /* loop_wake.mean in ns, for lt__executor_handoffs */
  atomic_bool polling;           /* the loop is in (or on its way to) its poll */

  pthread_mutex_t dlock;
  lt_job_t *dhead, *dtail;
  bool loop_hot;      /* the loop waits hot for the done list: no async send (dlock) */
  atomic_bool dready; /* the done list is not empty: what the hot loop watches */
  uint64_t dsince_us; /* when the done list last went from empty to not (dlock) */
  bool dasleep;       /* the loop was polling then: the delivery measures its wake-up */

  /* The jobs running (high 32 bits) and queued (low 32 bits), one word so that a reader of
   * the load report sees a job move from queued to running in one step, never in neither. */
  _Atomic uint64_t counts;
  atomic_uint next_worker; /* each worker takes its index from it as it starts */
  int nthreads;
  pthread_t *threads;
};

/* One worker's estimate of the CPU share its kernels get (see CPU_SPAN_US). */
typedef struct cpu_share {
  uint64_t cpu0; /* the thread's CPU clock at the last reading */
  uint64_t busy; /* kernel time since then */
  double ratio;  /* CPU / kernel time over the last span read, at most 1 */
} cpu_share_t;

uint64_t lt__executor_now_us(void) {
  return (uint64_t)lt__clock_us();
}

/* cpu_of returns the CPU time of a job that ran `svc` us, reading the clock when due. */
static uint64_t cpu_of(cpu_share_t *c, uint64_t svc) {
  c->busy += svc;
  if (c->busy >= CPU_SPAN_US || svc >= CPU_LONG_US) {
    uint64_t now = (uint64_t)lt__clock_thread_cpu_us();
    double r = c->busy > 0 ? (double)(now - c->cpu0) / (double)c->busy : 1.0;
    c->ratio = r > 1.0 ? 1.0 : r;
    c->cpu0 = now;
    c->busy = 0;
  }
  return (uint64_t)((double)svc * c->ratio + 0.5);
}

/* slow_down emulates a host `f` times slower after a kernel that ran from t0 to t1 (wall
 * clock, us) from thread CPU time c0: it stays busy until (f - 1) times the kernel's wall
 * time has passed and it has used (f - 1) times the kernel's CPU time, as a slower CPU would.
 * The CPU condition is what keeps the emulation true when threads share a CPU (a cgroup quota,
 * other processes): a busy wait by the wall clock alone is paid for partly by the threads that
 * run while it is preempted, and a server "4 x slower" among three on one CPU then did barely
 * less work than the others. The wall condition stretches kernels that wait (sleep, call
 * out), which use no CPU. Returns the wall clock when done. */
static uint64_t slow_down(double f, uint64_t t0, uint64_t t1, uint64_t c0) {
  uint64_t c1 = (uint64_t)lt__clock_thread_cpu_us();
  uint64_t until = t1 + (uint64_t)((double)(t1 - t0) * (f - 1.0));
  uint64_t cpu_until = c1 + (uint64_t)((double)(c1 - c0) * (f - 1.0));
  uint64_t now;
  while ((now = lt__executor_now_us()) < until || (uint64_t)lt__clock_thread_cpu_us() < cpu_until) {
  }
  return now;
}

/* A kernel chain's times. */
typedef struct run_times {
  uint64_t service_us, start_us, cpu_us;
} run_times_t;

/* run_chain runs the job's stages on `n` inputs into *r on worker `worker`, the crash log
 * naming `seq`; `cpu` is the worker's CPU share. */
static run_times_t run_chain(lt_executor_t *ex, const lt_job_t *job, const lt_bytes_t *in,
                             uint32_t n, uint64_t seq, uint32_t worker, cpu_share_t *cpu,
                             lt_exec_result_t *r) {
  bool slow = ex->slowdown > 1.0;
  uint64_t c0 = slow ? (uint64_t)lt__clock_thread_cpu_us() : 0;
  uint64_t t0 = lt__executor_now_us();
  lt__crashlog_enter(worker, job->owner, seq);
  lt__exec_run_owned(job->op, job->stages, job->nstages, in, job->grant, n, r);
  lt__crashlog_leave(worker);
  uint64_t t1 = lt__executor_now_us();
  if (slow) t1 = slow_down(ex->slowdown, t0, t1, c0);
  return (run_times_t){t1 - t0, t0, cpu_of(cpu, t1 - t0)};
}

/* member_take keeps what member m's run made: its one output, or its failure. */
static void member_take(lt_job_member_t *m, lt_exec_result_t *r) {
  m->ran = true;
  m->status = r->status;
  if (r->status == LT_OK && r->nout != 1) {
    m->status = LT_EKERNEL;
    snprintf(r->errmsg, sizeof r->errmsg, "kernel made %u outputs, expected 1", r->nout);
  }
  if (m->status == LT_OK) {
    m->out = r->out[0];
    m->outlen = r->outlen[0];
    r->out[0] = NULL;
  } else {
    m->errmsg = strdup(r->errmsg);
  }
  lt__exec_result_clear(r);
}

/* next_member makes member i the one running now, unless the pack was cut. */
static bool next_member(lt_executor_t *ex, lt_job_t *job, uint32_t i) {
  pthread_mutex_lock(&ex->qlock);
  bool go = !job->cut;
  if (go) {
    job->member = i;
    job->since_us = lt__executor_now_us();
  }
  pthread_mutex_unlock(&ex->qlock);
  return go;
}

/* run_pack runs the members of a pack in order, each on its own inputs, until one is cut. */
static void run_pack(lt_executor_t *ex, lt_job_t *job, uint32_t worker, cpu_share_t *cpu) {
  uint32_t k = job->npack, n = job->ninputs / k;
  memset(&job->result, 0, sizeof job->result);
  job->result.answer = -1;
  job->worker = worker; /* before member 1 starts: read with the members a cut makes final */
  job->service_us = job->cpu_us = job->start_us = 0;
  for (uint32_t i = 0; i < k && (i == 0 || next_member(ex, job, i)); i++) {
    lt_job_member_t *m = &job->pack[i];
    if (m->skip) continue;
    lt_exec_result_t r;
    run_times_t t = run_chain(ex, job, job->inputs + (size_t)i * n, n, m->seq, worker, cpu, &r);
    member_take(m, &r);
    m->service_us = t.service_us;
    m->start_us = t.start_us;
    m->cpu_us = t.cpu_us;
    job->service_us += t.service_us;
    job->cpu_us += t.cpu_us;
    if (job->start_us == 0) job->start_us = t.start_us;
  }
}

static void run_job(lt_executor_t *ex, lt_job_t *job, uint32_t worker, cpu_share_t *cpu) {
  if (job->npack > 1) {
    run_pack(ex, job, worker, cpu);
    return;
  }
  run_times_t t =
      run_chain(ex, job, job->inputs, job->ninputs, job->seq, worker, cpu, &job->result);
  job->service_us = t.service_us;
  job->cpu_us = t.cpu_us;
  job->start_us = t.start_us;
  job->worker = worker;
}

/* group_of returns the group a job queues in. */
static lt_exgroup_t *group_of(lt_executor_t *ex, lt_job_t *job) {
  return job->group != NULL ? job->group : &ex->nogroup;
}

static bool has_room(const lt_exgroup_t *g) {
  return g->limit == 0 || g->running < g->limit;
}

/* eligible returns the first queued job of the group with room that has received the least
 * service, or NULL. Under qlock. */
static lt_job_t *eligible(lt_executor_t *ex) {
  lt_exgroup_t *best = NULL;
  for (lt_exgroup_t *g = ex->groups; g != NULL; g = g->anext)
    if (has_room(g) && (best == NULL || g->vtime < best->vtime)) best = g;
  return best != NULL ? best->qhead : NULL;
}

/* enqueue appends a job to its group's FIFO; a group that had none joins the served ones,
 * level with the group served last. Under qlock. */
static void enqueue(lt_executor_t *ex, lt_job_t *job) {
  lt_exgroup_t *g = group_of(ex, job);
  job->qgroup = g;
  job->next = NULL;
  job->prev = g->qtail;
  if (g->qtail)
    g->qtail->next = job;
  else
    g->qhead = job;
  g->qtail = job;
  if (!g->listed) {
    if (g->vtime < ex->vclock) g->vtime = ex->vclock;
    g->aprev = NULL;
    g->anext = ex->groups;
    if (ex->groups) ex->groups->aprev = g;
    ex->groups = g;
    g->listed = true;
  }
}

/* unlink_job takes a queued job out of its group's FIFO, and an emptied group out of the
 * served ones. Under qlock. */
static void unlink_job(lt_executor_t *ex, lt_job_t *job) {
  lt_exgroup_t *g = job->qgroup;
  if (job->prev)
    job->prev->next = job->next;
  else
    g->qhead = job->next;
  if (job->next)
    job->next->prev = job->prev;
  else
    g->qtail = job->prev;
  job->next = job->prev = NULL;
  job->qgroup = NULL;
  if (g->qhead == NULL && g->listed) {
    if (g->aprev)
      g->aprev->anext = g->anext;
    else
      ex->groups = g->anext;
    if (g->anext) g->anext->aprev = g->aprev;
    g->anext = g->aprev = NULL;
    g->listed = false;
  }
}

/* start_job makes `job`, taken, the one worker `self` runs now, counted in its group.
 * Under qlock. */
static void start_job(lt_executor_t *ex, lt_job_t *job, uint32_t self) {
  lt_exgroup_t *g = job->group;
  if (g != NULL) {
    g->running++;
    g->vtime += 1; /* at least 1 us a job: groups of instant kernels take turns too */
    if (g->vtime > ex->vclock) ex->vclock = g->vtime;
  }
  job->state = JOB_RUNNING;
  job->since_us = lt__executor_now_us();
  job->member = 0;
  ex->running[self] = job;
}

/* end_job counts a job that ran out of its group. Under qlock. */
static void end_job(lt_executor_t *ex, lt_job_t *job, uint32_t self) {
  if (job->group != NULL) {
    job->group->running--;
    job->group->vtime += job->service_us;
  }
  job->group = NULL; /* counted out: a detach from now on has nothing to do */
  ex->running[self] = NULL;
}

/* take unlinks the queued unit `job` and marks its gang taken. Under qlock. */
static void take(lt_executor_t *ex, lt_job_t *job) {
  lt_exgroup_t *g = job->qgroup;
  unlink_job(ex, job);
  uint32_t n = 0;
  for (lt_job_t *m = job; m != NULL; m = m->gang) {
    m->state = JOB_TAKEN;
    m->leader = NULL;
    if (m->group == NULL) m->group = g; /* counted in nogroup until it is back */
    n++;
  }
  /* Queued to running in one step: run_unit runs it next, under the same qlock. */
  atomic_fetch_add(&ex->counts, ((uint64_t)n << 32) - n);
}

/* hand_back appends the finished jobs first..last (linked by `next`) to the done list and
 * wakes the loop, unless it waits hot for them. */
static void hand_back(lt_executor_t *ex, lt_job_t *first, lt_job_t *last, uint32_t n) {
  pthread_mutex_lock(&ex->dlock);
  if (ex->dtail) {
    ex->dtail->next = first;
  } else {
    ex->dhead = first;
    ex->dsince_us = lt__executor_now_us();
    ex->dasleep = atomic_load(&ex->polling);
  }
  ex->dtail = last;
  atomic_fetch_sub(&ex->counts, (uint64_t)n << 32);
  atomic_store(&ex->dready, true);
  bool wake = !ex->loop_hot;
  pthread_mutex_unlock(&ex->dlock);
  if (wake) uv_async_send(&ex->async);
}

/* run_unit runs a taken unit's jobs in order, under qlock only between them, and returns
 * with qlock held after the last. */
static void run_unit(lt_executor_t *ex, lt_job_t *unit, uint32_t self, cpu_share_t *cpu) {
  lt_job_t *first = unit, *last = NULL;
  uint32_t n = 0;
  for (lt_job_t *m = unit; m != NULL; m = m->gang)
    n++; /* counted running since take() */
  start_job(ex, unit, self);
  pthread_mutex_unlock(&ex->qlock);
  for (lt_job_t *job = unit; job != NULL;) {
    run_job(ex, job, self, cpu);
    lt_job_t *next = job->gang;
    pthread_mutex_lock(&ex->qlock);
    end_job(ex, job, self);
    job->gang = NULL;
    job->next = next;
    last = job;
    if (next != NULL) {
      start_job(ex, next, self);
      pthread_mutex_unlock(&ex->qlock);
    }
    job = next;
  }
  last->next = NULL;
  hand_back(ex, first, last, n);
}

/* spin_budget is a worker's hot-wait budget in us from what was measured (see SPIN_WORTH),
 * 0 when it should sleep at once. Under qlock. */
static uint64_t spin_budget(const lt_executor_t *ex) {
  if (ex->wake.n == 0 || ex->gap.n == 0) return 0;
  double want = ex->gap.mean + GAP_DEVS * ex->gap.dev;
  if (want > SPIN_WORTH * ex->wake.mean || want > SPIN_MAX_US) return 0;
  return (uint64_t)want + 1;
}

/* wait_hot waits, qlock released, until a submit or a stop bumps ex->gen or `budget` us have
 * passed, yielding the CPU between looks (a loaded machine's other threads run meanwhile).
 * Called and returns under qlock, as the one worker counted in ex->spinning. */
static void wait_hot(lt_executor_t *ex, uint64_t budget) {
  unsigned seen = atomic_load(&ex->gen);
  ex->spinning++;
  atomic_fetch_add(&ex->n_spins, 1);
  pthread_mutex_unlock(&ex->qlock);
  uint64_t end = lt__executor_now_us() + budget;
  while (atomic_load(&ex->gen) == seen && lt__executor_now_us() < end)
    sched_yield();
  pthread_mutex_lock(&ex->qlock);
  ex->spinning--;
}

/* ran_dry notes when the pool has nothing running or queued: the start of a gap. Under
 * qlock. */
static void ran_dry(lt_executor_t *ex) {
  if (atomic_load(&ex->counts) == 0 && ex->dry_us == 0) ex->dry_us = lt__executor_now_us();
}

static void *worker_main(void *arg) {
  lt_executor_t *ex = arg;
  uint32_t self = atomic_fetch_add(&ex->next_worker, 1);
  cpu_share_t cpu = {.cpu0 = (uint64_t)lt__clock_thread_cpu_us(), .ratio = 1.0};
  void *altstack = lt__crashlog_thread_start(); /* a kernel's stack overflow is named too */
  pthread_mutex_lock(&ex->qlock);
  for (;;) {
    lt_job_t *job = NULL;
    bool hot = false;
    uint64_t slept_at = 0; /* when this worker last went to sleep, 0: it did not */
    if (!ex->stop && (job = eligible(ex)) == NULL && ex->spinning == 0) {
      /* Out of work: one worker at a time waits hot for the next lone job. */
      uint64_t budget = atomic_load(&ex->spin_us);
      if (budget > 0) {
        wait_hot(ex, budget);
        hot = true;
      }
    }
    while (!ex->stop && (job = eligible(ex)) == NULL) {
      hot = false;
      ex->idle++;
      slept_at = lt__executor_now_us();
      pthread_cond_wait(&ex->qcond, &ex->qlock);
      ex->idle--;
    }
    if (ex->stop) break;
    if (hot) {
      atomic_fetch_add(&ex->n_hot, 1);
    } else if (slept_at != 0) {
      atomic_fetch_add(&ex->n_woken, 1);
      uint64_t now = lt__executor_now_us();
      if (job->queued_us >= slept_at && now >= job->queued_us) {
        estimate_add(&ex->wake, (double)(now - job->queued_us));
        atomic_store(&ex->spin_us, spin_budget(ex));
      }
    }
    take(ex, job);
    run_unit(ex, job, self, &cpu);
    ran_dry(ex);
  }
  pthread_mutex_unlock(&ex->qlock);
  lt__crashlog_thread_end(altstack);
  return NULL;
}

/* deliver takes the done list and hands it to the callback; `hot`: the loop waited hot for
 * it, else a delivery after the loop slept measures the loop's wake-up. */
static void deliver(lt_executor_t *ex, bool hot) {
  pthread_mutex_lock(&ex->dlock);
  lt_job_t *list = ex->dhead;
  uint64_t since = ex->dsince_us;
  bool asleep = ex->dasleep;
  ex->dhead = ex->dtail = NULL;
  atomic_store(&ex->dready, false);
  pthread_mutex_unlock(&ex->dlock);
  if (list == NULL) return;
  if (hot) {
    atomic_fetch_add(&ex->n_loop_hot, 1);
  } else if (asleep) {
    uint64_t now = lt__executor_now_us();
    if (now >= since) {
      estimate_add(&ex->loop_wake, (double)(now - since));
      atomic_store(&ex->loop_wake_ns, (uint64_t)(ex->loop_wake.mean * 1000.0));
    }
  }
  for (lt_job_t *j = list; j; j = j->next)
    j->state = JOB_IDLE;
  ex->cb(ex, list, ex->data);
}

static void on_async(uv_async_t *h) {
  lt_executor_t *ex = h->data;
  atomic_store(&ex->polling, false);
  deliver(ex, false);
}

/* on_prepare runs as the loop is about to poll. After a turn that submitted work it waits
 * hot for a completion for at most one measured wake-up of the loop (see SPIN_MAX_US), and
 * delivers what came back; then it marks the loop as polling, so that a hand-back measures
 * the wake-up it causes. */
static void on_prepare(uv_prepare_t *h) {
  lt_executor_t *ex = h->data;
  if (ex->submitted) {
    ex->submitted = false;
    uint64_t budget = (uint64_t)ex->loop_wake.mean;
    if (budget > SPIN_MAX_US) budget = SPIN_MAX_US;
    if (budget > 0 && ex->loop_wake.n > 0 && atomic_load(&ex->counts) != 0) {
      pthread_mutex_lock(&ex->dlock);
      ex->loop_hot = true;
      pthread_mutex_unlock(&ex->dlock);
      uint64_t end = lt__executor_now_us() + budget;
      while (!atomic_load(&ex->dready) && lt__executor_now_us() < end)
        sched_yield();
      pthread_mutex_lock(&ex->dlock);
      ex->loop_hot = false; /* from here a hand-back sends the async again */
      pthread_mutex_unlock(&ex->dlock);
      if (atomic_load(&ex->dready)) deliver(ex, true);
    }
  }
  atomic_store(&ex->polling, true);
}

static void on_check(uv_check_t *h) {
  lt_executor_t *ex = h->data;
  atomic_store(&ex->polling, false);
}

static void stop_workers(lt_executor_t *ex) {
  pthread_mutex_lock(&ex->qlock);
  ex->stop = true;
  atomic_fetch_add(&ex->gen, 1);
  pthread_cond_broadcast(&ex->qcond);
  pthread_mutex_unlock(&ex->qlock);
  for (int i = 0; i < ex->nthreads; i++)
    pthread_join(ex->threads[i], NULL);
  ex->nthreads = 0;
}

static void destroy(lt_executor_t *ex) {
  pthread_mutex_destroy(&ex->qlock);
  pthread_cond_destroy(&ex->qcond);
  pthread_mutex_destroy(&ex->dlock);
  free(ex->threads);
  free(ex->running);
  free(ex);
}

static void on_closed(uv_handle_t *h) {
  lt_executor_t *ex = h->data;
  if (--ex->open_handles == 0) destroy(ex);
}

/* close_handles closes the loop's handles of the executor; the last close frees it. */
static void close_handles(lt_executor_t *ex) {
  uv_close((uv_handle_t *)&ex->async, on_closed);
  uv_close((uv_handle_t *)&ex->prepare, on_closed);
  uv_close((uv_handle_t *)&ex->check, on_closed);
}

int lt__executor_new(lt_executor_t **out, uv_loop_t *loop, int nthreads, double slowdown,
                     lt_executor_done_cb cb, void *data) {
  *out = NULL;
  if (nthreads < 1 || cb == NULL) return LT_EINVAL;
  lt_executor_t *ex = calloc(1, sizeof *ex);
  if (ex == NULL) return LT_ENOMEM;
  ex->threads = calloc((size_t)nthreads, sizeof *ex->threads);
  ex->running = calloc((size_t)nthreads, sizeof *ex->running);
  if (ex->threads == NULL || ex->running == NULL) {
    free(ex->threads);
    free(ex->running);
    free(ex);
    return LT_ENOMEM;
  }
  ex->cb = cb;
  ex->data = data;
  ex->slowdown = slowdown < 1.0 ? 1.0 : slowdown;
  pthread_mutex_init(&ex->qlock, NULL);
  pthread_cond_init(&ex->qcond, NULL);
  pthread_mutex_init(&ex->dlock, NULL);
  atomic_init(&ex->counts, 0);
  atomic_init(&ex->next_worker, 0);
  atomic_init(&ex->gen, 0);
  atomic_init(&ex->spin_us, 0);
  atomic_init(&ex->n_hot, 0);
  atomic_init(&ex->n_woken, 0);
  atomic_init(&ex->n_spins, 0);
  atomic_init(&ex->n_loop_hot, 0);
  atomic_init(&ex->loop_wake_ns, 0);
  atomic_init(&ex->polling, false);
  atomic_init(&ex->dready, false);
  int rc = uv_async_init(loop, &ex->async, on_async);
  if (rc != 0) {
    lt__log(LT_LOG_ERROR, "uv_async_init: %s", uv_strerror(rc));
    destroy(ex);
    return LT_EIO;
  }
  /* Neither keeps the loop alive: they only watch its turns. */
  uv_prepare_init(loop, &ex->prepare);
  uv_check_init(loop, &ex->check);
  uv_prepare_start(&ex->prepare, on_prepare);
  uv_check_start(&ex->check, on_check);
  uv_unref((uv_handle_t *)&ex->prepare);
  uv_unref((uv_handle_t *)&ex->check);
  ex->async.data = ex->prepare.data = ex->check.data = ex;
  ex->open_handles = 3;
  for (int i = 0; i < nthreads; i++) {
    rc = pthread_create(&ex->threads[i], NULL, worker_main, ex);
    if (rc != 0) {
      lt__log(LT_LOG_ERROR, "cannot start worker thread %d of %d: %s", i + 1, nthreads,
              strerror(rc));
      stop_workers(ex);
      close_handles(ex);
      return LT_EIO;
    }
    ex->nthreads = i + 1;
  }
  *out = ex;
  return LT_OK;
}

/* queue_unit queues `job` and the gang riding with it. Under qlock. */
static void queue_unit(lt_executor_t *ex, lt_job_t *job, uint64_t now) {
  uint32_t n = 0;
  for (lt_job_t *m = job; m != NULL; m = m->gang) {
    m->state = JOB_QUEUED;
    m->cut = false;
    m->leader = m == job ? NULL : job;
    m->queued_us = now;
    n++;
  }
  enqueue(ex, job);
  atomic_fetch_add(&ex->counts, n);
}

void lt__executor_submit(lt_executor_t *ex, lt_job_t *job) {
  lt__executor_submit_list(ex, &job, 1);
}

void lt__executor_submit_list(lt_executor_t *ex, lt_job_t *const *units, uint32_t n) {
  if (n == 0) return;
  uint64_t now = lt__executor_now_us();
  pthread_mutex_lock(&ex->qlock);
  if (ex->dry_us != 0) {
    /* The gap a hot worker would have had to bridge; one longer than any budget counts as
     * the longest (an idle hour must not weigh as much as an hour). */
    uint64_t gap = now >= ex->dry_us ? now - ex->dry_us : 0;
    estimate_add(&ex->gap, (double)(gap < 2 * SPIN_MAX_US ? gap : 2 * SPIN_MAX_US));
    atomic_store(&ex->spin_us, spin_budget(ex));
    ex->dry_us = 0;
  }
  for (uint32_t i = 0; i < n; i++)
    queue_unit(ex, units[i], now);
  atomic_fetch_add(&ex->gen, 1);
  /* A busy worker takes a unit when it finishes its own, and a hot one takes one with no
   * wake-up: waking one costs a futex call, so wake no more workers than the units left. */
  uint32_t left = n > (uint32_t)ex->spinning ? n - (uint32_t)ex->spinning : 0;
  uint32_t wake = (uint32_t)ex->idle < left ? (uint32_t)ex->idle : left;
  for (uint32_t i = 0; i < wake; i++)
    pthread_cond_signal(&ex->qcond);
  pthread_mutex_unlock(&ex->qlock);
  ex->submitted = true;
}

/* ungang takes queued member `job` out of its leader's gang. Under qlock. */
static void ungang(lt_job_t *job) {
  lt_job_t **p = &job->leader->gang;
  while (*p != job)
    p = &(*p)->gang;
  *p = job->gang;
  job->gang = NULL;
  job->leader = NULL;
}

/* promote puts the first member of queued leader `job`'s gang in its place in the FIFO;
 * `job` is left alone, out of the queue. Under qlock. */
static void promote(lt_job_t *job) {
  lt_job_t *heir = job->gang;
  lt_exgroup_t *g = job->qgroup;
  heir->leader = NULL;
  for (lt_job_t *m = heir->gang; m != NULL; m = m->gang)
    m->leader = heir;
  heir->qgroup = g;
  heir->prev = job->prev;
  heir->next = job->next;
  if (job->prev)
    job->prev->next = heir;
  else
    g->qhead = heir;
  if (job->next)
    job->next->prev = heir;
  else
    g->qtail = heir;
  job->next = job->prev = NULL;
  job->qgroup = NULL;
  job->gang = NULL;
}

bool lt__executor_cancel(lt_executor_t *ex, lt_job_t *job) {
  bool removed = false;
  pthread_mutex_lock(&ex->qlock);
  if (job->state == JOB_QUEUED) {
    if (job->leader != NULL)
      ungang(job);
    else if (job->gang != NULL)
      promote(job);
    else
      unlink_job(ex, job);
    job->state = JOB_IDLE;
    atomic_fetch_sub(&ex->counts, 1);
    removed = true;
  }
  pthread_mutex_unlock(&ex->qlock);
  return removed;
}

void lt__executor_set_limit(lt_executor_t *ex, lt_exgroup_t *g, uint32_t limit) {
  pthread_mutex_lock(&ex->qlock);
  /* Only a window that really widened may have jobs to start: waking the idle workers on
   * every EXECUTE would cost each message a round of context switches. */
  bool wider = g->limit != 0 && (limit == 0 || limit > g->limit);
  g->limit = limit;
  if (wider) atomic_fetch_add(&ex->gen, 1);
  if (wider && ex->idle > 0) pthread_cond_broadcast(&ex->qcond);
  pthread_mutex_unlock(&ex->qlock);
}

void lt__executor_detach(lt_executor_t *ex, lt_job_t *job) {
  pthread_mutex_lock(&ex->qlock);
  if (job->group != NULL && job->state == JOB_RUNNING) job->group->running--;
  /* A queued job of the group is canceled by its owner before the group goes. */
  job->group = NULL;
  pthread_mutex_unlock(&ex->qlock);
}

void lt__executor_handoffs(lt_executor_t *ex, lt_executor_handoffs_t *out) {
  pthread_mutex_lock(&ex->qlock);
  out->wake_us = ex->wake.mean;
  out->gap_us = ex->gap.mean;
  out->spin_us = atomic_load(&ex->spin_us);
  pthread_mutex_unlock(&ex->qlock);
  out->hot = atomic_load(&ex->n_hot);
  out->woken = atomic_load(&ex->n_woken);
  out->loop_hot = atomic_load(&ex->n_loop_hot);
  out->spins = atomic_load(&ex->n_spins);
  out->loop_wake_us = (double)atomic_load(&ex->loop_wake_ns) / 1000.0;
}

uint32_t lt__executor_spinning(lt_executor_t *ex) {
  pthread_mutex_lock(&ex->qlock);
  uint32_t n = (uint32_t)ex->spinning;
  pthread_mutex_unlock(&ex->qlock);
  return n;
}

uint32_t lt__executor_running(lt_executor_t *ex, lt_job_running_t *runs, uint32_t cap) {
  uint32_t n = 0;
  pthread_mutex_lock(&ex->qlock);
  for (int i = 0; i < ex->nthreads && n < cap; i++) {
    lt_job_t *j = ex->running[i];
    if (j != NULL) runs[n++] = (lt_job_running_t){j, j->since_us, j->member};
  }
  pthread_mutex_unlock(&ex->qlock);
  return n;
}

bool lt__executor_cut(lt_executor_t *ex, lt_job_t *job, uint32_t member) {
  bool cut = false;
  pthread_mutex_lock(&ex->qlock);
  for (int i = 0; i < ex->nthreads && !cut; i++) {
    if (ex->running[i] != job || job->member != member || job->cut) continue;
    job->cut = cut = true;
  }
  pthread_mutex_unlock(&ex->qlock);
  return cut;
}

void lt__executor_counts(lt_executor_t *ex, uint32_t *active, uint32_t *queued) {
  uint64_t c = atomic_load(&ex->counts);
  *active = (uint32_t)(c >> 32);
  *queued = (uint32_t)c;
}

uint32_t lt__executor_active(lt_executor_t *ex) {
  return (uint32_t)(atomic_load(&ex->counts) >> 32);
}

uint32_t lt__executor_queued(lt_executor_t *ex) {
  return (uint32_t)atomic_load(&ex->counts);
}

int lt__executor_threads(const lt_executor_t *ex) {
  return ex->nthreads;
}

void lt__executor_free(lt_executor_t *ex) {
  if (ex == NULL) return;
  stop_workers(ex);
  close_handles(ex);
}
