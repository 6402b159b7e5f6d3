/* policy.h: the dispatcher's policies behind one hook table (DESIGN.md 7a, "policies").
 * A policy includes policy_view.h and nothing of the core: it reads the dispatcher's state
 * (records, the server table, pacing) and never writes it: it keeps its own state — once, and per
 * server in a blob whose size it declares and the core allocates with each server entry (nng's
 * pipe_size) — and asks for what it wants done with lt__policy_ask. The loop applies the asks
 * between its phases (Go's sysmon decides; the scheduler acts), after checking that they still make
 * sense: a record asked about may have completed in between. A policy counts what it did, from
 * on_end and on_applied, and publishes its counters with `stats`. A new policy is one file and
 * one line in the registry (policy_registry.h). Dispatcher thread only, except `stats`, which the
 * dispatcher calls while it publishes. */
#ifndef LT_POLICY_H
#define LT_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "instance.h"
#include "options.h"
#include "policy_registry.h"

typedef struct lt_sched lt_sched_t;
typedef struct lt_instr_rec lt_instr_rec_t;

#define LT_POLICY_STATS 4          /* stats one policy may publish, per server and in all */
#define LT_NO_LIMIT     UINT32_MAX /* a server limit that limits nothing */

/* Why an instruction record's time on a server ended (every end goes through one settle
 * function with one of these, jobs.c lt__sched_end). */
typedef enum lt_end {
  LT_END_DONE = 0,   /* it completed with a result */
  LT_END_FAILED,     /* its kernel failed (or a value it needed was lost elsewhere) */
  LT_END_NOT_RUN,    /* the server says it never ran: stopping, or cancelled */
  LT_END_LOST,       /* its server's session ended with it out there */
  LT_END_TAKEN_BACK, /* a policy took it back from a server that held it far too long */
  LT_END_ABORTED,    /* the client gives it up: its task fails (the evaluator is freed, no
                        server can take it, it is too big, out of memory) */
} lt_end_t;

/* What a policy asks the core to do (lt__policy_ask). Records are named by their instruction
 * id (`seq`), tasks by number, servers by index into the table. */
typedef enum lt_req_kind {
  LT_REQ_COPY = 0,  /* run a copy of record `seq` on server `server`: the first result wins */
  LT_REQ_RECALL,    /* cancel record `seq` on its server; once the server confirms it never
                       ran, place it again (a migration) */
  LT_REQ_TAKE_BACK, /* cancel record `seq` on its server and place it again now (charged as a
                       loss) */
  LT_REQ_LIMIT,     /* admit at most `n` instructions on `server` (LT_NO_LIMIT: no limit), for
                       this policy; the smallest limit of all policies holds */
  LT_REQ_FAIL,      /* fail task `task` with `err` and `msg`, and cancel its record `seq` if it
                       is out */
  LT_REQ_SETTLE,    /* the core's own, never a policy's (one from a policy is ignored): settle
                       what server entry `server`'s ended session cost the tasks (failures.c):
                       refunded when `n` is 1 (it crashed: nobody's fault but the culprit's),
                       counted for good when 0 */
  LT_REQ_DRAIN,     /* give `server` no new work and cancel what waits there */
  LT_REQ_RETIRE,    /* end `server`'s session for good (bye) */
  LT_REQ_RERUN,     /* run task `task` again from its input: its record `seq`, a straggler
                       that no copy can stand in for (its output is named to successors on its
                       server), holds the chain up there; the old run's records are
                       cancelled where they wait and their results ignored. Once a task. */
} lt_req_kind_t;

#define LT_REQ_CORE SIZE_MAX /* the `policy` of a request the core files itself */

typedef struct lt_req {
  lt_req_kind_t kind;
  size_t policy; /* filled in by lt__policy_ask; LT_REQ_CORE for the core's own */
  size_t server;
  uint64_t seq;
  uint64_t task;
  uint32_t n;
  int err;
  char msg[256];
} lt_req_t;

/* One number a policy publishes in the stats (`key` is a static string). */
typedef struct lt_stat {
  const char *key;
  int is_bool;
  uint64_t v;
} lt_stat_t;

typedef struct lt_policy lt_policy_t;

#define LT_PLACE_OUT 1e300 /* a weight that excludes a server from a placement */

/* What a placement shows the policies of one instruction before it chooses (placement.c): its
 * inputs, the bytes of them each server holds, and the live holder of most. */
typedef struct lt_place {
  const lt_fire_t *fi;
  const uint64_t *bytes; /* of its inputs, held by each server (s->nsrv entries) */
  uint64_t total;        /* bytes of its inputs held on servers, in all */
  int holder;            /* the live server that holds most of them and takes work, or -1 */
  int chained;           /* fired by its predecessor's dispatch: it follows its input */
  const double *weight;  /* the weights the policies set (NULL while none is set) */
} lt_place_t;

