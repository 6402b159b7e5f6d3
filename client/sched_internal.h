/* sched_internal.h: the dispatcher's state, shared by its files: scheduler.c (the loop,
 * connections, heartbeats), instr.c (instruction records and their states), jobs.c (tasks
 * as graph instances, completions, releases), dispatch.c (execute batches), placement.c
 * (where an instruction goes) and sched_stats.c (the stats snapshot). Dispatcher thread
 * only, except the stats snapshot. Its types follow the project's naming: a type a header
 * shares is lt_<noun>_t (struct lt_<noun>), a type private to one .c file has no prefix. */
#ifndef LT_SCHED_INTERNAL_H
#define LT_SCHED_INTERNAL_H

#include <pthread.h>
#include <uthash.h>

#include <lithium/error.h>

#include "clock.h"
#include "freelist.h"
#include "log.h"
#include "vec.h"
#include "conn.h"
#include "backend.h"
#include "instance.h"
#include "placement.h"
#include "policy.h"
#include "scheduler.h"
#include "own_cost.h"
#include "ship.h"
#include "trace.h"

/* lt__status_lost tells whether a completion's status says that a value the instruction
 * needed is gone: lost with a server (LT_ELOST), or not found where it was to be (LT_ENOENT:
 * its holder restarted, or dropped it). Either way the task starts again from its input
 * while retries remain, as for a server loss: no fault of its own kernels. */
static inline int lt__status_lost(int status) {
  return status == LT_ELOST || status == LT_ENOENT;
}

/* A job whose result is to be fetched from its holder: its number and generation then. */
typedef struct lt_due {
  uint64_t job;
  uint32_t gen;
} lt_due_t;

/* A submitted task while it runs: its instance and the instructions still out. */
typedef struct lt_fetch lt_fetch_t;

typedef struct lt_job_rec {
  lt_task_t *task;
  lt_instance_t *inst;
  uint32_t live;      /* instruction records queued or in flight */
  int finished;       /* result delivered; freed when live reaches 0 */
  lt_value_t *input;  /* the task's input, kept to recompute the task after a server loss
                         while values stay on servers and the task is not done; NULL after */
  lt_value_t *input2; /* a combine of a stream reduce: its right input (sreduce.h) */
  uint32_t gen;       /* instance generation: records of an older one are stale */
  uint32_t restarts;
  uint32_t reruns; /* runs again from its input for a straggler (backup.c): at most one */
  double work_us;  /* service time of its instructions that completed, every run of it: what
                      running it again from its input would redo at least (backup.c) */
  /* Of restarts, those owed to sessions whose end is not known yet: not counted toward
   * max_retries, refunded if it was a crash (losses.c). */
  uint32_t restarts_held;
  uint64_t num;          /* its task number (= its instance's), the key of s->jobs */
  const void *crash_key; /* the chain (template stages) of its instruction that crashed */
  uint32_t crashes;      /* crashes charged to that chain (crash.c) */
  UT_hash_handle hh;     /* s->jobs, by task number */
} lt_job_rec_t;

/* Input tokens a record holds inside itself: most instructions read one or two. */
#define LT_REC_SMALL_INS 2

/* Where an instruction record is (instr.c holds the legal moves between these states, in
 * lt__rec_to). A record that is out is in s->inflight and counted in its server's window
 * and backlog; when its completion comes or its server is lost it is taken off
 * (lt__sched_take_off) and keeps its state until it is queued again or freed. */
typedef enum lt_ir_state {
  LT_IR_QUEUED = 0, /* in the fireable queue (or just taken from it); conn is -1 */
  LT_IR_OUT,        /* sent to server conn */
  LT_IR_MIGRATING,  /* out, and a cancel is on its way to move it to a faster server */
  LT_IR_DROPPED     /* out, but its twin won: its completion only releases what it left
                       (and answers a migration's cancel, if one was on its way) */
} lt_ir_state_t;

/* One instruction: what a frame needs run, queued or out on `conn`. Besides its state, a
 * record carries facts that hold wherever it is (a lost record is queued again with them):
 * how it was fired (`chained`), what became of its frame (`moved`, `final`) and its copy
 * (`twin`, `backup`). */
typedef struct lt_instr_rec {
  uint64_t seq; /* instruction id = the sequence of output 0's object id */
  lt_job_rec_t *job;
  uint32_t gen; /* the job's generation when fired; stale records touch no frame */
  lt_frame_t *frame;
  uint32_t op;
  lt_ir_state_t state;
  int conn;            /* the server it is out on, or was last; -1 while queued */
  uint32_t tries;      /* dispatches lost to a failed server */
  uint32_t tries_held; /* of those, lost with sessions whose end is not known yet (losses.c) */
  int chained;         /* fired by a predecessor's dispatch: placed as a successor (placement.c) */
  int moved;           /* its frame went on at dispatch: the completion only reports status */
  int final;           /* its output is the task's result: returned with done */
  lt_token_t *ins;     /* its input tokens (copies holding value references): ins_small when
                          they fit, else their own allocation */
  uint32_t nins;
  lt_token_t ins_small[LT_REC_SMALL_INS];
  const lt_tstage_t *stages; /* borrowed from the template, for a re-dispatch */
  uint32_t nstages;
  int64_t sent_ms;           /* when it was last dispatched */
  int64_t sent_us;           /* the same in microseconds, for the trace */
  int64_t run_ms;            /* out: when the client saw it come into its server's threads
                                (sent to a free one, or one came free), or -1 while a full
                                window of ours is ahead of it there (instr.c) */
  double cost_us;            /* its cost there, as expected then */
  int cost_known;            /* its chain had run somewhere then: cost and backlog were measured */
  struct lt_instr_rec *twin; /* the other copy while both are out (backup.c) */
  int backup;                /* this record is the copy */
  int kept_inputs;           /* sent as a copy that leaves its inputs where they are held
                                (binding.c): released by the client when it wins */
  int packed;                /* out as a member of a packed instruction (dispatch.c): it runs
                                with the others there, so it is neither copied nor moved */
  uint64_t pack_lead;        /* packed: the seq of its pack's member 0, its pack's name */
  uint32_t pack_i, pack_n;   /* packed: its place in the pack, and the pack's members */
  struct lt_instr_rec *next;
  struct lt_instr_rec *out_prev, *out_next; /* out: its server's list, in the order sent */
  UT_hash_handle hh;                        /* s->inflight, by seq */
} lt_instr_rec_t;

