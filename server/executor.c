/* executor.c: the worker pool (see executor.h). One mutex + condvar guard the groups' FIFOs
 * of queued units (a job and the gang that rides with it) and the list of groups that have
 * some, another mutex the list of finished jobs; uv_async_send wakes the loop, which takes the
 * whole finished list at once. A worker takes a unit, runs its jobs back to back and hands
 * them back together: one wake-up and one completion hand-off for the whole gang. Workers
 * touch only the jobs they run and their slot in the crash log; they never see the store, the
 * sessions or the socket. */
#include "executor.h"

#include <pthread.h>
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

/* Inline runs (see executor.h): a chain runs on the loop thread only after this many runs in
 * a row of at most INLINE_MAX_US each, and never again once a run there took longer. The
 * executor remembers INLINE_CHAINS chains, each in the slot its key picks (a chain that
 * takes another's slot starts learning afresh). */
#define INLINE_MIN_RUNS 8u
#define INLINE_MAX_US   50u
#define INLINE_CHAINS   64u

/* A worker reads its thread's CPU clock (a system call, not a vDSO read) once per this much
 * kernel time, or after any job this long, and gives the jobs in between the CPU share of
 * that span: short kernels then cost no system call each. */
#define CPU_SPAN_US 2000u
#define CPU_LONG_US 500u

/* What the executor has learnt of one chain (an op with its kernels and parameters). */
typedef struct chain_stat {
  uint64_t key;  /* chain_key; 0: the slot is free */
  uint32_t fast; /* runs in a row of at most INLINE_MAX_US */
  bool banned;   /* a run on the loop thread took longer: never inline again */
} chain_stat_t;

struct lt_executor {
  uv_async_t async;
  lt_executor_done_cb cb;
  void *data;
  double slowdown;

  pthread_mutex_t qlock;
  pthread_cond_t qcond;
  lt_exgroup_t nogroup; /* jobs submitted without a group */
  lt_exgroup_t *groups; /* groups with queued jobs */
  uint64_t vclock;      /* service time of the group served last: where idle ones restart */
  lt_job_t **running;   /* by worker index (the loop thread's inline run last), under qlock */
  chain_stat_t chains[INLINE_CHAINS]; /* under qlock */
  void *loop_altstack;                /* the loop thread's, for a crash of an inline kernel */
  int idle; /* workers waiting on qcond: a submit signals only when one is */
  bool stop;

