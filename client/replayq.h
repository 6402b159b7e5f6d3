/* replayq.h: the replayed results waiting in an evaluation's result stream: a result taken
 * from the journal is not read when its task is submitted but when lt_eval_next reaches it,
 * and until then it is this queue's entry of 32 bytes — its place in the stream, its task and
 * the offset of its record — so that resuming a long run holds no result it has not handed
 * out. Entries are pushed in submission order, so the head is always the next one in the
 * stream. A ring buffer that grows by doubling. Caller's lock (ev->mu). */
#ifndef LT_REPLAYQ_H
#define LT_REPLAYQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_replay {
  uint64_t stream_seq; /* its place in the result stream */
  uint64_t seq;        /* its task's submission index */
  uint64_t off;        /* its record in the journal */
  uint64_t arrival;    /* when it joined the stream (unordered streams keep that order) */
} lt_replay_t;

typedef struct lt_replayq {
  lt_replay_t *v;
  size_t head, n, cap;
} lt_replayq_t;

/* lt__replayq_push appends `r`. LT_ENOMEM. */
int lt__replayq_push(lt_replayq_t *q, lt_replay_t r);

/* lt__replayq_head returns the oldest entry (borrowed until the next push or pop), or NULL. */
const lt_replay_t *lt__replayq_head(const lt_replayq_t *q);

/* lt__replayq_pop removes the oldest entry into *out: 1, or 0 when there is none. */
int lt__replayq_pop(lt_replayq_t *q, lt_replay_t *out);

/* lt__replayq_clear frees the entries. */
void lt__replayq_clear(lt_replayq_t *q);

#endif