/* Pacing of one server (pace.c): the cost of each instruction chain there, the backlog it
 * has admitted, its thread window (throttle) and the lookahead depth on top, from the
 * measured round-trip time (heartbeat pings, answered by the server's loop, never queued
 * behind kernels) and the service times its completions report. */
#define LT_PING_MS      100   /* round-trip pings per server under lookahead */
#define LT_RTT_GUESS_US 200.0 /* the round trip assumed before the first ping answer */
#define LT_MAX_DEPTH    1000  /* most instructions queued at a server beyond its window */

#define LT_CONTROL_MS  200 /* throttle: one window decision per server this often */
#define LT_HISTORY     64  /* window changes kept per server for the stats */
#define LT_COSTS       16  /* chains with their own cost per server; others share the mean */
#define LT_PER_SPAN    64  /* completions over which a server's mean time per instruction runs */
#define LT_SPARE_QUIET 5   /* control periods without a starvation before the spare depth shrinks */
#define LT_SPARE_US    5000.0 /* the spare depth covers at most this much of a server's time */
#define LT_TAIL        64     /* latest service times kept per server, for its tail in the stats */

/* One chain of the template (its tstage array is the key) on one server. */
typedef struct lt_cost {
  const void *key;
  uint32_t admitted; /* of this chain, admitted there now */
  double cpu;        /* EWMA of the CPU time of its worker thread */
  double raw;        /* EWMA of the service time */
  double ref;        /* the lowest raw reached, slowly forgotten: the throttle's reference */
} lt_cost_t;

/* What pace.c looked up (a cache, not state), per chain in a few slots: a server found to
 * have run it, the millisecond in which none had, and the shortest service time the chain
 * has shown with the millisecond it was looked up in; and a server that has completed
 * something, or the millisecond in which none had. */
#define LT_PACE_MEMO 8
typedef struct lt_pace_memo_slot {
  const void *key;
  size_t idx;
  int64_t miss_ms;
  int64_t known_ms;
  double known_us;
} lt_pace_memo_slot_t;

typedef struct lt_pace_memo {
  lt_pace_memo_slot_t slot[LT_PACE_MEMO];
  size_t mean_idx;
  int64_t mean_miss_ms;
} lt_pace_memo_t;

typedef struct lt_pace {
  double rtt_us; /* smoothed ping round trip; 0 before the first */
  double svc_us; /* smoothed service time over all chains; 0 before the first completion */
  int64_t last_ping_ms;
  uint32_t window;  /* the thread window: instructions meant to run at once */
  uint32_t cap;     /* instructions admitted at once: window + the lookahead depth */
  int paced;        /* lookahead: the admitted cap follows the round trip */
  uint32_t workers; /* the server's worker threads (welcome); 0 before */
  double per_us;    /* EWMA of the time per instruction when busy, over all chains */
  double cores;     /* the CPU the server gets, in cores: welcome, then learnt (pace.c) */
  double load_cpu;  /* the CPU use in its latest load report, in cores */
  double share_now; /* of the CPU its running instructions would use, the share that report
                       shows it using (0..1; 0 when it runs nothing) */
  double share;     /* EWMA of that share over the reports while it ran something; 0 before */
  uint32_t parked;  /* instructions waiting there for inputs, in its latest load report */
  lt_cost_t costs[LT_COSTS];
  uint32_t ncosts;
  uint32_t others; /* admitted instructions of chains beyond LT_COSTS, costed at per_us */
  /* Throttle control over the current period. */
  int64_t period_ms;  /* start of the period */
  uint64_t completed; /* completions so far */
  double active_sum;  /* reported active threads, summed over reports */
  uint32_t active_n;  /* reports in the period */
  double slow_sum;    /* completions' service time / their chain's reference, summed */
  uint32_t slow_n;    /* completions with a reference in the period */
  int waited;         /* a report showed instructions waiting for a thread */
  int grew;           /* the last decision grew the window */
  int shrunk;         /* the window has shrunk once: it grows by one from then on */
  uint32_t hold;      /* periods before the window may grow again */
  uint32_t backoff;   /* the hold after the next undone grow */
  uint32_t changes;   /* window changes so far */
  /* Starvation (pace.c, lt__pace_load): a report that the server had a thread of its window
   * free and nothing queued while work waited at the client for room there. */
  int held;         /* work waited at the client for room here since the last report */
  uint32_t spare;   /* learnt depth on top of the round trip's, one per starvation */
  uint32_t quiet;   /* control periods in a row without a starvation */
  uint64_t starved; /* starvations so far */
  int starved_now;  /* a starvation in the current control period */
  int64_t hist_ms[LT_HISTORY];
  uint32_t hist_w[LT_HISTORY];
  float svc_last[LT_TAIL]; /* the latest LT_TAIL service times (µs), a ring */
  uint64_t svc_n;          /* service times taken so far */
} lt_pace_t;

