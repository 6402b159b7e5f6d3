/* session.h: one client session of lithium-server, found by the ZeroMQ routing id of its
 * DEALER and bound to that DEALER's connection (and key): the client id, the resolved kernel table
 * (PROGRAM, shared with the instructions made under it), the live instructions by sequence with the
 * FIFO of those waiting for a slot of its thread window, the parked fetches, and the completions
 * waiting to go out in one `done`. Loop thread only. */
#ifndef LT_SESSION_H
#define LT_SESSION_H

#include "server.h"
#include "shipped.h"

#define LT_RID_MAX 255

/* Limits of one `done` message, within the client's default codec limits. */
#define LT_DONE_MAX_COMPL  1024
#define LT_DONE_MAX_FRAMES 4096
#define LT_DONE_MAX_OUTS   65536

/* Modules one session may ship (distinct names). */
#define LT_SESSION_MAX_SHIPPED 64

typedef struct lt_fetch lt_fetch_t; /* fetch.c */

/* A kernel table (PROGRAM), immutable once made and reference counted: the session holds
 * one reference, every instruction made under it another, so that a later PROGRAM never
 * frees the names a queued or running instruction's worker reads. Loop thread only (the
 * count); the contents may be read by any thread while a reference is held. */
typedef struct lt_program {
  uint32_t refs;
  uint32_t n;
  char **names;      /* "module:function" */
  lt_kernel_fn *fns; /* resolved, or NULL with status/err */
  bool *in_place;    /* declared to write in place (LT_KERNEL_IN_PLACE): its inputs may be
                        granted (task.c) */
  int *status;
  char **err;
  lt_shipped_t **mods; /* the shipped module each kernel resolved in (a reference), or NULL
                          for one of the server's own modules */
} lt_program_t;

/* lt__program_ref takes one more reference to `p` (may be NULL) and returns it. */
lt_program_t *lt__program_ref(lt_program_t *p);

/* lt__program_unref drops one reference; the last frees the table. Accepts NULL. */
void lt__program_unref(lt_program_t *p);

/* A module the session's client shipped (MODULE): loaded, or refused with the reason that
 * fails the instructions naming it. Its kernels resolve here before the server's own. */
typedef struct lt_session_module {
  char *name;
  lt_shipped_t *mod; /* a reference; NULL when refused */
  int status;        /* LT_OK, or why it was refused (LT_ENOMODULE, ...) */
  char *err;         /* the refusal, naming module and reason; NULL when loaded */
  uint64_t size;
} lt_session_module_t;

typedef struct lt_done_entry {
  uint64_t seq;
  int32_t status;
  char *errmsg; /* owned, sanitized; NULL for "" */
  uint64_t service_us;
  uint64_t start_us; /* kernel start (lt__executor_now_us), 0 when it never ran */
  uint32_t worker;   /* the worker thread that ran it */
  uint64_t cpu_us;   /* CPU time of its worker thread while it ran */
  int32_t answer;    /* DCSTEP: 1 base case, 0 divided; else -1 */
  uint32_t out_off;  /* first of its outputs in outs */
  uint32_t nout;
  uint32_t pack; /* k > 1: it and the next k - 1 are the members of one packed instruction */
} lt_done_entry_t;

/* Where and for how long a completion's kernel ran (lt__session_done_add). */
typedef struct lt_ran {
  uint64_t service_us;
  uint64_t start_us; /* 0 when it never ran */
  uint64_t cpu_us;
  uint32_t worker;
} lt_ran_t;

struct lt_session {
  UT_hash_handle hh;
  bool oom;
  uint8_t rid[LT_RID_MAX]; /* hash key */
  size_t rid_len;
  uint64_t client_id;
  uint64_t secret;  /* from hello; proves a later hello of the same client, never logged */
  char key[41];     /* the Z85 CURVE public key of the connection ("User-Id"); "" without */
  uint64_t conn;    /* the connection that said hello (zap.h): its messages only are its */
  int fd;           /* that connection's descriptor (ZMQ_SRCFD, conns.h), -1 before known */
  char **peers;     /* endpoints of the session's servers (PROGRAM.peers), owned */
  char **peer_keys; /* their Z85 public keys, "" when announced without one, owned */
  uint32_t npeers;
  char *name;
  uint64_t inline_max; /* from hello: stored outputs up to this size also go back */
  uint64_t last_seen;  /* uv_now of its last message */
  bool draining;       /* its client is moving its work off this server (heartbeat) */

  lt_program_t *prog;           /* the latest PROGRAM (a reference), NULL before the first */
  lt_session_module_t *shipped; /* MODULE: modules of this session only */
  uint32_t nshipped;
  uint64_t shipped_bytes; /* of the modules loaded, against --max-session-bytes */

  lt_task_t *tasks; /* uthash by seq: parked, waiting, queued, running, failing */

  /* Thread window (task.c): the executor runs at most execute.max_active (0: no limit)
   * of its tasks at once; queued ones beyond it hold no thread and start in order. */
  lt_exgroup_t group;
  lt_fetch_t *fetches;     /* parked fetches, and a peer link's fetches of unknown ids */
  uint32_t nfetches;       /* of them, against --max-session-fetches */
  uint64_t pending_told;   /* uv_now of the last "still pending" answers (fetch.c), 0: never */
  struct lt_shm_conn *shm; /* a peer link's attached same-host connection (shm.c), or NULL */

