/* server.h: the insides of the simulator's model of lithium-server, shared by its three
 * files: server.c (sessions, messages, the process: kill, stop, pause, restart), store.c
 * (values, fetches waiting here, peer fetches), execute.c (an EXECUTE's instructions taken
 * in) and task.c (tasks run and finished into DONE). What the model is and what it mirrors:
 * server.c's header comment. */
#ifndef LT_SIM_SERVER_H
#define LT_SIM_SERVER_H

#include <string.h>

#include <uthash.h>
#include "sim.h"

#define GRACE_US        2000000 /* a peer's fetch of an unknown id waits this long (fetch.c) */
#define MAX_STAGES      16
#define DONE_MAX_FRAMES 4096
#define ERRLEN          (LT_KERNEL_ERRMSG_MAX + 300) /* every error message kept here */

enum { V_PENDING, V_SET, V_FAILED };

typedef struct sval {
  lt_oid_t id;
  int state;
  lt_value_t *v;
  int status;
  char err[ERRLEN];
  int copy;         /* fetched from a peer for local readers */
  int holder;       /* copy: the server it is fetched from */
  uint32_t readers; /* copy: the readers holding it */
  int want_release; /* copy on its way when its last reader came: the holder drops the
                       value once it is here (server/peer.c, lt__peer_need) */
  uint64_t secret;  /* want_release: the reader's session's, which the RELEASE carries */
  int doomed;       /* failed, and dropped once its readers and fetches saw it (recheck) */
  UT_hash_handle hh;
} sval_t;

typedef struct sin {
  int kind;
  lt_oid_t id;
  int holder; /* REF: the holding server, -1 here */
  int bound;
  int failed; /* its status when it failed, else 0 */
  char err[ERRLEN];
  lt_value_t *val;
} sin_t;

enum { T_PARKED, T_QUEUED, T_RUNNING };

typedef struct stask {
  uint64_t seq;
  int link; /* its session's link */
  uint32_t op, flags, pack, nst;
  uint32_t kidx[MAX_STAGES];
  lt_value_t *param[MAX_STAGES];
  uint32_t nin;
  sin_t *in;
  lt_oid_t *outs; /* pack entries: one each */
  int state;
  uint64_t start_us;
  uint64_t tid;          /* names it for its events (its pointer may be freed first) */
  uint64_t timeout_us;   /* its session's deadline when it came (0: none) */
  lt_exec_result_t *res; /* per member once run */
  struct stask *next;
} stask_t;

typedef struct sess {
  int link;
  uint64_t client, secret, inline_max;
  uint32_t max_active;
  uint32_t timeout_ms; /* the deadline of an instruction (EXECUTE), 0: none */
  uint64_t dones;      /* dones sent in the session so far, lost ones too (the last number) */
  struct sess *next;
} sess_t;

typedef struct wfetch { /* a fetch waiting here for its value */
  int asker;            /* a server, or -1: the client on link `link` */
  uint64_t asker_gen;
  int link;
  lt_oid_t id;
  int release;
  int64_t deadline; /* unknown id: answered LT_ENOENT then; 0: it exists */
  struct wfetch *next;
} wfetch_t;

struct sim_server {
  int idx;
  int up, stopping;
  uint64_t gen; /* a new one per process: events of an older one do nothing */
  uint64_t incarnation;
  double speed;
  uint32_t threads, running, completed;
  int64_t paused_until;
  /* The last crash, for the welcome of the client's next session (crashlog.c): the
   * client's instructions running then, the culprit, the incarnation that died. */
  uint64_t *crashed;
  uint32_t ncrashed;
  uint64_t crash_culprit, crashed_incarnation;
  int in_recheck, again;
  uint64_t next_tid;
  uint32_t ndoomed; /* store entries doomed */
  int exiting;      /* stopping, idle: its exit is scheduled */
  sess_t *sessions;
  sval_t *store;
  stask_t *tasks;
  wfetch_t *waits;
  /* Messages that arrived while the process was down or paused, in arrival order. */
  struct held {
    int link;
    sim_msg_t *m;
    struct held *next;
  } * held, *held_tail;
};