/* An instruction lost with a session, or a restart of a task that the session's loss
 * caused, kept until the server's next welcome says whether the session ended in a crash
 * (losses.c). */
typedef struct lt_loss {
  uint64_t seq;    /* the instruction (0 for a restart) */
  uint64_t task;   /* its task (job) number */
  const void *key; /* its chain (template stages), NULL for a restart */
  int restart;     /* a restart of `task`, held (lt_job_rec_t.restarts_held) */
} lt_loss_t;

/* The life of one connection slot (scheduler.c). A slot is one session with one server: a
 * slot whose session was ready and then died stays dead for good (references to values it
 * held keep naming it, so they are known lost), and the server is greeted again in a new
 * slot, its successor. A slot that never got a welcome is greeted again in place. */
typedef struct lt_slot {
  size_t host;         /* index in the evaluator's hosts (the door's hosts) */
  int watch_fd;        /* read end of a spawned server's stdout (EOF: it exited), or -1 */
  int answered;        /* counted out of lt_eval_start's wait */
  int was_ready;       /* its session was welcomed */
  int lacks;           /* its last welcome lacks a module of the program: it gets no work */
  int lacks_warned;    /* that was said */
  int spoke;           /* and it sent something after its welcome (links.c) */
  int mute;            /* its session ended for never speaking after its welcome */
  int probation;       /* a session of this host never spoke after its welcome, nor has
                          one since: no work until this one speaks (links.c) */
  int64_t retry_at_ms; /* dead: when to greet the server again; 0: never */
  uint32_t backoff_ms; /* the wait before the next greeting */
  long successor;      /* the slot that took over this server, or -1 */
  uint32_t sessions;   /* sessions with this server so far, this one included */
  long predecessor;    /* the slot whose session with this server ended before, or -1 */
  int removed;         /* lt_eval_remove_host: its work moves off (the drain policy) */
  lt_instr_rec_t *out; /* our instructions out there, oldest first (instr.c) */
  int64_t idle_ms;     /* when it last came to run nothing of ours (for the log) */
  lt_loss_t *lost;     /* what that session was running when it ended, and the restarts its
                          loss caused (losses.c) */
  uint32_t nlost;
  size_t caplost;
  /* How its session ended, from its successor's welcome: 1 a crash, -1 not, 0 not known
   * yet (losses.c). */
  int crashed;
  char why[96]; /* why it is not alive: "refused", "unresolvable", "no answer", ... */
} lt_slot_t;

/* Ids to release on one server, sent as one `release` per loop turn. */
typedef struct lt_relq {
  lt_oid_t *ids;
  uint32_t n;
  size_t cap;
} lt_relq_t;

/* One entry of the server table: everything the dispatcher keeps of one session with one
 * server, grown and moved as one (an entry's address changes when the table grows: hold
 * indexes, never pointers, across a call that may add a slot). */
typedef struct lt_server {
  lt_conn_t conn;
  lt_slot_t slot;
  lt_relq_t relq;    /* ids to release there this turn */
  uint32_t admitted; /* instructions counted in its window */
  uint64_t copies;   /* copies of stragglers sent here (requests.c) */
  lt_pace_t pace;
  /* Marked dead (servers.c): the loop's reap phase ends the session once per turn. */
  int gone;
  int final;                     /* and it is not to be greeted again */
  char why[96];                  /* why it was marked */
  uint32_t limit[LT_POLICY_MAX]; /* each policy's limit on what it admits (LT_NO_LIMIT) */
  void *blob[LT_POLICY_MAX];     /* each policy's state for this server (policy.c) */
} lt_server_t;

/* What lt_eval_stats_json reports of one server, as last published (sched_stats.c). */
typedef struct lt_stats_server {
  size_t slot; /* the connection slot it was copied from */
  char *endpoint;
  char *server_id;
  char reason[96];
  lt_conn_state_t state;
  int alive;
  uint32_t sessions;
  int removed;
  uint64_t incarnation;
  uint64_t max_frame;
  uint64_t completed;
  double cpu_s;
  uint32_t inflight;
  uint32_t threads;
  lt_load_t load;
  double speed;
  uint64_t bytes_to, bytes_from;
  uint32_t window, admit, changes;
  int64_t hist_ms[LT_HISTORY];
  uint32_t hist_w[LT_HISTORY];
  double rtt_us, service_us, cores;
  uint64_t starved;
  uint32_t running, queued; /* of inflight: seen in its threads, and the rest */
  uint64_t copies;
  float svc_last[LT_TAIL]; /* the pace's ring of service times, copied when it grew */
  uint64_t svc_n;
  lt_stat_t pstats[LT_POLICY_MAX * LT_POLICY_STATS]; /* the policies' own of this server */
  size_t npstats;
} lt_stats_server_t;

/* The dispatcher's counters and servers as last published: `mu` guards them and is held
 * only to copy in or format out, never with another lock. */
