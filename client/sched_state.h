/* sched_state.h: the dispatcher's state as data: the types its files share (a task's job
 * record, an instruction record and its states, a server's pacing, connection slot and table
 * entry, the stats snapshot, and the dispatcher itself, struct lt_sched). Types and sizes only:
 * no function is declared here, so a file that includes it may read the state and nothing
 * more. A field's comment names the file that writes it; policies and placement read the state
 * through policy_view.h, the core's files change it through the calls of its owners' headers
 * (sched_records.h, sched_jobs.h, sched_servers.h, sched_links.h, sched_loop.h). Dispatcher
 * thread only, except the stats snapshot (under its mutex). A type a header shares is
 * lt_<noun>_t (struct lt_<noun>); a type private to one .c file has no prefix. */
#ifndef LT_SCHED_STATE_H
#define LT_SCHED_STATE_H

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
  uint32_t restarts;  /* runs again from its input after a loss (failures.c counts them) */
  uint32_t reruns;    /* runs again from its input for a straggler (backup.c): at most one */
  double work_us;     /* service time of its instructions that completed, every run of it: what
                         running it again from its input would redo at least (backup.c) */
  /* Of restarts, those owed to sessions whose end is not known yet: not counted toward
   * max_retries, refunded if it was a crash (failures.c). */
  uint32_t restarts_held;
  uint64_t epoch;    /* s->ends when this run (generation) first held a value on a server
                        (UINT64_MAX: none yet): it may hold values of sessions that ended
                        after (entries.c) */
  uint64_t num;      /* its task number (= its instance's), the key of s->jobs */
  UT_hash_handle hh; /* s->jobs, by task number */
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
  uint32_t tries;      /* dispatches lost to a failed server (failures.c counts them) */
  uint32_t tries_held; /* of those, lost with sessions whose end is not known yet (failures.c) */
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
/* A server's noise (pace.c, lt__pace_noise) halves this often: how long a host's load lasts,
 * not how fast it is. */
#define LT_NOISE_HALF_MS 5000

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
  const void *chains[LT_COSTS * 4]; /* the chains measured on some server ... */
  size_t nchains;
  int64_t chains_ms; /* ... as of this millisecond (0: never looked) */
  size_t mean_idx;
  int64_t mean_miss_ms;
  size_t next; /* the slot a chain without one takes next */
} lt_pace_memo_t;

