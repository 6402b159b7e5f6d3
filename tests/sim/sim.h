/* sim.h: the deterministic simulator (docs/architecture.md, "The simulator"). The client's
 * real dispatcher (client/scheduler.c and its files) runs in one thread on a virtual clock
 * against simulated lithium-servers, over an in-memory network, with faults and timings
 * drawn from one seed. Shared by its files:
 *   net.c     the virtual clock, the event queue, the seeded random source, and the
 *             in-memory transport (the dispatcher's lt_net_t) with per-link FIFO delays
 *   server.c  the model of lithium-server: sessions, store, tasks, packs, parking, fetch,
 *             peer fetch, release, cancel, heartbeats, stop, kill, pause, restart
 *   world.c   one run: the program and options drawn, the evaluator's door (tasks in,
 *             results checked), the faults, the invariants, the loop of turns
 *   main.c    seeds, the summary line, replay commands
 * One thread; nothing here is shared with another process. */
#ifndef LT_SIM_H
#define LT_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include <lithium/skel.h>

#include "backend.h"
#include "conn.h"
#include "exec.h"
#include "module.h"
#include "msg.h"
#include "value.h"

typedef struct sim_world sim_world_t;

/* ---- net.c: clock, events, random source, transport ------------------------------------- */

/* splitmix64: one seed decides everything. */
typedef struct sim_rng {
  uint64_t s;
} sim_rng_t;
uint64_t sim_rand(sim_rng_t *r);
/* sim_below returns a number in [0, n) (0 when n is 0); sim_chance is 1 with probability
 * num/den. */
uint64_t sim_below(sim_rng_t *r, uint64_t n);
int sim_chance(sim_rng_t *r, uint64_t num, uint64_t den);

/* An event of the queue: fn(w, arg) at `at` (virtual µs); ties in the order scheduled. */
typedef void (*sim_fn)(sim_world_t *w, void *arg);
void sim_at(sim_world_t *w, int64_t at, sim_fn fn, void *arg);
/* sim_next_at returns the time of the next event, INT64_MAX when none. */
int64_t sim_next_at(const sim_world_t *w);
/* sim_run_due runs every event due at the current time (those they schedule for now too). */
size_t sim_run_due(sim_world_t *w);
void sim_events_free(sim_world_t *w);

/* A message in flight: its parts' bytes (frame 0 the encoded header). */
typedef struct sim_msg {
  lt_bytes_t *frames;
  size_t n;
  int64_t at; /* when it arrives */
  struct sim_msg *next;
} sim_msg_t;
sim_msg_t *sim_msg_encode(const lt_msg_t *m, lt_value_t *const *values);
void sim_msg_free(sim_msg_t *m);

/* A client link (one lt_conn_t's DEALER): to server `srv`, its two directions FIFO. */
typedef struct sim_link {
  int id;
  int srv;
  int open;                /* not closed by the client */
  int64_t last_to_srv;     /* arrival time of the last message sent: FIFO */
  int64_t last_to_cli;     /* the same towards the client */
  sim_msg_t *in, *in_tail; /* towards the client, in arrival order */
  int disconnected;        /* a DISCONNECTED event waits for the monitor */
  int64_t disc_at;
} sim_link_t;

/* sim_net_ops is the transport the dispatcher is given (its ctx: the world). */
extern const lt_net_ops_t sim_net_ops;
/* sim_delay draws a message's delay on one link (µs). */
int64_t sim_delay(sim_world_t *w);
/* sim_to_client queues message m (taken) from the server to the client on link l. */
void sim_to_client(sim_world_t *w, sim_link_t *l, sim_msg_t *m);
/* sim_link_lost tells the client links of server srv that its process went away. */
void sim_link_lost(sim_world_t *w, int srv);
/* sim_net_quiet: no message is on its way between the client and a server (one held for a
 * server that is down or paused is not on its way). */
int sim_net_quiet(const sim_world_t *w);
void sim_links_free(sim_world_t *w);

/* ---- server.c: the model of lithium-server ---------------------------------------------- */