typedef struct lt_stats_snap {
  pthread_mutex_t mu;
  uint64_t instructions, bytes_to, bytes_from, retries, migrations, migrated, stray, overdue;
  uint64_t protocol_errors;
  uint64_t backups, backups_won, reruns, groups, grouped, packs, packed;
  int64_t t0_ms; /* when the dispatcher started: elapsed_ms counts from it */
  lt_stat_t pstats[LT_POLICY_MAX * LT_POLICY_STATS]; /* the policies' own (policy.h) */
  size_t npstats;
  lt_stats_server_t *servers; /* the slots no later session stands for, in slot order; cap of
                              them allocated, zeroed until used */
  size_t nservers, cap;
} lt_stats_snap_t;

struct lt_sched {
  lt_eval_t *ev;              /* opaque: only for the door's calls */
  const lt_eval_door_t *door; /* the evaluator's calls (backend.h) */
  const lt_options_t *opts;
  const lt_template_t *tmpl;
  int tmpl_recurs; /* a chain of the template may run after itself in a task (dc, while,
                      reduce): packs then take only members whose inputs exist (dispatch.c) */
  uint64_t client_id;
  uint64_t secret;
  int wake_fd;
  lt_statsock_t *statsock; /* stats_socket: served after each turn (borrowed), or NULL */
  void *zctx;              /* the ZeroMQ context when the transport is ZeroMQ (owned), else NULL */
  lt_net_t net;            /* the transport of every connection (backend env, else ZeroMQ) */
  lt_server_t *srv;        /* the server table: one entry per connection slot (servers.h) */
  size_t nsrv, capsrv;
  size_t initial;    /* hosts known at start: they answer lt_eval_start */
  size_t hosts_seen; /* the evaluator's hosts opened so far */
  /* The session's servers as every server is told (PROGRAM.peers): "ENDPOINT [KEY]" per
   * host of the evaluator, and the key each connection uses (its own or curve_server). */
  char **peers;
  char **eps; /* each host's endpoint, copied from the evaluator */
  char (*keys)[41];
  size_t npeers;
  int64_t none_since; /* since when no server could take work (ms), or 0 */
  lt_instr_rec_t *fire_head, *fire_tail;
  size_t nfire;              /* records in the fireable queue */
  lt_pace_memo_t *pace_memo; /* pace.c's lookups (a cache: reading it changes nothing) */
  lt_instr_rec_t *inflight;
  lt_job_rec_t *jobs;  /* every job, by task number */
  lt_fetch_t *fetches; /* results being fetched (fetch.c), by value sequence */
  lt_due_t *due;       /* jobs whose result is to be fetched (lt__sched_fetch_due) */
  size_t ndue, capdue;
  uint64_t next_seq;
  uint32_t first_cap; /* instructions admitted per server before pacing has samples */
  lt_codec_limits_t limits;
  lt_rx_t rx; /* the message being handled: its payloads become values (lt__rx_value) */
  int64_t next_tick;
  int64_t t0_ms;                       /* start of the dispatcher, for the window history */
  size_t rr;                           /* round-robin start for placement */
  const lt_placement_ops_t *placement; /* the policy of option `placement` */

  lt_task_t *done_head; /* results of this turn, delivered under one lock */
  lt_task_t *done_tail;

  lt_trace_t *trace;     /* trace=FILE (trace.c); NULL when off */
  lt_ship_t *ship;       /* the program's modules: local copies, shipping (ship.c) */
  lt_stats_snap_t stats; /* what stats readers see (sched_stats.c) */
  uint64_t instructions;
  uint64_t completions;   /* completions taken (jobs.c), with instructions the hand-offs */
  lt_own_cost_t own_cost; /* the dispatcher's CPU per hand-off (dispatch.c, grain=auto) */
  /* Records and jobs kept for reuse (a task makes and drops one of each at least): made
   * on first use (instr.c, jobs.c), cleared by lt__sched_pools_clear. */
  lt_freelist_t recs;
  lt_freelist_t jobs_free;
  uint64_t retries;
  uint64_t migrations;  /* cancels sent to move queued instructions (migrate.c) */
  uint64_t migrated;    /* of those, confirmed and placed again */
  uint32_t cancels_out; /* migrations' cancels not yet answered (records in LT_IR_MIGRATING) */
  uint64_t stray;       /* completions for instructions a server was not running for us */
  uint64_t overdue;     /* instructions taken back from a server that held them far too long */
  int went_idle;        /* a server came to run nothing of ours this turn */
  int freed;            /* a server's admitted count fell this turn: the on_idle hooks run */
  uint64_t backups;     /* copies of stragglers sent to idle servers (backup.c) */
  uint64_t backups_won; /* of those, the ones that finished first */
  uint64_t reruns;      /* tasks run again from their input for a straggling inner stage */
  uint64_t groups;      /* groups of instructions sent as one hand-off (grain, dispatch.c) */
  uint64_t grouped;     /* instructions in those groups */
  uint64_t packs;       /* of those groups, the ones sent as one packed instruction */
  uint64_t packed;      /* tasks in those packs */

  /* servers dropped for a completion that was not of what was sent them (done_check.c) */
  uint64_t protocol_errors;
  lt_policy_t policies[LT_POLICY_MAX]; /* the enabled policies, in registry order */
  size_t npolicies;
  lt_req_queue_t requests; /* what they asked, for the loop's apply phase (requests.c) */
};

/* scheduler.c: the loop, in turns (the real thread waits in zmq_poll between them; the
 * simulator, tests/sim, delivers a virtual instant's events instead). */
/* What the wait before a turn saw: the intake woken, and the poll items of the npolled
 * servers then (wake fd, then each server's socket, its monitor, its process's stdout); no
 * items: every server is read and its monitor looked at. */
