/* hostile.h: a hostile lithium-server stand-in for the end-to-end tests: a raw ZeroMQ ROUTER
 * on tcp://127.0.0.1 (port 0) that speaks the protocol with the codec, in a thread of its
 * own. It welcomes every hello, then either keeps every instruction for ever while it
 * answers heartbeats and reports completions of instructions it was never given
 * (LT_HOSTILE_KEEPS), or keeps them looking busy and says it sent a done that never
 * arrived (LT_HOSTILE_LOSES), or sends nothing at all (LT_HOSTILE_MUTE), or, as the holder a server
 * fetches from, answers heartbeats and every FETCH with a value of another id and an error
 * ("hello first"), never with what was asked (LT_HOSTILE_STRAY), or answers packed instructions
 * with packed completions of the wrong shape (LT_HOSTILE_PACK_*). Test process only: start
 * and stop it from the test's own thread. */
#ifndef LT_TEST_HOSTILE_H
#define LT_TEST_HOSTILE_H

#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"

typedef enum lt_hostile_mode {
  LT_HOSTILE_KEEPS = 0, /* answers heartbeats, never completes, reports strays */
  LT_HOSTILE_MUTE,      /* welcomes, then says nothing */
  LT_HOSTILE_STRAY,     /* answers heartbeats, and fetches with other ids and errors */
  /* Answers heartbeats; a packed instruction of k members gets a packed completion that
   * claims every member done (a wrong value, -1, inline) but has the wrong shape; a single
   * instruction is answered "canceled, never ran", so that it goes again, in a pack. */
  LT_HOSTILE_PACK_TWICE,   /* the last member is named as the first again */
  LT_HOSTILE_PACK_SHORT,   /* k - 1 members: the last one is missing */
  LT_HOSTILE_PACK_UNKNOWN, /* every member names an id the client never sent */
  /* Keeps every instruction while its load reports show two running and CPU in use (it
   * looks busy computing them), and, once a session has given it work, answers heartbeats
   * saying it sent that session a done: one that never arrived. */
  LT_HOSTILE_LOSES,
} lt_hostile_mode_t;

typedef struct lt_hostile {
  lt_hostile_mode_t mode;
  char endpoint[64]; /* where it listens, once started */
  void *ctx, *sock;
  atomic_int stop;
  atomic_int welcomes; /* hellos it welcomed */
  atomic_int fetches;  /* fetches it answered astray */
  atomic_int reworks;  /* EXECUTE messages it got after its second welcome or later */
  atomic_int packs;    /* packed completions it sent out of shape */
  atomic_int kept;     /* instructions it kept since its last welcome (LT_HOSTILE_LOSES) */
  pthread_t thread;
} lt_hostile_t;

/* hostile_start binds h on a free port and starts its thread; the test fails on error. */
void hostile_start(lt_hostile_t *h, lt_hostile_mode_t mode);

/* hostile_stop stops its thread and closes its socket and context. */
void hostile_stop(lt_hostile_t *h);

/* A run against the stand-in: its servers (the stand-in, and a real lithium-server beside
 * it when `honest`) and an evaluator on them. */
typedef struct lt_hostile_run {
  lt_hostile_t h;
  lt_proc_t p;
  int honest;
  lt_eval_t *ev;
} lt_hostile_run_t;

/* hostile_run_start starts the servers and an evaluator for `prog` on them (the stand-in
 * first), with options `opts` (key, value pairs, NULL-terminated); the test fails on error. */
void hostile_run_start(lt_hostile_run_t *r, lt_hostile_mode_t mode, int honest, lt_skel_t *prog,
                       const char *const *opts);

/* hostile_run_stop frees the evaluator and stops the servers. */
void hostile_run_stop(lt_hostile_run_t *r);

#endif