typedef struct sim_server sim_server_t;
int sim_server_new(sim_world_t *w, int idx, double speed, uint32_t threads);
void sim_server_free(sim_server_t *v);
/* sim_server_deliver hands message m (taken) of client link l to the server. */
void sim_server_deliver(sim_world_t *w, int srv, sim_link_t *l, sim_msg_t *m);
/* Faults: kill (the process dies: everything it held is gone), stop (graceful: no new work,
 * queued work fails LT_ESHUTDOWN, exits once idle), pause/resume (SIGSTOP/CONT), restart (a
 * new incarnation on the same endpoint). */
void sim_server_kill(sim_world_t *w, int srv);
void sim_server_stop(sim_world_t *w, int srv);
void sim_server_pause(sim_world_t *w, int srv, int64_t until);
/* sim_server_crash: a worker got SIGSEGV running instruction `culprit`; the process dies, its
 * supervisor starts it again at once, and its next welcome to the client says so. */
void sim_server_crash(sim_world_t *w, int srv, uint64_t culprit);
void sim_server_restart(sim_world_t *w, int srv);
int sim_server_up(const sim_world_t *w, int srv);
double sim_server_speed(const sim_world_t *w, int srv);
int sim_server_stopping(const sim_world_t *w, int srv); /* up, and ends once idle */
/* sim_server_values counts the values of the client held by the server's sessions (not
 * copies fetched for a reader); sim_server_busy counts its tasks. */
size_t sim_server_values(const sim_world_t *w, int srv, char *first, size_t len);
/* sim_server_holds tells whether server srv is up with messages waiting for it to read them
 * (it is paused). */
int sim_server_holds(const sim_world_t *w, int srv);
size_t sim_server_tasks(const sim_world_t *w, int srv);
/* sim_server_peer_lost fails the server's fetches from holder `holder` (a LOST message). */

/* ---- hosts.c: the hosts the evaluator knows, and draw 2's changes to them ------------- */
/* sim_draw_hosts draws, from the stream `fourth` (draw 2 only), a server added to the
 * evaluation at a time within `horizon` (lt_eval_add_host) and a host other than server 0
 * removed from it (lt_eval_remove_host); call it after every other draw. */
int sim_draw_hosts(sim_world_t *w, int64_t horizon);
/* sim_hosts_poll tells whether the hosts changed since it last said so. */
int sim_hosts_poll(sim_world_t *w);

/* ---- draw.c: the program, its options and its tasks, drawn by the seed ------------------- */

typedef struct sim_prog {
  lt_skel_t *skel;
  char shape[200];   /* the skeleton, for the report */
  char options[300]; /* the options set, "key=value ..." */
  lt_options_t opts;
  lt_value_t **inputs; /* one per task */
  uint8_t *poison;     /* per task: its input crashes the server that runs it (crashy) */
  uint8_t *slow;       /* per task: its input makes kernels slow (slowing) */
  uint32_t ntasks;
  uint32_t waves; /* tasks arrive in this many waves */
} sim_prog_t;
/* sim_draw draws the program; LT_OK, or an error with the reason printed. */
int sim_draw(sim_world_t *w, sim_prog_t *p, const char *modules);
void sim_prog_free(sim_prog_t *p);
/* sim_prog_set sets option key=value of p, noted in p->options; an error is printed. */
int sim_prog_set(sim_prog_t *p, const char *key, const char *value);
/* sim_prog_overrides sets the run's --set options (KEY=VALUE each) of p, over what was drawn. */
int sim_prog_overrides(const sim_world_t *w, sim_prog_t *p);

/* ---- door.c: the evaluator's side (backend.h's door), results checked -------------------- */

typedef struct sim_door sim_door_t;
extern const lt_eval_door_t sim_door_calls;
/* sim_door_new makes the evaluator of the world's tasks (the inputs are borrowed). */
sim_door_t *sim_door_new(sim_world_t *w, const sim_prog_t *p);
void sim_door_free(sim_door_t *d);
/* sim_expect runs the sequential evaluator (client/local.c) over every task: the results
 * the run must give. */