typedef struct lt_turn_in {
  int woken;
  const zmq_pollitem_t *items;
  size_t npolled;
} lt_turn_in_t;
/* lt__sched_start greets the first hosts and starts the clock of the ticks. */
void lt__sched_start(lt_sched_t *s);
/* lt__sched_turn runs one turn in its phases; 1 when the evaluator asked it to stop. */
int lt__sched_turn(lt_sched_t *s, const lt_turn_in_t *in);
/* lt__sched_stop fails what is left, closes every session and publishes the stats. */
void lt__sched_stop(lt_sched_t *s);

/* pace.c */
/* lt__pace_init starts a server's pacing, admitting `first_cap` at once until it has
 * samples. */
void lt__pace_init(lt_pace_t *p, uint32_t first_cap, const lt_options_t *o, int64_t now_ms);
/* lt__pace_welcome takes the server's cores from its welcome: the host's, or the CPU its
 * cgroup quota allows when that is less (`cpus`, validated here). */
void lt__pace_welcome(lt_pace_t *p, uint32_t cores, double cpus);
void lt__pace_rtt(lt_pace_t *p, double rtt_us);
/* lt__pace_service takes a completion of chain `key` that ran svc_us, using cpu_us of CPU. */
void lt__pace_service(lt_pace_t *p, const void *key, double svc_us, double cpu_us);
/* lt__pace_admit/unadmit count an instruction of chain `key` in or out of the backlog. */
void lt__pace_admit(lt_pace_t *p, const void *key);
void lt__pace_unadmit(lt_pace_t *p, const void *key);
/* lt__pace_cost_us estimates server i's time per instruction of chain `key` when busy. */
double lt__pace_cost_us(const lt_sched_t *s, size_t i, const void *key);
/* lt__pace_backlog_us estimates how long server i needs for what it has admitted. */
double lt__pace_backlog_us(const lt_sched_t *s, size_t i);
void lt__pace_load(lt_pace_t *p, const lt_load_t *load);
/* lt__pace_usual_share is the share of the CPU the server's instructions usually get there
 * (the EWMA of its reports), 1 before any report of a running instruction. */
double lt__pace_usual_share(const lt_pace_t *p);
/* lt__pace_full notes that work waited at the client because the server had no room. */
void lt__pace_full(lt_pace_t *p);
int lt__pace_control(lt_pace_t *p, const lt_options_t *o, int64_t now_ms, int64_t t0_ms);
/* lt__pace_known_us returns the shortest service time chain `key` has shown on any server,
 * or 0 when it never completed. */
double lt__pace_known_us(const lt_sched_t *s, const void *key);
/* lt__pace_service_us returns server i's service time of chain `key`, or when it never ran
 * there the shortest it has shown on any server (0: never completed). */
double lt__pace_service_us(const lt_sched_t *s, size_t i, const void *key);
/* lt__pace_parallel returns how many instructions run at once there: window and workers. */
double lt__pace_parallel(const lt_pace_t *p);

/* instr.c */
/* lt__rec_to moves r to state `to`, which must be a legal move from its state (an illegal
 * one is logged and asserted); queued, r names no server. */
void lt__rec_to(lt_instr_rec_t *r, lt_ir_state_t to);
/* lt__rec_new makes a queued record of job j under a fresh instruction id, counted live in
 * j; NULL without memory. Caller owns the record (lt__sched_rec_done frees it). */
lt_instr_rec_t *lt__rec_new(lt_sched_t *s, lt_job_rec_t *j);
/* lt__sched_pools_clear frees the records and jobs kept for reuse (jobs.c). */
void lt__sched_pools_clear(lt_sched_t *s);
/* lt__rec_stale tells whether r belongs to an older generation of its task's instance (it
 * was recomputed) or its task is over: such a record touches no frame. */
int lt__rec_stale(const lt_instr_rec_t *r);
/* lt__rec_portable tells whether r may run on another server than the one it was sent to,
 * there and then: alone (no twin), its task's current generation, every input held by the
 * client, and its output not named to successors on its server (a farm's task, a last
 * stage). Migration and copies of stragglers ask this. */
int lt__rec_portable(const lt_instr_rec_t *r);
/* lt__rec_copyable tells whether r may get a copy on another server (backup.c): out alone,
 * its output not named to successors yet (or the task's result), and every input either
 * held by the client or made already and held by a live server, which the copy fetches
 * from peer to peer. */
int lt__rec_copyable(const lt_sched_t *s, const lt_instr_rec_t *r);
/* lt__rec_cancel asks r's server to drop r where it waits (answered LT_ECANCELED when it
 * never ran). Not a packed member: a server knows a pack only whole, so its cancel would
 * cancel the other tasks' members too; it runs, and its completion comes back stale or
 * stray. */
void lt__rec_cancel(lt_sched_t *s, lt_instr_rec_t *r);
/* lt__token_made tells whether input t exists already: the client holds it, or its producer
 * (output i of instruction seq is named seq + i) is no longer out. */
int lt__token_made(const lt_sched_t *s, const lt_token_t *t);
/* lt__rec_copy makes a queued copy of r (the same work under an instruction id of its own,
 * marked `backup`); NULL without memory. */
lt_instr_rec_t *lt__rec_copy(lt_sched_t *s, const lt_instr_rec_t *r);
/* lt__rec_ins_alloc returns room for n input tokens of r: inside r when they fit, else
 * calloc'd; lt__rec_ins_free frees r->ins (either way) and clears it. */