  /* Quotas (quota.h) and the deadline per instruction (execute.timeout_ms, 0: none). */
  uint32_t nparked; /* its instructions waiting for inputs */
  uint32_t nexec;   /* its tasks queued or running on the executor (a pack's members each) */
  uint32_t timeout_ms;

  /* The next `done`, and the dones sent so far (the last one's number in the session: a
   * client that got fewer knows some were lost). */
  lt_done_entry_t *done;
  uint64_t dones_sent;
  uint32_t ndone, capdone;
  lt_output_info_t *outs;
  uint32_t nouts, capouts;
  lt_value_t **vals;
  uint32_t nvals, capvals;
  bool dirty;
  lt_session_t *dirty_next;
};

/* lt__session_new creates a session for routing id `rid` and adds it to srv->sessions
 * (the caller has dropped any previous one). LT_ENOMEM, LT_EINVAL for a bad rid length. */
int lt__session_new(lt_server_t *srv, lt_session_t **out, const void *rid, size_t rid_len,
                    uint64_t client_id, const char *name);

/* lt__session_by_client returns the live client session (not a peer link) of `client_id`,
 * or NULL (borrowed). */
lt_session_t *lt__session_by_client(lt_server_t *srv, uint64_t client_id);

/* Servers a session may name as its peers (PROGRAM.peers): the endpoints this server may
 * be made to connect to on its behalf. */
#define LT_SESSION_MAX_PEERS 1024

/* lt__session_peers makes the `n` host strings ("ENDPOINT [Z85 key]") the servers of the
 * session: the only holders its REF inputs may name. LT_EINVAL for a malformed string
 * (the previous list stays), LT_ENOMEM. */
int lt__session_peers(lt_session_t *s, const char *const *hosts, uint32_t n);

/* lt__session_peer tells whether `ep` is one of the session's announced servers; *key
 * (may be NULL) gets its announced public key ("" when none; borrowed). */
bool lt__session_peer(const lt_session_t *s, const char *ep, const char **key);

/* lt__session_find returns the session of `rid` or NULL (borrowed). */
lt_session_t *lt__session_find(lt_server_t *srv, const void *rid, size_t rid_len);

/* lt__session_program makes `names` the session's kernel table, resolving each; a name
 * that does not resolve keeps its error for the instructions that use it (they fail when
 * they would run). A table equal to the current one changes nothing; instructions made
 * under an earlier table keep it. LT_ENOMEM (the current table stays). */
int lt__session_program(lt_server_t *srv, lt_session_t *s, const char *const *names, uint32_t n);

/* lt__session_ship records what became of module `name` shipped by the session's client:
 * loaded (`mod`, whose reference the session takes, also on failure; status LT_OK) or
 * refused (`mod` NULL, `status` and `err` naming module and reason). A module of the same
 * name shipped before is replaced. The kernel table is resolved again, so that the
 * instructions that follow run the module shipped; earlier ones keep theirs. LT_ENOMEM,
 * LT_EAGAIN when the session has shipped LT_SESSION_MAX_SHIPPED modules already. */
int lt__session_ship(lt_server_t *srv, lt_session_t *s, const char *name, uint64_t size,
                     lt_shipped_t *mod, int status, const char *err);

/* lt__session_shipped returns the session's record of module `name`, or NULL (borrowed). */
const lt_session_module_t *lt__session_shipped(const lt_session_t *s, const char *name);

/* lt__session_done_add queues one completion for the session's next `done`: `ran` says
 * when, how long and on which worker its kernel ran (NULL when it never ran: refused or
 * cancelled), `answer`
 * (-1 unless a DCSTEP), `nout` outputs with sizes `sizes` (NULL when nout is 0); ret[i]
 * non-NULL returns output i as a payload frame (the session takes a reference). Sends the
 * batch first when it is full. LT_ENOMEM (the completion is then reported without outputs,
 * if even that fits). */
int lt__session_done_add(lt_server_t *srv, lt_session_t *s, uint64_t seq, int status,
                         const char *errmsg, const lt_ran_t *ran, int answer, uint32_t nout,
                         const uint64_t *sizes, lt_value_t *const *ret);

/* lt__session_done_room makes room in the next `done` for `n` completions of one output
 * each, all returned, so that lt__session_done_add sends none of them in an earlier one:
 * sends the batch first when they would not fit. Returns the index of the first of them
 * (for lt__session_done_pack). LT_ENOMEM leaves the batch as it was. */
int lt__session_done_room(lt_server_t *srv, lt_session_t *s, uint32_t n, uint32_t *first);

/* lt__session_done_pack marks the completions queued since index `first` as the `n`
 * members of one packed instruction, sent as one entry; nothing when they are not all in
 * the batch (then each goes as its own). */
void lt__session_done_pack(lt_session_t *s, uint32_t first, uint32_t n);

/* lt__session_flush sends the queued completions as one `done` (nothing when none) and
 * takes the session off the dirty list. */
void lt__session_flush(lt_server_t *srv, lt_session_t *s);

/* lt__session_free removes the session from the table and frees it; the caller has
 * detached its instructions and fetches first. */
void lt__session_free(lt_server_t *srv, lt_session_t *s);

/* lt__short_id writes the first 4 hex digits of a client id followed by "..." into buf
 * (at least 12 bytes): ids are not logged in full. Returns buf. Any thread. */
const char *lt__short_id(uint64_t client_id, char *buf);

#endif
