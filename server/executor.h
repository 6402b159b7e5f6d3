/* executor.h: lithium-server's worker pool. The loop thread submits jobs (an instruction's
 * op and kernel stages over borrowed inputs) to a locked FIFO, one at a time or as a gang
 * (jobs one worker runs back to back: the grain of short kernels); worker threads run them
 * with lt__exec_run and hand them back through a locked completion list plus uv_async_send,
 * so the loop thread gets every finished job of a turn in one callback. The loop thread never
 * runs a kernel, however short its last runs were: someone else's code could hold every
 * session's messages for as long as it runs. A lone job still costs no wake-up when it can
 * be helped: a worker that runs out of work waits hot for the next job (at most one worker at
 * a time, for as long as the gaps between lone jobs measured in this run say one comes, and
 * only while that costs less than a few wake-ups measured in this run), and the loop thread,
 * before it sleeps, waits hot for a job it just submitted (at most one measured wake-up of the
 * loop), taking it with no async wake. The executor never owns a job's memory. Loop thread
 * only, except lt__executor_counts/active/queued/handoffs (any thread). */
#ifndef LT_EXECUTOR_H
#define LT_EXECUTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include "exec.h"
#include "msg.h"

typedef struct lt_executor lt_executor_t;
typedef struct lt_job lt_job_t;

/* A group of jobs (a session) with its own FIFO and a limit on how many of them run at once
 * (the session's thread window): a worker passes over a group that is full, so the window
 * costs no trip through the loop thread. Groups are served fairly: a free worker takes the
 * next job of the group with the least service time received (its kernels' run time, at
 * least 1 us a job), so one session's long kernels cannot starve another's short ones. A
 * group that was idle starts level with the busiest, not with its old credit. Fields are the
 * executor's (its queue lock); zero it before use, set the limit with
 * lt__executor_set_limit, and cancel its queued jobs before freeing it. */
typedef struct lt_exgroup {
  uint32_t limit;   /* 0: no limit */
  uint32_t running; /* jobs of the group on a worker now */
  /* Private. */
  uint64_t vtime; /* service received, in us */
  struct lt_job *qhead, *qtail;
  struct lt_exgroup *anext, *aprev; /* the executor's groups with queued jobs */
  bool listed;
} lt_exgroup_t;

/* One member of a packed job (lt_job_t.npack > 1): `seq` is the submitter's, the rest the
 * worker's, valid in the done callback (or, for the members before the one running, after a
 * successful lt__executor_cut). */
typedef struct lt_job_member {
  uint64_t seq; /* its output id's seq: the crash log names it while it runs */
  bool skip;    /* the submitter's: it failed before it could run; the worker passes it */
  bool ran;     /* the worker ran it (none after a cut one does) */
  int status;   /* LT_OK, or its failure */
  char *errmsg; /* the failure's message (malloc'd; NULL when none or out of memory) */
  void *out;    /* its one output when it succeeded (lt__bufpool_alloc'd: take it or free it) */
  size_t outlen;
  uint64_t service_us, start_us, cpu_us; /* as the job's own */
} lt_job_member_t;

/* Called on the loop thread with every job finished since the last call, as a list linked
 * by `next` in completion order. The jobs are the caller's again. */
typedef void (*lt_executor_done_cb)(lt_executor_t *ex, lt_job_t *done, void *data);

struct lt_job {
  /* Set by the submitter; borrowed by the worker until the job comes back. */
  uint32_t op; /* lt_op_t */
  const lt_exec_stage_t *stages;
  uint32_t nstages;
  const lt_bytes_t *inputs;
  void **grant; /* NULL, or per input its buffer the kernel may write over (lt__exec_run_owned);
                   a pack has none */
  uint32_t ninputs;
  void *data;
  lt_exgroup_t *group; /* NULL: no limit */
  lt_job_t *gang;      /* submit: the jobs that ride with this one (linked by `gang`), run by
                          the same worker right after it, each counted in its group as it
                          runs; NULL: alone. Every member is of the same group. */
  uint64_t owner;      /* client id and sequence of the instruction: the crash log's entry */
  uint64_t seq;
  uint32_t npack; /* 0 or 1: one run. k > 1, a pack (op SEQ): the stages run k times
                     back to back, member i on inputs[i * n .. i * n + n) (n =
                     ninputs / k) into pack[i], the crash log naming pack[i].seq; the
                     job's times then add up its members' */
  lt_job_member_t *pack;
  /* Set by the worker; valid in the done callback. `result` holds the outputs (take them,
   * then lt__exec_result_clear). */
  lt_exec_result_t result;
  uint64_t service_us; /* kernel run time (CLOCK_MONOTONIC), slowdown included */
  uint64_t start_us;   /* when the kernel started, lt__executor_now_us (for traces) */
  uint32_t worker;     /* index of the worker thread that ran it, 0..threads-1 */
  uint64_t cpu_us;     /* CPU time of the worker thread while it ran (slowdown included): read
                          per job of 0.5 ms or more, else its service time times the CPU
                          share its worker's kernels got over the last 2 ms of them */
  /* Private. */
  lt_job_t *next;
  lt_job_t *prev;
  lt_exgroup_t *qgroup; /* the queue it waits in */
  lt_job_t *leader;     /* a queued member: the job its gang rides with */
  uint64_t since_us;    /* when a worker took it, or started its current member
                           (lt__executor_now_us), under the queue lock */
  uint64_t queued_us;   /* when it was queued (lt__executor_now_us), under the queue lock */
  uint32_t member;      /* a pack's member running now, under the queue lock */
  bool cut;             /* run no member of the pack after the current one (queue lock) */
  int state;
};