/* A policy's hooks; any may be NULL. `idx` names a server entry. */
typedef struct lt_policy_ops {
  const char *name;
  size_t state_size;  /* its own state, allocated zeroed by the core */
  size_t server_size; /* its state per server, allocated zeroed with each entry */
  /* enabled tells whether the options turn the policy on (NULL: always). */
  int (*enabled)(const lt_options_t *o);
  /* unused_why: why the options leave the policy nothing to do although its own option (of
   * its name) is on, or NULL; the registry warns when that option was set (NULL: never). */
  const char *(*unused_why)(const lt_options_t *o);
  /* on_server_ready: server idx welcomed a new session (`welcome`, the message). */
  void (*on_server_ready)(lt_policy_t *p, size_t idx, const lt_msg_t *welcome);
  /* on_server_lost: server idx's session ended (its records are settled next, LT_END_LOST). */
  void (*on_server_lost)(lt_policy_t *p, size_t idx);
  /* on_dispatch: record r went out to server idx. */
  void (*on_dispatch)(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx);
  /* on_end: record r's time on server idx ended for `why` (cp: its completion, or NULL). */
  void (*on_end)(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                 const lt_completion_t *cp);
  /* on_idle: a server came to have room this turn (after completions). */
  void (*on_idle)(lt_policy_t *p, int64_t now_ms);
  /* on_tick: the periodic tick (heartbeats, at most LT_PING_MS apart). */
  void (*on_tick)(lt_policy_t *p, int64_t now_ms);
  /* place: instruction c is about to be placed: the policy may shape the placement by
   * multiplying weight[i] (s->nsrv entries, 1 each before the first policy) of server i, the
   * factor `eft` applies to its finish estimate there (below 1 favours it), or exclude server
   * i from this placement with LT_PLACE_OUT (both placements then skip it); returns nonzero
   * when it set a weight. When no enabled policy has this hook, placement does no work for
   * it; when none set a weight, placement chooses once, as without them. */
  int (*place)(lt_policy_t *p, const lt_place_t *c, double *weight);
  /* placed: c went to server `to` (-1: it waits), where it would have gone without the
   * weights being `unshaped` (called only when some policy set a weight for c). */
  void (*placed)(lt_policy_t *p, const lt_place_t *c, int to, int unshaped);
  /* places tells whether its place hook runs under these options (NULL: whenever it has
   * one), so that a policy on for other reasons costs placement nothing. */
  int (*places)(const lt_options_t *o);
  /* on_applied: the loop applied request q of this policy (a copy went out, a task runs
   * again, a record was recalled or taken back); a request dropped as stale is not told. */
  void (*on_applied)(lt_policy_t *p, const lt_req_t *q);
  /* stats fills up to LT_POLICY_STATS numbers of server idx, or of the policy in all when
   * idx is SIZE_MAX; returns how many. */
  size_t (*stats)(const lt_policy_t *p, size_t idx, lt_stat_t *out);
  /* fini frees what the state and the server blobs hold (not the blobs themselves). */
  void (*fini)(lt_policy_t *p);
} lt_policy_ops_t;

struct lt_policy {
  const lt_policy_ops_t *ops;
  const lt_sched_t *s; /* read only */
  void *state;
  size_t id;  /* its index in the registry: its limit's and its blob's slot */
  int places; /* its place hook runs (policy.c, from ops->places) */
  struct lt_req_queue *q;
};

/* The request queue the loop applies (policy.c). */
typedef struct lt_req_queue {
  lt_req_t *reqs;
  size_t n, cap;
} lt_req_queue_t;

/* lt__policy_ask (queue a request of p for the loop's next apply phase; dropped, logged,
 * without memory) and lt__policy_server (p's blob for server idx, borrowed) are inline in
 * policy_view.h, after the dispatcher's struct: a policy calls nothing of the core. */

/* The registry (policy_registry.h): every policy's ops table, and LT_POLICY_MAX, how many
 * there are: the policy table, each server's limits and blobs and the stats are sized by it. */
#define LT_POLICY_EXTERN(name) extern const lt_policy_ops_t lt__policy_##name;
LT_POLICY_REGISTRY(LT_POLICY_EXTERN)
#undef LT_POLICY_EXTERN

#define LT_POLICY_ONE(name) +1
enum { LT_POLICY_MAX = 0 LT_POLICY_REGISTRY(LT_POLICY_ONE) };
#undef LT_POLICY_ONE

#endif