lt_token_t *lt__rec_ins_alloc(lt_instr_rec_t *r, uint32_t n);
void lt__rec_ins_free(lt_instr_rec_t *r);
/* lt__sched_push_fireable queues r for placement, at the front or the back. */
void lt__sched_push_fireable(lt_sched_t *s, lt_instr_rec_t *r, int front);
lt_instr_rec_t *lt__sched_pop_fireable(lt_sched_t *s);
/* lt__sched_put_on records that queued r went out to server idx: in s->inflight, counted
 * in its in-flight count, window and backlog. */
void lt__sched_put_on(lt_sched_t *s, lt_instr_rec_t *r, int idx);
/* lt__sched_take_off takes r, out, off its server: the reverse of lt__sched_put_on. r keeps
 * its state and conn until it is queued again or freed. The server's next instruction in
 * line is seen to run from now on (lt__sched_mark_running). */
void lt__sched_take_off(lt_sched_t *s, lt_instr_rec_t *r);
/* lt__sched_mark_running notes, on server idx, that the instructions it now runs run since
 * now_ms at the latest. A server runs a session's instructions in the order they arrived, as
 * many at once as it has worker threads (under throttle, as its window allows), so the first
 * that many of its out list run; one that was waiting began when a completion or a larger
 * window freed a thread for it, no later than when the client saw that. */
void lt__sched_mark_running(lt_sched_t *s, size_t idx, int64_t now_ms);

/* done_check.c: lt__done_check tells whether the completions of DONE `m` from server idx
 * can be reports of what the client sent there (1), or are a protocol error of that server
 * (0, the reason written to why): a packed one naming a member twice, an id the client never
 * made, or another count or order than the pack still out there had; a single one for a
 * member of a pack still out there. */
int lt__done_check(const lt_sched_t *s, size_t idx, const lt_msg_t *m, char *why, size_t len);

/* jobs.c */
/* lt__sched_on_fire queues a fired instruction at the back; lt__sched_on_fire_chained, for
 * a successor fired by its predecessor's dispatch, at the front, placed as a successor. */
void lt__sched_on_fire(void *ud, lt_instance_t *inst, lt_frame_t *frame);
void lt__sched_on_fire_chained(void *ud, lt_instance_t *inst, lt_frame_t *frame);
void lt__sched_take_intake(lt_sched_t *s);
void lt__sched_rec_done(lt_sched_t *s, lt_instr_rec_t *r);
void lt__sched_job_fail(lt_sched_t *s, lt_job_rec_t *j, int err, const char *msg);
void lt__sched_on_completion(lt_sched_t *s, size_t idx, const lt_completion_t *cp,
                             const lt_msg_t *m);

void lt__sched_restart(lt_sched_t *s, lt_job_rec_t *j, const char *why);
/* lt__sched_rerun runs task j again from its input, not charged to max_retries, once a task
 * (a straggling inner stage, backup.c): the old run's records are stale from now on. 1 when
 * it did; 0 when the task is done, kept no input, or ran again before. */
int lt__sched_rerun(lt_sched_t *s, lt_job_rec_t *j, const char *why);
/* lt__sched_restart_lost is lt__sched_restart for a value lost with the session of dead entry
 * `lost` (-1: not known): the restart is held until that server's next welcome says whether
 * the session ended in a crash, and refunded if it did (losses.c). */
void lt__sched_restart_lost(lt_sched_t *s, lt_job_rec_t *j, long lost, const char *why);

/* lt__sched_job_result finishes job `j` with value `v` (a reference is taken; NULL: out of
 * memory). */
void lt__sched_job_result(lt_sched_t *s, lt_job_rec_t *j, lt_value_t *v);

/* lt__sched_job_settle frees job `j` when it is finished and no instruction of it is left
 * (for a job that finished outside an instruction's completion, e.g. by a fetch); j must
 * not be used after. */
void lt__sched_job_settle(lt_sched_t *s, lt_job_rec_t *j);

/* Fetching a result that a task ended on while it sat on a server (fetch.c).
 * lt__sched_fetch_results asks the holders of the results due for them (a failure to ask
 * recomputes or fails the task); lt__sched_on_value applies a VALUE from server `idx`;
 * lt__sched_fetches_lost recomputes the tasks whose result was on dead server `idx`;
 * lt__sched_fetches_free drops what is still asked at the end. */
void lt__sched_fetch_results(lt_sched_t *s);
void lt__sched_on_value(lt_sched_t *s, size_t idx, const lt_msg_t *m);
void lt__sched_fetches_lost(lt_sched_t *s, size_t idx);
void lt__sched_fetches_free(lt_sched_t *s);
void lt__sched_fail_all(lt_sched_t *s, int err, const char *msg);
void lt__sched_deliver(lt_sched_t *s);

/* binding.c */
/* How an instruction's inputs and outputs are bound (the `lazy` option): by value through
 * the client, or by reference on the servers. */
typedef struct lt_binding {
  int moves_on;        /* its frame goes on at dispatch, with a reference to its output */
  int returns;         /* its output comes back to the client (LT_INSTR_RETURN) */
  int release_inputs;  /* its server drops its inputs once run (LT_INSTR_RELEASE_INPUTS) */
  int keeps_inputs;    /* a copy that would release them but must not: its twin may still
                          read them there; the client releases them if the copy wins */
  int outputs_stay;    /* outputs stay on their server: a value that came back keeps its
                          holder, and outputs nobody will read are released there */
  uint64_t inline_max; /* stored outputs up to this size come back too (hello) */
} lt_binding_t;
/* lt__binding returns the binding of r now (it changes once r's frame moved on); r's frame
 * is read, so r must not be stale. NULL gives the session-wide fields alone (outputs_stay,
 * inline_max): completions use that, since their record may be stale. */
