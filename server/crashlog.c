/* crashlog.c: the supervisor's and the worker's shared block (see crashlog.h). A slot is
 * valid while its `client` is non-zero: the worker thread stores seq first and client last
 * (release), and clears client when its kernel returns, so a death at any instant leaves
 * either the old or the new instruction in it, never a torn one worth charging. Touches no
 * other state of the server. */
#include "crashlog.h"

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
  /* The last death, written by the supervisor while no worker runs. */
  int crash_signal;
  uint64_t crashed_incarnation;
  uint32_t ncrashed;
  slot_t crashed[LT_CRASHLOG_SLOTS];
};

static lt_crashlog_t *self; /* the worker's attached block, or NULL */

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

bool lt__crashlog_attached(void) {
  return self != NULL;
}

void lt__crashlog_enter(uint32_t slot, uint64_t client, uint64_t seq) {
  if (self == NULL || slot >= LT_CRASHLOG_SLOTS) return;
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

void lt__crashlog_take(uint64_t client, int *sig, uint64_t *incarnation, uint64_t **seqs,
                       uint32_t *n) {
  *sig = 0;
  *incarnation = 0;
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
    if (atomic_load(&self->crashed[i].client) != client) continue;
    (*seqs)[(*n)++] = atomic_load(&self->crashed[i].seq);
    atomic_store(&self->crashed[i].client, 0); /* told once */
  }
}

void lt__crashlog_record(lt_crashlog_t *cl, int sig) {
  cl->crash_signal = sig;
  cl->crashed_incarnation = atomic_load(&cl->incarnation);
  cl->ncrashed = 0;
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
