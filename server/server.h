/* server.h: lithium-server's state and the functions its files share. One libuv loop
 * thread owns everything here: the ROUTER socket, the value store, the sessions and their
 * instructions; worker threads only see executor jobs. Every top-level loop callback ends
 * with the server's settle hook, which finishes failed instructions, sends the batched `done`
 * messages and advances a shutdown. Loop thread only, except where noted. */
#ifndef LT_SERVER_H
#define LT_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>
#include "args.h"
#include "codec.h"
#include "executor.h"
#include "module.h"
#include "store.h"
#include "utf8.h"
#include "value.h"
#include "zap.h"
#include "zmq_uv.h"

/* uthash must not exit the process on out of memory: tables flag it in the object. */
#define HASH_NONFATAL_OOM        1
#define uthash_nonfatal_oom(obj) ((obj)->oom = true)
#include <uthash.h>

typedef struct lt_session lt_session_t;
typedef struct lt_task lt_task_t;
typedef struct lt_peer lt_peer_t;

typedef struct lt_server {
  /* Hooks server.c installs when it makes the server, through which the handlers (session,
   * task, fetch, peer, status, deadline) send and settle without calling up into it.
   * send sends `msg` with the load report to routing id `rid`, with the `nvals` values as
   * its payload frames, zero copy (the values get their own references; the caller keeps
   * its). Sets msg->has_load, load, nframes and frames. Errors are logged: LT_EINVAL (the
   * codec refused the message), LT_ENOMEM, LT_EAGAIN/LT_EIO (dropped).
   * settle retries peers' fetches of ids that were unknown, finishes queued failures, flushes
   * every dirty session's completions and closes the server once a shutdown has nothing left
   * running. Ends every loop callback. */
  int (*send)(struct lt_server *srv, const void *rid, size_t rid_len, lt_msg_t *msg,
              lt_value_t *const *vals, uint32_t nvals);
  void (*settle)(struct lt_server *srv);
  uv_loop_t loop;
  void *zctx;
  void *router;
  lt_zuv_t zuv;
  lt_store_t *store;
  lt_modules_t *mods;
  struct lt_shipstore *shipstore; /* --accept-modules: shipped modules' store, or NULL */
  lt_executor_t *ex;
  lt_codec_limits_t lim;
  lt_bytes_t *frames; /* scratch for decoding: max_frames + 1 entries */

  lt_session_t *sessions; /* uthash by routing id */
  lt_session_t *dirty;    /* sessions with completions to send, linked by dirty_next */
  lt_task_t *failq;       /* instructions to finish with an error, FIFO */
  lt_task_t *failq_tail;

  uv_signal_t sigint, sigterm, sighup, sigusr1;
  uint64_t stop_ms; /* uv_now of the signal that started the shutdown */

  /* CURVE (--curve-key): the key pair, and the ZAP thread that checks client keys. */
  bool curve;
  char curve_pub[41];
  char curve_sec[41];
  lt_zap_t *zap;
  struct lt_conns *conns; /* accepted connections, cut without a session (conns.c) */
  uv_timer_t idle_timer, load_timer;

  char endpoint[256];  /* ZMQ_LAST_ENDPOINT */
  char server_id[320]; /* --name or hostname:pid */
  uint32_t threads;
  uint32_t cores;
  double cpus; /* the CPU it may use, in cores (cpus.h), for the welcome */
  uint64_t idle_ms;
  uint64_t max_frame;   /* --max-frame, as welcome tells clients */
  uint64_t incarnation; /* random, non-zero, per server process (getrandom) */
  uint64_t start_us;    /* lt__executor_now_us() at start: the uptime in STATUS replies */

  /* Peer links (peer.c): one DEALER per holder endpoint this server fetches from. */
  lt_peer_t *peers; /* uthash by endpoint */
  uint32_t npeers;
  uint32_t max_peers;   /* --max-peers */
  uint64_t peer_id;     /* the client id this server gives itself in its hello to peers */
  uint64_t peer_secret; /* the secret of its hellos to peers (one id, one secret) */
  uint64_t fetch_ms;    /* a peer silent this long while we fetch from it is unreachable */
  uv_timer_t peer_timer;
  struct lt_copy *copies;     /* fetched copies in the store, by id, with their readers */
  struct lt_refused *refused; /* endpoints that did not welcome a link, left alone a while */
  struct lt_fetch *unknown;   /* peers' fetches of ids not here yet, by deadline (fetch.c) */
  struct lt_fetch *unknown_tail;
  uint32_t nunknown;
  struct lt_waiting *waiting; /* those fetches by id (fetch.c) */
  struct lt_waiting *woken;   /* ids of theirs that entered the store since the last settle */
  uv_timer_t fetch_timer;

  /* What an EXECUTE fires goes to the executor at its end, in one lock (task.c): the units
   * in order, and the last job of the gang an instruction group is building, or NULL. */
  struct lt_job **subq;
  uint32_t nsubq;
  size_t capsubq;
  struct lt_job *gang_tail;
  bool batching; /* an EXECUTE is being taken: fired instructions wait in subq */
  bool ganging;  /* ... and its current instruction is in a group (Instr.group) */

  /* Load report (DESIGN.md 5). */
  uint64_t completed; /* kernels run since start */
  uint32_t parked;    /* instructions waiting for inputs */
  uint32_t inexec;    /* instructions handed to the executor and not yet back */
  double speed;       /* welcome.speed: calibrated at start, or --speed */
  float cpu;          /* process CPU use over the last sample, 0..cores */
  uint64_t cpu_prev_us, wall_prev_us;
  uint64_t peer_in;  /* bytes of values fetched from peer servers */
  uint64_t peer_out; /* bytes of values served to peer servers */

  /* Same-host transfers (shm.h): the listener (NULL when off), and what moved so. */
  struct lt_shm *shm;
  bool no_shm; /* --no-shm */
  uint64_t shm_in, shm_out, shm_values_in, shm_values_out, shm_fallbacks, shm_us;

  /* Containment (quota.c, deadline.c). */
  struct lt_quota *quota;
  uv_timer_t deadline_timer;
  bool deadline_started;
  uint64_t stop_at_us; /* when the deadline timer first saw the stop */

  bool zuv_started;
  bool stopping; /* SIGINT/SIGTERM seen: no new instructions; every load report says so */
  bool closing;  /* handles are being closed */
  int exit_code;
} lt_server_t;