lt_binding_t lt__binding(const lt_sched_t *s, const lt_instr_rec_t *r);

/* dispatch.c */
#define LT_LINK_BPUS 100.0 /* bytes per µs assumed for moving a value (100 MB/s) */
void lt__sched_dispatch(lt_sched_t *s);
/* lt__sched_dispatch_to sends r to server idx at once; LT_EAGAIN when it cannot go there now,
 * LT_ESTATE for a backup copy that cannot go at all (an input lost, or over the frame limit
 * of idx): the record is then still the caller's, and its task untouched. */
int lt__sched_dispatch_to(lt_sched_t *s, lt_instr_rec_t *r, int idx);

/* backup.c (policy), for its unit test */
/* lt__sched_backup_target returns the idle server that should run a copy of r at now_ms, or
 * -1 when r is no straggler (or may not be copied, or no idle server would finish sooner). */
int lt__sched_backup_target(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms);

/* sched_stats.c */
void lt__stats_init(lt_stats_snap_t *st);
void lt__stats_free(lt_stats_snap_t *st);
/* lt__stats_publish copies the counters and servers of s into s->stats for the readers. */
void lt__stats_publish(lt_sched_t *s);
/* lt__sched_stats_json appends the latest snapshot to the open JSON object (the backend's
 * stats_json). Any thread. */
void lt__sched_stats_json(void *self, lt_json_t *j);

/* servers.c: the server table's answers, asked nowhere else. */
/* lt__server_alive: its session answers (ready or stopping) and it is not marked dead. */
int lt__server_alive(const lt_sched_t *s, size_t i);
/* lt__server_takes: it may be given new work (ready, not marked, no policy limit of 0). */
int lt__server_takes(const lt_sched_t *s, size_t i);
/* lt__server_held: it would take work but for a policy's limit of 0 (a cool-down, a late
 * server's): it may take work again soon. */
int lt__server_held(const lt_sched_t *s, size_t i);
/* lt__server_cap: the instructions it may have admitted at once: its pacing's cap, lowered
 * by the policies' limits. */
uint32_t lt__server_cap(const lt_sched_t *s, size_t i);
/* lt__server_has_room: it may be given one more instruction now. */
int lt__server_has_room(const lt_sched_t *s, size_t i);
/* lt__server_left_us estimates how long server i needs to finish what it has admitted, at
 * `now_ms`: its backlog (pace.c) less what the instructions running there have done. A
 * running one advances at 1/n of the server when n run at once; it is counted at most 90 %
 * done, since nothing says it is nearly over. */
double lt__server_left_us(const lt_sched_t *s, size_t i, int64_t now_ms);
/* lt__server_idle: it takes work, no policy limits it, and nothing of ours is there. */
int lt__server_idle(const lt_sched_t *s, size_t i);
/* lt__server_frame_need returns the largest frame server i (-1: any) would receive for
 * these inputs: values the client sends, and values held elsewhere that it would fetch. */
uint64_t lt__server_frame_need(const lt_fire_t *fi, int i);
/* lt__server_fits: it takes frames as large as these inputs need. */
int lt__server_fits(const lt_sched_t *s, size_t i, const lt_fire_t *fi);
/* lt__server_least_frame: the smallest frame limit among the servers that take work
 * (UINT64_MAX: none has one). */
uint64_t lt__server_least_frame(const lt_sched_t *s);
/* lt__server_mark_dead marks server i dead for `why` (the first reason stays), and, when
 * `final`, not to be greeted again: the loop's reap phase ends its session. lt__server_gone
 * tells whether it is dead or marked. */
void lt__server_mark_dead(lt_sched_t *s, size_t i, const char *why, int final);
int lt__server_gone(const lt_sched_t *s, size_t i);
/* lt__server_misbehaved drops server i for a protocol error (`why`): a message it sent was
 * malformed or did not match what the client sent it. It is marked dead and not greeted again
 * in this evaluation (its work is placed elsewhere at the reap), counted and logged. */
void lt__server_misbehaved(lt_sched_t *s, size_t i, const char *why);
/* lt__server_limit sets policy `policy`'s limit on server i (LT_NO_LIMIT lifts it). */
void lt__server_limit(lt_sched_t *s, size_t i, size_t policy, uint32_t n);
/* lt__server_cancel asks server i to drop the `n` instructions `seqs` (those that started
 * complete as usual); nothing when its session is over; a send that fails marks it dead. */
void lt__server_cancel(lt_sched_t *s, size_t i, uint64_t *seqs, uint32_t n);
/* lt__server_release queues `id` for release on server i (sent once a turn by
 * lt__servers_flush_releases); an id of another session is refused and logged as a bug. */
void lt__server_release(lt_sched_t *s, int i, lt_oid_t id);
void lt__servers_flush_releases(lt_sched_t *s);

/* instr.c: how a record's time on a server ends. */
typedef enum lt_settle {
  LT_SETTLE_APPLY = 0, /* the caller applies the outcome for the reason given */
  LT_SETTLE_REQUEUED,  /* its migration was confirmed: it is queued for placement again */
  LT_SETTLE_DROP       /* its twin won or carries on: it ends without effect */
} lt_settle_t;
/* lt__rec_settle ends r's time on its server (if it is out) for `why` (cp: its completion,
 * or NULL): takes it off, tells the policies, settles its migration and its copy. Called
 * only by lt__sched_end (jobs.c), the one place every end goes through. */