/* A job on a worker, as lt__executor_running saw it. */
typedef struct lt_job_running {
  lt_job_t *job;
  uint64_t since_us; /* when it, or its current member, started */
  uint32_t member;   /* a pack's member running then (0 otherwise) */
} lt_job_running_t;

/* lt__executor_new starts `nthreads` workers; the calling thread is `loop`'s. Finished jobs
 * are delivered to `cb` on it. `slowdown` >= 1 emulates a slower host: a kernel that took t of
 * wall time and c of CPU time keeps its worker busy until (slowdown - 1) * t more has passed
 * and it has used (slowdown - 1) * c more CPU. LT_ENOMEM, LT_EIO (thread creation failed). */
int lt__executor_new(lt_executor_t **out, uv_loop_t *loop, int nthreads, double slowdown,
                     lt_executor_done_cb cb, void *data);

/* lt__executor_submit appends `job` (and its gang) to the queue; a worker runs it. */
void lt__executor_submit(lt_executor_t *ex, lt_job_t *job);

/* lt__executor_submit_list appends the n units (each a job and its gang) under one lock and
 * wakes at most n sleeping workers, none for the unit a hot worker takes. */
void lt__executor_submit_list(lt_executor_t *ex, lt_job_t *const *units, uint32_t n);

/* lt__executor_set_limit sets how many jobs of group `g` may run at once (0: no limit);
 * a raised limit starts waiting jobs at once. */
void lt__executor_set_limit(lt_executor_t *ex, lt_exgroup_t *g, uint32_t limit);

/* lt__executor_detach takes a running `job` out of its group, so that the group may be
 * freed before the job comes back. */
void lt__executor_detach(lt_executor_t *ex, lt_job_t *job);

/* lt__executor_cancel removes `job` if it is still queued and returns true (a member leaves
 * its gang, a leader's gang stays queued without it); false when a worker has it already,
 * or has its gang (it will be delivered as usual). */
bool lt__executor_cancel(lt_executor_t *ex, lt_job_t *job);

/* lt__executor_running copies up to `cap` of the jobs on a worker now into runs[] and
 * returns how many, each with when it (a pack: its current member) started. A job stays the
 * caller's until the done callback delivers it, so the pointers are valid until the loop
 * thread returns to the loop. */
uint32_t lt__executor_running(lt_executor_t *ex, lt_job_running_t *runs, uint32_t cap);

/* lt__executor_cut stops the running pack `job` after its member `member`, if that member
 * is still the one running: its worker runs no later member (they stay ran == false), and
 * the members before it are final (readable now). false when the job runs another member,
 * or has finished. */
bool lt__executor_cut(lt_executor_t *ex, lt_job_t *job, uint32_t member);

/* lt__executor_counts reads both at once: a job moving from queued to running is seen in one
 * or the other, never in neither (the load report's active + queued). Any thread. */
void lt__executor_counts(lt_executor_t *ex, uint32_t *active, uint32_t *queued);

/* lt__executor_active returns the number of workers running a kernel now. Any thread. */
uint32_t lt__executor_active(lt_executor_t *ex);

/* lt__executor_queued returns the number of jobs waiting for a worker (or for room in
 * their group). Any thread. */
uint32_t lt__executor_queued(lt_executor_t *ex);

/* lt__executor_threads returns the number of workers. */
int lt__executor_threads(const lt_executor_t *ex);

/* How jobs reached a worker and came back, counted since the executor started. */
typedef struct lt_executor_handoffs {
  uint64_t hot;        /* units taken by a worker that was waiting hot: no wake-up */
  uint64_t woken;      /* units taken by a worker woken from its sleep */
  uint64_t loop_hot;   /* completions the loop took while it waited hot: no async wake */
  uint64_t spins;      /* hot waits of a worker begun */
  double wake_us;      /* a sleeping worker's measured wake-up: submit to take (mean) */
  double gap_us;       /* the measured gap from the pool running dry to the next job (mean) */
  double loop_wake_us; /* the loop's measured wake-up: hand-back to delivery (mean) */
  uint64_t spin_us;    /* a worker's hot-wait budget now (0: it sleeps at once) */
} lt_executor_handoffs_t;

/* lt__executor_handoffs reads the counts and the measurements the hot waits use. Any
 * thread. */
void lt__executor_handoffs(lt_executor_t *ex, lt_executor_handoffs_t *out);

/* lt__executor_spinning returns the number of workers waiting hot now (0 or 1). Any
 * thread. */
uint32_t lt__executor_spinning(lt_executor_t *ex);

/* lt__executor_now_us returns the clock of job start times: CLOCK_MONOTONIC in
 * microseconds, also sent in welcome and heartbeat answers so that a client can align its
 * traces. Any thread. */
uint64_t lt__executor_now_us(void);

/* lt__executor_free stops the workers (each finishes its current kernel first) and joins
 * them; jobs still queued or undelivered are dropped without a callback, so the caller
 * should have waited for them. The memory is released once the loop has run the close of
 * the async handle. Accepts NULL. */
void lt__executor_free(lt_executor_t *ex);

#endif