int sim_expect(sim_door_t *d, const lt_template_t *t, const lt_options_t *o);
/* sim_door_submit makes wave `k` of the tasks ready for the dispatcher to take. */
void sim_door_submit(sim_door_t *d, uint32_t k);
/* What the run has delivered, and whether every task is done. */
uint64_t sim_door_delivered(const sim_door_t *d);
int sim_door_waiting(const sim_door_t *d); /* tasks submitted, not taken yet */
void sim_door_stop(sim_door_t *d);

/* ---- scale.c: a scale run, no faults: many servers of uneven speeds ---------------------- */

enum { SIM_SCALE_FARM = 1, SIM_SCALE_PIPELINE = 2 };
/* sim_scale_draw makes a scale run's program: a farm of one kernel or a 3-stage lazy
 * pipeline, over p->ntasks inputs (w->p.tasks, default 100 000), default options but the
 * window (3 x cores). */
int sim_scale_draw(sim_world_t *w, sim_prog_t *p, const char *modules);
/* sim_scale_servers makes the servers: speeds 1, 2, 4, 8 in turn, `cores` threads each. */
int sim_scale_servers(sim_world_t *w);
/* sim_scale_cost is what a chain of kernels costs (µs on a server of speed 1) on one
 * member's inputs: each stage 1 to 10 ms, drawn from a hash of the kernel and of the bytes
 * it reads, so that a task costs the same wherever and however often it runs, fused into
 * one instruction or not. */
double sim_scale_cost(sim_world_t *w, const lt_exec_stage_t *st, const uint32_t *kidx, uint32_t nst,
                      const lt_bytes_t *in, uint32_t nin);
/* sim_scale_busy counts a kernel run of `us` from now on a server of speed `speed` in the
 * run's profile: the work done in each virtual millisecond. */
void sim_scale_busy(sim_world_t *w, int64_t us, double speed);
/* sim_scale_profile prints the servers' use (work done / what the total speed could do)
 * in each tenth of the run up to `end` (µs), to stderr. */
void sim_scale_profile(const sim_world_t *w, int64_t end);
/* sim_scale_use tells how much of what the servers of each speed (1, 2, 4, 8) could have
 * done up to `end` (µs) they did. */
void sim_scale_use(const sim_world_t *w, int64_t end, double use[4]);
/* sim_scale_ideal is the program's work over the total speed (µs): the shortest run. */
double sim_scale_ideal(sim_world_t *w, const sim_prog_t *p, const lt_template_t *t);

/* ---- world.c ------------------------------------------------------------------------------ */

#define SIM_MAX_SERVERS      1024 /* a scale run's (scale.c); the arrays of a world */
#define SIM_DRAW_MAX_SERVERS 16   /* a seed's: --servers at most, servers added up to it */
#define SIM_LOG              64   /* last events kept for a violation's report */
#define SIM_POISON           '#'  /* in a crashy world, a byte that crashes the kernel reading it */
#define SIM_SLOW             '%' /* in a slow world, a byte that makes the kernel reading it slow */
#define SIM_SLOW_US          1000000 /* how much slower: far over any deadline draw.c sets */

/* A run's parameters: the seed and what the command line forces (0: drawn). */
#define SIM_MAX_SET 8 /* --set options of one run */

typedef struct sim_params {
  uint64_t seed;
  uint32_t servers;
  uint32_t tasks;
  int verbose;
  uint32_t keep;  /* run only the first `keep` tasks of those drawn (a shrunk seed), 0: all */
  int quiet;      /* no report of a violation (a shrinking attempt) */
  uint32_t draw;  /* what a seed draws: 1, the first version (the seeds kept before 2 came);
                     2 (0: the default) adds the shapes while, if and map_reduce, and servers
                     added mid-run, each from a stream of its own */
  uint32_t scale; /* a scale run (scale.c): SIM_SCALE_FARM or SIM_SCALE_PIPELINE, 0: a seed's */
  uint32_t cores; /* a scale run's cores per server (its window is 3 x cores) */
  const char *set[SIM_MAX_SET]; /* --set KEY=VALUE: options set after the draw, over it */
  uint32_t nset;
} sim_params_t;

