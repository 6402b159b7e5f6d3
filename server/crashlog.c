/* crashlog.c: the supervisor's and the worker's shared block (see crashlog.h). A slot is
 * valid while its `client` is non-zero: the worker thread stores seq first and client last
 * (release), and clears client when its kernel returns, so a death at any instant leaves
 * either the old or the new instruction in it, never a torn one worth charging. The
 * fatal-signal handler only names a slot (the first thread to get such a signal wins); the
 * supervisor reads that slot's instruction after the death. Touches no other state of the
 * server. */
#include "crashlog.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <lithium/error.h>

typedef struct slot {
  _Atomic uint64_t client; /* 0: empty */
  _Atomic uint64_t seq;
} slot_t;

struct lt_crashlog {
  _Atomic uint64_t incarnation; /* of the current (or last) worker */
  _Atomic int ready_printed;
  char endpoint[256];
  slot_t running[LT_CRASHLOG_SLOTS];
  _Atomic uint32_t culprit; /* 1 + the slot whose thread got a fatal signal; 0: none yet */
  _Atomic int leaving;      /* the worker decided to exit (lt__crashlog_leaving) */
  /* The last death, written by the supervisor while no worker runs. */
  int crash_signal;
  uint64_t crashed_incarnation;
  uint64_t culprit_client; /* the instruction whose thread got the signal; 0: not known */
  uint64_t culprit_seq;
  uint32_t ncrashed;
  slot_t crashed[LT_CRASHLOG_SLOTS];
};

static lt_crashlog_t *self; /* the worker's attached block, or NULL */

/* 1 + the slot of the calling worker thread (lt__crashlog_enter), for the signal handler;
 * static TLS of the executable, readable from a handler. */
static _Thread_local uint32_t my_slot;

/* The fatal signals whose receiving thread is to blame. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* An alternate stack big enough for on_fatal (it calls nothing but raise). */
#define ALTSTACK_BYTES (64 * 1024)

