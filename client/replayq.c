/* replayq.c: the queue of replayed results waiting in the stream (replayq.h). */
#include "replayq.h"

#include <stdlib.h>

#include <lithium/error.h>

int lt__replayq_push(lt_replayq_t *q, lt_replay_t r) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 256;
    lt_replay_t *v = malloc(cap * sizeof *v);
    if (v == NULL) return LT_ENOMEM;
    for (size_t i = 0; i < q->n; i++)
      v[i] = q->v[(q->head + i) % q->cap];
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
  }
  q->v[(q->head + q->n++) % q->cap] = r;
  return LT_OK;
}

const lt_replay_t *lt__replayq_head(const lt_replayq_t *q) {
  return q->n > 0 ? &q->v[q->head] : NULL;
}

int lt__replayq_pop(lt_replayq_t *q, lt_replay_t *out) {
  if (q->n == 0) return 0;
  *out = q->v[q->head];
  q->head = (q->head + 1) % q->cap;
  q->n--;
  return 1;
}

void lt__replayq_clear(lt_replayq_t *q) {
  free(q->v);
  q->v = NULL;
  q->head = q->n = q->cap = 0;
}