/* What a run did. */
typedef struct sim_result {
  double ideal_us, makespan_us; /* a scale run's: work / total speed, and the run's */
  double work_us;               /* the program's work (µs on a server of speed 1) */
  double use[4];                /* what the servers of speed 1, 2, 4, 8 did of what they could */
  double work_run_us;           /* the kernels' work run, copies and reruns among it */
  uint64_t turn_ns, turns;      /* the dispatcher's own CPU time in its turns, and how many */
  uint64_t instrs;              /* instructions sent */
  uint64_t backups, reruns, migrated; /* copies of stragglers, tasks run again, moved */
  uint64_t peer_bytes;                /* bytes of values servers fetched from each other */
  uint64_t locality_kept; /* placements the locality policy kept on the inputs' holder */
  uint64_t events;
  uint64_t faults;
  uint64_t tasks;
  uint32_t drawn; /* the tasks the run had */
  int violation;  /* 0 or 1: it stopped at the first */
  char what[512];
} sim_result_t;

struct sim_world {
  sim_params_t p;
  sim_rng_t rng;
  sim_rng_t third;     /* the deadlines' draws, after `more`'s, for the same reason */
  sim_rng_t more;      /* faults added since the first seeds were kept: a stream of their own, so
                          that what `rng` draws (and a kept seed's run without them) is unchanged */
  sim_rng_t fourth;    /* draw 2's: the shapes and the servers it adds, same reason */
  sim_rng_t fifth;     /* the lost dones' draws, same reason */
  int64_t now;         /* virtual µs */
  uint64_t events;     /* run so far */
  uint64_t peer_bytes; /* bytes of values answered to peers' fetches (store.c) */
  void *heap;          /* the event queue (net.c) */
  size_t nheap, capheap;
  uint64_t next_ev;    /* tie-break of the queue */
  uint64_t in_transit; /* messages sent to a server, not arrived yet */
  uint64_t handled;    /* messages the dispatcher sent and read: its virtual CPU clock */
  sim_link_t **links;  /* every client link made, by id */
  size_t nlinks, caplinks;
  sim_server_t *srv[SIM_MAX_SERVERS];
  uint32_t nsrv; /* the servers, those added mid-run among them */
  char eps[SIM_MAX_SERVERS][64];
  uint32_t nhosts;                     /* the hosts the evaluator knows (hosts.c): a prefix */
  unsigned char gone[SIM_MAX_SERVERS]; /* removed from the evaluation (lt_eval_remove_host) */
  int hosts_changed;                   /* since the dispatcher last polled the hosts */
  /* The program's kernels, resolved in this process: the simulated servers run them. */
  lt_kernel_fn *fns;
  uint32_t nkernels;
  double *kcost; /* each kernel's virtual cost (µs on a server of speed 1) */
  lt_modules_t *mods;
  uint64_t client_id, secret;
  int64_t delay_max;                    /* the largest message delay (µs) */
  int64_t mute_until[SIM_MAX_SERVERS];  /* a server's messages to the client stall until then */
  uint32_t lose_dones[SIM_MAX_SERVERS]; /* a server's next dones to the client to be lost */
  int64_t fetch_timeout_us;
  int violated;
  int64_t violated_at;
  int tearing; /* the run is over: events only free what they own */
  int calm;    /* every task is done: no more faults */
  uint32_t max_retries;
  int crashy;         /* a kernel run on an input holding SIM_POISON crashes its server */
  int slowing;        /* a kernel run on an input holding SIM_SLOW takes SIM_SLOW_US more */
  double work_us;     /* a scale run's work (µs on a server of speed 1): its tasks' */
  double work_run_us; /* ... and what its servers started, copies and reruns among it */
  double speed;       /* ... and the total speed of its servers (speed x cores) */
  double *busy;       /* ... and its profile: work done in each virtual millisecond */
  double by_speed[4]; /* ... and the work done by the servers of speed 1, 2, 4, 8 */
  size_t nbusy;
  char why[512];
  char log[SIM_LOG][160];
  uint64_t nlog;
  uint64_t faults;
};

/* sim_run runs the seed of `p` to its end or its first violation. */
void sim_run(const sim_params_t *p, sim_result_t *out);
/* sim_note keeps a line of what happened for a violation's report (and prints it when
 * verbose); sim_violation stops the run with a message. */
void sim_note(sim_world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_violation(sim_world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