/* How the notes name an id: its instruction (seq / LT_MAX_PARTS+1) and part. */
#define ID(seq)   ((unsigned long long)((seq) / (LT_MAX_PARTS + 1)))
#define PART(seq) ((unsigned long long)((seq) % (LT_MAX_PARTS + 1)))

/* set_err copies an error message, cut to the room there is. */
static inline void sv_set_err(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static inline sim_server_t *sv_of(sim_world_t *w, int i) {
  return w->srv[i];
}

/* kept: its outputs go into the store (not only back to the client). */
static inline int sv_kept(const stask_t *t) {
  return !(t->flags & LT_INSTR_RETURN) || (t->flags & LT_INSTR_KEEP);
}

/* one_output: its op makes exactly one output, whose id is known before it runs. */
static inline int sv_one_output(const stask_t *t) {
  return lt__op(t->op)->outputs == LT_OP_OUT_ONE;
}

/* members: a pack's k members, or 1. */
static inline uint32_t sv_members(const stask_t *t) {
  return t->pack > 1 ? t->pack : 1;
}

/* server.c */
int sv_server_of(const sim_world_t *w, const char *ep); /* -2: not a server of the world */
sess_t *sv_session(sim_server_t *v, int link);
/* sv_send sends m (with the load report) on link; vals: the payload frames' values. */
void sv_send(sim_world_t *w, sim_server_t *v, int link, lt_msg_t *m, lt_value_t *const *vals);

/* store.c */
sval_t *sv_find(sim_server_t *v, lt_oid_t id);
sval_t *sv_put(sim_server_t *v, lt_oid_t id);
void sv_drop(sim_server_t *v, sval_t *e);
void sv_release(sim_server_t *v, lt_oid_t id); /* a client's release: not a copy */
void sv_set(sim_world_t *w, sim_server_t *v, sval_t *e, lt_value_t *val);
void sv_fail(sim_world_t *w, sim_server_t *v, sval_t *e, int status, const char *err);
/* sv_answer answers fetch f with entry e (NULL: unknown); sv_wake answers those whose value
 * is there, failed or overdue; sv_wait_fetch parks a fetch (a copy of f). */
void sv_answer(sim_world_t *w, sim_server_t *v, wfetch_t *f, sval_t *e);
void sv_wake(sim_world_t *w, sim_server_t *v);
void sv_wait_fetch(sim_world_t *w, sim_server_t *v, wfetch_t f);
/* sv_release_at tells server `holder` (a peer's RELEASE) to drop its value `id`. */
void sv_release_at(sim_world_t *w, sim_server_t *v, lt_oid_t id, int holder, uint64_t secret);
/* sv_last_reader: a last reader (LT_INSTR_RELEASE_INPUTS) of `id` shares copy e fetched
 * earlier: the holder is told to drop the value, at once or, while e is on its way, once it
 * is here (server/peer.c, lt__peer_need). */
void sv_last_reader(sim_world_t *w, sim_server_t *v, sval_t *e, uint64_t secret);
/* sv_fetch_from makes a pending copy of id for a reader and asks its holder for it. */
void sv_fetch_from(sim_world_t *w, sim_server_t *v, lt_oid_t id, int holder, uint64_t secret,
                   int release);

/* execute.c */
void sv_execute(sim_world_t *w, sim_server_t *v, sess_t *s, const lt_msg_t *m);

/* task.c */
void sv_task_free(stask_t *t);
void sv_task_unlink(sim_server_t *v, stask_t *t);
void sv_fail_all(sim_world_t *w, sim_server_t *v, stask_t *t, int status, const char *err);
/* sv_recheck binds parked tasks to the values there now, answers fetches, starts what can
 * run (sv_settle); inside a batch (in_recheck) it is only noted and runs once after. */
void sv_recheck(sim_world_t *w, sim_server_t *v);
void sv_settle(sim_world_t *w, sim_server_t *v);

#endif