/* lt__server_new sets up the loop, the store, the modules, the workers and binds the
 * ROUTER socket to args->listen. LT_EINVAL for a bad value (module directory, endpoint),
 * LT_EIO when binding or starting fails, LT_ENOMEM; a message for the user goes into err.
 * The args are copied where needed. */
int lt__server_new(lt_server_t **out, const lt_srv_args_t *args, char *err, size_t errlen);

/* lt__server_endpoint returns the bound endpoint (borrowed). */
const char *lt__server_endpoint(const lt_server_t *srv);

/* lt__server_run runs the loop until a signal has shut the server down; returns the exit
 * code (0 after a clean shutdown). */
int lt__server_run(lt_server_t *srv);

/* lt__server_free closes the socket (1 s linger), frees everything and closes the loop;
 * accepts NULL. */
void lt__server_free(lt_server_t *srv);

/* lt__server_send_error answers with LT_MSG_ERROR {code, message}. */
__attribute__((format(printf, 5, 6))) void lt__server_send_error(lt_server_t *srv, const void *rid,
                                                                 size_t rid_len, int code,
                                                                 const char *fmt, ...);

/* lt__server_drop_session ends session `s`: its queued and parked instructions are dropped,
 * running ones are orphaned (their results are discarded), its parked fetches are dropped,
 * its values released, its pending completions sent; then it is freed. */
void lt__server_drop_session(lt_server_t *srv, lt_session_t *s, const char *why);

/* lt__status_reply answers a STATUS from `rid` (status.c); no session is needed. */
void lt__status_reply(lt_server_t *srv, const void *rid, size_t rid_len);

/* lt__load_start starts the CPU sampling timer (1 s). */
void lt__load_start(lt_server_t *srv);

/* lt__load_fill fills the load report. */
void lt__load_fill(lt_server_t *srv, lt_load_t *load);

#endif