  pthread_mutex_t dlock;
  lt_job_t *dhead, *dtail;

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

/* A kernel chain's times. */
typedef struct run_times {
  uint64_t service_us, start_us, cpu_us;
} run_times_t;

/* run_chain runs the job's stages on `n` inputs into *r on worker `worker` (the loop
 * thread: nthreads), the crash log naming `seq`; `cpu` is the worker's CPU share, NULL for a
 * run on the loop thread. */
static run_times_t run_chain(lt_executor_t *ex, const lt_job_t *job, const lt_bytes_t *in,
                             uint32_t n, uint64_t seq, uint32_t worker, cpu_share_t *cpu,
                             lt_exec_result_t *r) {
  uint64_t t0 = lt__executor_now_us();
  lt__crashlog_enter(worker, job->owner, seq);
  lt__exec_run_owned(job->op, job->stages, job->nstages, in, job->grant, n, r);
  lt__crashlog_leave(worker);
  uint64_t t1 = lt__executor_now_us();
  if (ex->slowdown > 1.0) {
    /* Emulation of a slower host: stay busy, as a slower CPU would. */
    uint64_t until = t1 + (uint64_t)((double)(t1 - t0) * (ex->slowdown - 1.0));
    while ((t1 = lt__executor_now_us()) < until) {
    }
  }
  /* A run on the loop thread (cpu NULL) is charged its service time. */
  return (run_times_t){t1 - t0, t0, cpu != NULL ? cpu_of(cpu, t1 - t0) : t1 - t0};
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

/* mix folds `len` bytes into the FNV-1a hash `h`. */
static uint64_t mix(uint64_t h, const void *p, size_t len) {
  const unsigned char *b = p;
  for (size_t i = 0; i < len; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* chain_key names a job's chain: its op, its kernels and their parameters; never 0. */
static uint64_t chain_key(const lt_job_t *job) {
  uint64_t h = mix(14695981039346656037ull, &job->op, sizeof job->op);
  for (uint32_t i = 0; i < job->nstages; i++) {
    const lt_exec_stage_t *st = &job->stages[i];
    h = mix(h, &st->fn, sizeof st->fn);
    h = mix(h, &st->param.len, sizeof st->param.len);
    if (st->param.len > 0) h = mix(h, st->param.data, st->param.len);
  }
  return h != 0 ? h : 1;
}

/* learn counts a finished run of job's chain: a short one lengthens its streak of short
 * runs, a long one ends it, and bans the chain from the loop thread when it ran there.
 * Under qlock. */
static void learn(lt_executor_t *ex, const lt_job_t *job, bool on_loop) {
  uint64_t key = chain_key(job);
  chain_stat_t *c = &ex->chains[key % INLINE_CHAINS];
  if (c->key != key) *c = (chain_stat_t){.key = key};
  if (job->service_us > INLINE_MAX_US) {
    c->fast = 0;
    if (on_loop) {
      c->banned = true;
      lt__log(LT_LOG_INFO, "%s: ran %llu us on the loop thread; it runs on workers from now on",
              job->stages[0].name, (unsigned long long)job->service_us);
    }
  } else if (c->fast < UINT32_MAX) {
    c->fast++;
  }
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
  learn(ex, job, self == (uint32_t)ex->nthreads);
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
 * wakes the loop. */
static void hand_back(lt_executor_t *ex, lt_job_t *first, lt_job_t *last, uint32_t n) {
  pthread_mutex_lock(&ex->dlock);
  if (ex->dtail)
    ex->dtail->next = first;
  else
    ex->dhead = first;
  ex->dtail = last;
  atomic_fetch_sub(&ex->counts, (uint64_t)n << 32);
  pthread_mutex_unlock(&ex->dlock);
  uv_async_send(&ex->async);
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

static void *worker_main(void *arg) {
  lt_executor_t *ex = arg;
  uint32_t self = atomic_fetch_add(&ex->next_worker, 1);
  cpu_share_t cpu = {.cpu0 = (uint64_t)lt__clock_thread_cpu_us(), .ratio = 1.0};
  void *altstack = lt__crashlog_thread_start(); /* a kernel's stack overflow is named too */
  pthread_mutex_lock(&ex->qlock);
  for (;;) {
    lt_job_t *job;
    while (!ex->stop && (job = eligible(ex)) == NULL) {
      ex->idle++;
      pthread_cond_wait(&ex->qcond, &ex->qlock);
      ex->idle--;
    }
    if (ex->stop) break;
    take(ex, job);
    run_unit(ex, job, self, &cpu);
  }
  pthread_mutex_unlock(&ex->qlock);
  lt__crashlog_thread_end(altstack);
  return NULL;
}

static void on_async(uv_async_t *h) {
  lt_executor_t *ex = h->data;
  pthread_mutex_lock(&ex->dlock);
  lt_job_t *list = ex->dhead;
  ex->dhead = ex->dtail = NULL;
  pthread_mutex_unlock(&ex->dlock);
  for (lt_job_t *j = list; j; j = j->next)
    j->state = JOB_IDLE;
  if (list) ex->cb(ex, list, ex->data);
}

static void stop_workers(lt_executor_t *ex) {
  pthread_mutex_lock(&ex->qlock);
  ex->stop = true;
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
  destroy(h->data);
}

int lt__executor_new(lt_executor_t **out, uv_loop_t *loop, int nthreads, double slowdown,
                     lt_executor_done_cb cb, void *data) {
  *out = NULL;
  if (nthreads < 1 || cb == NULL) return LT_EINVAL;
  lt_executor_t *ex = calloc(1, sizeof *ex);
  if (ex == NULL) return LT_ENOMEM;
  ex->threads = calloc((size_t)nthreads, sizeof *ex->threads);
  ex->running = calloc((size_t)nthreads + 1, sizeof *ex->running);
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
  int rc = uv_async_init(loop, &ex->async, on_async);
  if (rc != 0) {
    lt__log(LT_LOG_ERROR, "uv_async_init: %s", uv_strerror(rc));
    destroy(ex);
    return LT_EIO;
  }
  ex->async.data = ex;
  ex->loop_altstack = lt__crashlog_thread_start();
  for (int i = 0; i < nthreads; i++) {
    rc = pthread_create(&ex->threads[i], NULL, worker_main, ex);
    if (rc != 0) {
      lt__log(LT_LOG_ERROR, "cannot start worker thread %d of %d: %s", i + 1, nthreads,
              strerror(rc));
      stop_workers(ex);
      lt__crashlog_thread_end(ex->loop_altstack);
      uv_close((uv_handle_t *)&ex->async, on_closed);
      return LT_EIO;
    }
    ex->nthreads = i + 1;
  }
  *out = ex;
  return LT_OK;
}

/* queue_unit queues `job` and the gang riding with it. Under qlock. */
static void queue_unit(lt_executor_t *ex, lt_job_t *job) {
  uint32_t n = 0;
  for (lt_job_t *m = job; m != NULL; m = m->gang) {
    m->state = JOB_QUEUED;
    m->cut = false;
    m->leader = m == job ? NULL : job;
    n++;
  }
  enqueue(ex, job);
  atomic_fetch_add(&ex->counts, n);
}

/* may_inline tells whether the loop thread may run unit `job` itself: a lone job (not a
 * pack, whose k kernels would hold the loop k times as long) of a chain
 * whose last INLINE_MIN_RUNS runs or more were short and that never ran long on the loop
 * thread, with room in its group, while the executor has nothing else to do (every worker
 * idle, nothing queued: no other session waits behind it) and emulates no slower host.
 * Under qlock. */
static bool may_inline(lt_executor_t *ex, lt_job_t *job) {
  if (job->gang != NULL || job->npack > 1 || ex->slowdown > 1.0 || ex->idle != ex->nthreads ||
      ex->groups != NULL || !has_room(group_of(ex, job)))
    return false;
  uint64_t key = chain_key(job);
  const chain_stat_t *c = &ex->chains[key % INLINE_CHAINS];
  return c->key == key && !c->banned && c->fast >= INLINE_MIN_RUNS;
}

/* run_inline runs `job` on the calling loop thread as a worker would: counted running in its
 * group and in the load, in the crash log's slot after the workers' (a crash is charged to
 * it), handed back through the done list. Called under qlock; returns without it. */
static void run_inline(lt_executor_t *ex, lt_job_t *job) {
  uint32_t self = (uint32_t)ex->nthreads;
  if (job->group == NULL) job->group = &ex->nogroup; /* as take() does */
  job->leader = NULL;
  job->state = JOB_TAKEN;
  atomic_fetch_add(&ex->counts, (uint64_t)1 << 32);
  start_job(ex, job, self);
  pthread_mutex_unlock(&ex->qlock);
  run_job(ex, job, self, NULL);
  pthread_mutex_lock(&ex->qlock);
  end_job(ex, job, self);
  pthread_mutex_unlock(&ex->qlock);
  job->next = NULL;
  hand_back(ex, job, job, 1);
}

void lt__executor_submit(lt_executor_t *ex, lt_job_t *job) {
  lt__executor_submit_list(ex, &job, 1);
}

void lt__executor_submit_list(lt_executor_t *ex, lt_job_t *const *units, uint32_t n) {
  if (n == 0) return;
  pthread_mutex_lock(&ex->qlock);
  if (n == 1 && may_inline(ex, units[0])) {
    run_inline(ex, units[0]); /* no worker to wake, none to wake the loop */
    return;
  }
  for (uint32_t i = 0; i < n; i++)
    queue_unit(ex, units[i]);
  /* A busy worker takes a unit when it finishes its own: waking one costs a futex call, so
   * wake no more workers than there are units. */
  uint32_t wake = (uint32_t)ex->idle < n ? (uint32_t)ex->idle : n;
  for (uint32_t i = 0; i < wake; i++)
    pthread_cond_signal(&ex->qcond);
  pthread_mutex_unlock(&ex->qlock);
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

uint64_t lt__executor_inline_since(lt_executor_t *ex) {
  pthread_mutex_lock(&ex->qlock);
  const lt_job_t *j = ex->running[ex->nthreads];
  uint64_t since = j != NULL ? j->since_us : 0;
  pthread_mutex_unlock(&ex->qlock);
  return since;
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
  lt__crashlog_thread_end(ex->loop_altstack);
  ex->loop_altstack = NULL;
  uv_close((uv_handle_t *)&ex->async, on_closed);
}