lt_settle_t lt__rec_settle(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why,
                           const lt_completion_t *cp);

/* jobs.c: the one settle function. */
/* lt__sched_end ends record r for `why` and applies the outcome to its task: a result or a
 * failure (cp and m: the completion and its message), placed again or its task recomputed
 * (lost, not run, taken back; `endpoint` names the server), or its task failed with `err`
 * and `msg` (cancelled). r is freed or queued again: the caller must not use it after. */
void lt__sched_end(lt_sched_t *s, lt_instr_rec_t *r, lt_end_t why, const lt_completion_t *cp,
                   const lt_msg_t *m, int err, const char *msg);

/* losses.c: what a session's loss costs, held until its server says how it ended. */
/* lt__loss_note remembers that r was lost with the session of entry idx, and holds the try
 * its loss is about to be charged. */
void lt__loss_note(lt_sched_t *s, size_t idx, lt_instr_rec_t *r);
/* lt__loss_count_restart counts a restart of j that a loss with the session of dead entry
 * `lost` caused (-1: none known): not at all when that session is known to have crashed,
 * held until it is known, counted otherwise. */
void lt__loss_count_restart(lt_sched_t *s, lt_job_rec_t *j, long lost);
/* lt__loss_dead_holder returns the dead entry that held one of the n tokens' values, or -1. */
long lt__loss_dead_holder(const lt_sched_t *s, const lt_token_t *ins, uint32_t n);
/* lt__loss_settle settles what entry idx's session cost: refunded when it `crashed`, counted
 * for good otherwise; lt__loss_forget drops the list. */
void lt__loss_settle(lt_sched_t *s, size_t idx, int crashed);
void lt__loss_forget(lt_sched_t *s, size_t idx);

/* policy.c: the core's side of the policies' hook table. */
int lt__policies_init(lt_sched_t *s);
void lt__policies_free(lt_sched_t *s);
/* lt__policies_server_new resets entry idx's limits and makes each policy's blob for it;
 * lt__policies_server_free frees them. */
int lt__policies_server_new(lt_sched_t *s, size_t idx);
void lt__policies_server_free(lt_sched_t *s, size_t idx);
void lt__policies_server_ready(lt_sched_t *s, size_t idx, const lt_msg_t *welcome);
void lt__policies_server_lost(lt_sched_t *s, size_t idx);
void lt__policies_dispatch(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx);
void lt__policies_end(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                      const lt_completion_t *cp);
void lt__policies_idle(lt_sched_t *s, int64_t now_ms);
void lt__policies_tick(lt_sched_t *s, int64_t now_ms);
/* lt__policies_stats fills out[] (max entries) with the policies' stats of server idx, or
 * in all (SIZE_MAX); returns how many. */
size_t lt__policies_stats(const lt_sched_t *s, size_t idx, lt_stat_t *out, size_t max);

/* requests.c: the loop's phase that applies what the policies asked. */
void lt__sched_apply_requests(lt_sched_t *s);

/* links.c: the sessions with the servers. */
/* lt__links_open_new greets the hosts added since the last call. */
void lt__links_open_new(lt_sched_t *s);
/* lt__link_on_message handles a session message of server idx (welcome, error, heartbeat,
 * the load report): 0 when the loop should go on with it (done, value), 1 when handled. */
int lt__link_on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m);
/* lt__link_watch reads server idx's connection monitor; lt__link_watch_child notices that a
 * spawned server exited. Both only mark a server dead. */
void lt__link_watch(lt_sched_t *s, size_t idx);
void lt__link_watch_child(lt_sched_t *s, size_t idx);
/* lt__link_close ends server idx's session after it was marked dead (the reap phase):
 * closes it, tells the others, schedules the next greeting. 1 when the session had been
 * welcomed (its records and values are lost), 0 when it never was. */
int lt__link_close(lt_sched_t *s, size_t idx);
/* lt__links_tick greets dead servers again, pings, sends windows, finds missed heartbeats. */
void lt__links_tick(lt_sched_t *s, int64_t now_ms);
/* lt__link_drain stops giving server idx work and cancels what waits there; lt__link_retire
 * ends its session for good (bye). */
void lt__link_drain(lt_sched_t *s, size_t idx);
void lt__link_retire(lt_sched_t *s, size_t idx);
/* lt__links_takers counts the servers that take work. */
int lt__links_takers(const lt_sched_t *s);
/* lt__links_close_all closes every session (the evaluator is freed). */
void lt__links_close_all(lt_sched_t *s);
/* lt__links_free frees the list of servers announced to each server. */
void lt__links_free(lt_sched_t *s);

/* ---- a policy's two calls (policy.h) ------------------------------------------------------ */

static inline void lt__policy_ask(lt_policy_t *p, const lt_req_t *req) {
  lt_req_queue_t *q = p->q;
  lt_req_t *r = LT_VEC_PUSH(q->reqs, q->n, q->cap);
  if (r == NULL) {
    lt__log(LT_LOG_WARN, "policy %s: a request dropped (out of memory)", p->ops->name);
    return;
  }
  *r = *req;
  r->policy = p->id;
}

static inline void *lt__policy_server(const lt_policy_t *p, size_t idx) {
  return p->s->srv[idx].blob[p->id];
}

#endif