typedef struct lt_pace {
  double rtt_us;    /* smoothed ping round trip; 0 before the first */
  double noise_us;  /* the longest delay seen lately beyond the work: a ping's round trip, a
                       completion's arrival after its service time (lt__pace_noise) */
  int64_t noise_ms; /* when noise_us was taken */
  double svc_us;    /* smoothed service time over all chains; 0 before the first completion */
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
 * (failures.c). */
typedef struct lt_loss {
  uint64_t seq;    /* the instruction (0 for a restart) */
  uint64_t task;   /* its task (job) number */
  const void *key; /* its chain (template stages), NULL for a restart */
  int restart;     /* a restart of `task`, held (lt_job_rec_t.restarts_held) */
} lt_loss_t;

/* The life of one connection slot (scheduler.c). A slot is one session with one server: a
 * slot whose session was ready and then died stays dead (references to values it held name
 * its session, so they are known lost), and the server is greeted again in a new slot, its
 * successor; once nothing refers to the dead one, its entry is reclaimed for a later session
 * (entries.c). A slot that never got a welcome is greeted again in place. */
typedef struct lt_slot {
  size_t host;              /* index in the evaluator's hosts (the door's hosts) */
  int watch_fd;             /* read end of a spawned server's stdout (EOF: it exited), or -1 */
  int answered;             /* counted out of lt_eval_start's wait */
  int was_ready;            /* its session was welcomed */
  int lacks;                /* its last welcome lacks a module of the program: it gets no work */
  int lacks_warned;         /* that was said */
  int spoke;                /* and it sent something after its welcome (links.c) */
  uint64_t dones_in;        /* the dones of this session that arrived: the last one's number */
  uint32_t handshakes_lost; /* connections closed during the handshake since the last
                               welcome (links.c, LT_HANDSHAKE_TRIES) */
  int mute;                 /* its session ended for never speaking after its welcome */
  int probation;            /* a session of this host never spoke after its welcome, nor has
                               one since: no work until this one speaks (links.c) */
  int64_t retry_at_ms;      /* dead: when to greet the server again; 0: never */
  uint32_t backoff_ms;      /* the wait before the next greeting */
  long successor;           /* the slot that took over this server, or -1 */
  uint32_t sessions;        /* sessions with this server so far, this one included */
  long predecessor;         /* the slot whose session with this server ended before, or -1 */
  int removed;              /* lt_eval_remove_host: its work moves off (the drain policy) */
  lt_instr_rec_t *out;      /* our instructions out there, oldest first (instr.c) */
  int64_t idle_ms;          /* when it last came to run nothing of ours (for the log) */
  lt_loss_t *lost;          /* what that session was running when it ended, and the restarts its
                               loss caused (failures.c) */
  uint32_t nlost;
  size_t caplost;
  /* How its session ended, from its successor's welcome: 1 a crash, -1 not, 0 not known
   * yet (failures.c). */
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
 * indexes, never pointers, across a call that may add a slot). An entry whose session ended
 * and that nothing refers to any more is reclaimed (entries.c): `sid` 0, reset, reused by
 * the next session; what outlives a turn names a session by its holder id (sid and index),
 * never by its index alone. */
typedef struct lt_server {
  uint32_t sid;   /* the session's id, unique in the dispatcher; 0: a free entry (entries.c) */
  uint64_t ended; /* s->ends when its welcomed session ended; 0 before (entries.c) */
  lt_conn_t conn;
  lt_slot_t slot;
  lt_relq_t relq;    /* ids to release there this turn */
  uint32_t admitted; /* instructions counted in its window */
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
  size_t slot;  /* the connection slot it was copied from */
  uint32_t sid; /* and that slot's session then */
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
  double noise_us; /* lt__pace_noise_us as published */
  uint64_t starved;
  uint32_t running, queued; /* of inflight: seen in its threads, and the rest */
  float svc_last[LT_TAIL];  /* the pace's ring of service times, copied when it grew */
  uint64_t svc_n;
  lt_stat_t pstats[LT_POLICY_MAX * LT_POLICY_STATS]; /* the policies' own of this server */
  size_t npstats;
} lt_stats_server_t;

/* The dispatcher's counters and servers as last published: `mu` guards them and is held
 * only to copy in or format out, never with another lock. */
typedef struct lt_stats_snap {
  pthread_mutex_t mu;
  uint64_t instructions, bytes_to, bytes_from, retries, stray;
  uint64_t protocol_errors, lost_dones;
  uint64_t groups, grouped, packs, packed;
  int64_t t0_ms;  /* when the dispatcher started: elapsed_ms counts from it */
  size_t entries; /* entries of the server table in use (entries.c) */
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
  lt_server_t *srv;        /* the server table: one entry per connection slot (servers.c) */
  size_t nsrv, capsrv;
  uint32_t next_sid; /* the last session id given (entries.c) */
  uint64_t ends;     /* welcomed sessions ended so far: the epoch of lt_job_rec_t */
  uint64_t gone_bytes_to, gone_bytes_from; /* traffic of reclaimed entries (entries.c) */
  size_t initial;                          /* hosts known at start: they answer lt_eval_start */
  size_t hosts_seen;                       /* the evaluator's hosts opened so far */
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
  lt_due_t *due;       /* jobs whose result is to be fetched (jobs.c, fetch.c) */
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
  uint64_t retries; /* tries and restarts counted, less those refunded (failures.c) */
  uint64_t stray;   /* completions for instructions a server was not running for us */
  int freed;        /* a server's admitted count fell this turn: the on_idle hooks run */
  uint64_t groups;  /* groups of instructions sent as one hand-off (grain, dispatch.c) */
  uint64_t grouped; /* instructions in those groups */
  uint64_t packs;   /* of those groups, the ones sent as one packed instruction */
  uint64_t packed;  /* tasks in those packs */

  /* servers dropped for a completion that was not of what was sent them (done_check.c) */
  uint64_t protocol_errors;
  uint64_t lost_dones;                 /* dones servers sent that never arrived (links.c) */
  lt_policy_t policies[LT_POLICY_MAX]; /* the enabled policies, in registry order */
  size_t npolicies;
  size_t nplacers;         /* of those, the ones whose place hook runs (policy.c) */
  lt_req_queue_t requests; /* what they asked, for the loop's apply phase (requests.c) */
};

#endif