int lt__crashlog_new(lt_crashlog_t **out) {
  void *p =
      mmap(NULL, sizeof(lt_crashlog_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *out = NULL;
    return LT_ENOMEM;
  }
  *out = p; /* anonymous mappings are zeroed */
  return LT_OK;
}

void lt__crashlog_free(lt_crashlog_t *cl) {
  if (cl != NULL) munmap(cl, sizeof *cl);
}

void lt__crashlog_attach(lt_crashlog_t *cl) {
  self = cl;
}

void lt__crashlog_leaving(void) {
  if (self != NULL) atomic_store(&self->leaving, 1);
}

bool lt__crashlog_left(lt_crashlog_t *cl) {
  return atomic_exchange(&cl->leaving, 0) != 0;
}

/* on_fatal names the receiving thread's slot as the culprit, unless another thread got there
 * first, and dies of the signal: SA_RESETHAND made the action the default again, and the
 * raised signal, blocked while the handler runs, is delivered as it returns. Only
 * async-signal-safe calls. */
static void on_fatal(int sig, siginfo_t *si, void *uc) {
  (void)si;
  (void)uc;
  lt_crashlog_t *cl = self;
  uint32_t mine = my_slot;
  if (cl != NULL && mine != 0) {
    uint32_t none = 0;
    atomic_compare_exchange_strong(&cl->culprit, &none, mine);
  }
  raise(sig);
}

void lt__crashlog_catch_fatal(void) {
  if (self == NULL) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
    sigaction(fatal_signals[i], &sa, NULL);
}

void *lt__crashlog_thread_start(void) {
  stack_t old;
  if (self == NULL || sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE)) return NULL;
  void *p = malloc(ALTSTACK_BYTES);
  if (p == NULL) return NULL; /* no alternate stack: an overflow dies unnamed, as before */
  stack_t st = {.ss_sp = p, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
  if (sigaltstack(&st, NULL) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

void lt__crashlog_thread_end(void *altstack) {
  if (altstack == NULL) return;
  stack_t st = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
  sigaltstack(&st, NULL);
  free(altstack);
}

bool lt__crashlog_attached(void) {
  return self != NULL;
}

void lt__crashlog_enter(uint32_t slot, uint64_t client, uint64_t seq) {
  if (self == NULL || slot >= LT_CRASHLOG_SLOTS) return;
  my_slot = slot + 1;
  atomic_store_explicit(&self->running[slot].client, 0, memory_order_relaxed);
  atomic_store_explicit(&self->running[slot].seq, seq, memory_order_relaxed);
  atomic_store_explicit(&self->running[slot].client, client ? client : 1, memory_order_release);
}

void lt__crashlog_leave(uint32_t slot) {
  if (self == NULL || slot >= LT_CRASHLOG_SLOTS) return;
  atomic_store_explicit(&self->running[slot].client, 0, memory_order_release);
}

bool lt__crashlog_started(uint64_t incarnation, const char *endpoint) {
  if (self == NULL) return true;
  atomic_store(&self->incarnation, incarnation);
  snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
  return atomic_exchange(&self->ready_printed, 1) == 0;
}

/* charged tells whether the crash is charged to crashed entry e of `client`: the culprit's
 * alone when it is known, else every one. */
static bool charged(const lt_crashlog_t *cl, const slot_t *e, uint64_t client) {
  if (cl->culprit_client == 0) return true;
  return client == cl->culprit_client && atomic_load(&e->seq) == cl->culprit_seq;
}

void lt__crashlog_take(uint64_t client, int *sig, uint64_t *incarnation, uint64_t *culprit,
                       uint64_t **seqs, uint32_t *n) {
  *sig = 0;
  *incarnation = 0;
  *culprit = 0;
  *seqs = NULL;
  *n = 0;
  if (self == NULL || self->crashed_incarnation == 0) return;
  *sig = self->crash_signal;
  *incarnation = self->crashed_incarnation;
  uint32_t count = 0;
  for (uint32_t i = 0; i < self->ncrashed; i++)
    if (atomic_load(&self->crashed[i].client) == client) count++;
  if (count == 0 || (*seqs = malloc(count * sizeof **seqs)) == NULL) return;
  for (uint32_t i = 0; i < self->ncrashed; i++) {
    slot_t *e = &self->crashed[i];
    if (atomic_load(&e->client) != client) continue;
    if (charged(self, e, client)) {
      (*seqs)[(*n)++] = atomic_load(&e->seq);
      if (self->culprit_client != 0) *culprit = self->culprit_seq;
    }
    atomic_store(&e->client, 0); /* told once */
  }
  if (*n == 0) {
    free(*seqs);
    *seqs = NULL;
  }
}

void lt__crashlog_record(lt_crashlog_t *cl, int sig) {
  cl->crash_signal = sig;
  cl->crashed_incarnation = atomic_load(&cl->incarnation);
  cl->ncrashed = 0;
  cl->culprit_client = cl->culprit_seq = 0;
  uint32_t culprit = atomic_exchange(&cl->culprit, 0);
  if (culprit != 0 && culprit <= LT_CRASHLOG_SLOTS && sig > 0) {
    const slot_t *c = &cl->running[culprit - 1];
    uint64_t client = atomic_load_explicit(&c->client, memory_order_acquire);
    if (client != 0) { /* else it got the signal between two instructions: not known */
      cl->culprit_seq = atomic_load(&c->seq);
      cl->culprit_client = client;
    }
  }
  for (uint32_t i = 0; i < LT_CRASHLOG_SLOTS; i++) {
    uint64_t c = atomic_load_explicit(&cl->running[i].client, memory_order_acquire);
    if (c != 0 && sig > 0) {
      atomic_store(&cl->crashed[cl->ncrashed].seq, atomic_load(&cl->running[i].seq));
      atomic_store(&cl->crashed[cl->ncrashed].client, c);
      cl->ncrashed++;
    }
    atomic_store(&cl->running[i].client, 0);
  }
}

const char *lt__crashlog_endpoint(const lt_crashlog_t *cl) {
  return cl->endpoint;
}

uint64_t lt__crashlog_incarnation(const lt_crashlog_t *cl) {
  return atomic_load(&((lt_crashlog_t *)cl)->incarnation);
}
