/* sreduce.c: the reduce of a task stream (sreduce.h): segments in submission order, paired
 * with a ready neighbour as soon as one arrives. Knows nothing of servers; eval_results.c queues
 * the combines it hands out and gives back their results. Under the evaluator's lock. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "buf.h"
#include "sreduce.h"
#include "vec.h"

typedef enum seg_state { SEG_PENDING = 0, SEG_READY, SEG_BUSY } seg_state_t;

typedef struct seg {
  int64_t prev, next; /* neighbouring live segments, -1 at the ends */
  seg_state_t state;  /* PENDING: its part is being computed; BUSY: it is being combined
                         with its next; READY: its result is in `buf` */
  lt_buf_t *buf;
} seg_t;

struct lt_sreduce {
  seg_t *segs; /* one per part, by submission index */
  size_t nsegs, capsegs;
  int64_t tail;     /* the last live segment, -1 before the first part */
  uint64_t live;    /* live segments */
  lt_buf_t *result; /* the stream's result once taken from the last segment */
};

int lt__sreduce_new(lt_sreduce_t **out) {
  lt_sreduce_t *r = calloc(1, sizeof *r);
  *out = r;
  if (r == NULL) return LT_ENOMEM;
  r->tail = -1;
  return LT_OK;
}

int lt__sreduce_add(lt_sreduce_t *r) {
  int64_t i = (int64_t)r->nsegs;
  seg_t *s = LT_VEC_PUSH(r->segs, r->nsegs, r->capsegs);
  if (s == NULL) return LT_ENOMEM;
  s->prev = r->tail;
  s->next = -1;
  if (r->tail >= 0) r->segs[r->tail].next = i;
  r->tail = i;
  r->live++;
  return LT_OK;
}

/* absorb makes segment `a` stand for itself and its next, `b`, too. */
static void absorb(lt_sreduce_t *r, int64_t a, int64_t b) {
  seg_t *sa = &r->segs[a], *sb = &r->segs[b];
  sa->next = sb->next;
  if (sb->next >= 0)
    r->segs[sb->next].prev = a;
  else
    r->tail = a;
  r->live--;
}

/* combine_task makes the combine of ready segments a and b: a task with both values. */
static lt_task_t *combine_task(const seg_t *a, const seg_t *b, uint64_t seg) {
  lt_task_t *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->input = a->buf->value;
  t->input2 = b->buf->value;
  lt__value_ref(t->input);
  lt__value_ref(t->input2);
  t->combine = 1;
  t->seg = seg;
  return t;
}

/* pair joins ready segment `a` with its ready next `b`: a failure of either stands for
 * both at once (the earlier one), two values make a combine. LT_ENOMEM. */
static int pair(lt_sreduce_t *r, int64_t a, int64_t b, lt_task_t **head, lt_task_t **tail) {
  seg_t *sa = &r->segs[a], *sb = &r->segs[b];
  if (sa->buf->err != LT_OK || sb->buf->err != LT_OK) {
    if (sa->buf->err == LT_OK) {
      lt_buf_free(sa->buf);
      sa->buf = sb->buf;
    } else {
      lt_buf_free(sb->buf);
    }
    sb->buf = NULL;
    absorb(r, a, b);
    return LT_OK;
  }
  lt_task_t *t = combine_task(sa, sb, (uint64_t)a);
  if (t == NULL) return LT_ENOMEM;
  if (*tail != NULL)
    (*tail)->next = t;
  else
    *head = t;
  *tail = t;
  lt_buf_free(sa->buf);
  lt_buf_free(sb->buf);
  sa->buf = sb->buf = NULL;
  sa->state = SEG_BUSY;
  absorb(r, a, b);
  return LT_OK;
}

int lt__sreduce_arrive(lt_sreduce_t *r, uint64_t seg, lt_buf_t *b, lt_task_t **head,
                       lt_task_t **tail) {
  if (b == NULL) b = lt__buf_fail(LT_ENOMEM, "out of memory for a result");
  if (seg >= r->nsegs || r->segs[seg].state == SEG_READY || b == NULL) {
    lt_buf_free(b);
    return LT_EPROTO;
  }
  int64_t i = (int64_t)seg;
  r->segs[i].state = SEG_READY;
  r->segs[i].buf = b;
  /* Join neighbours while they are ready; a failure joins at once, a combine is handed
   * out and makes the segment busy. */
  for (;;) {
    seg_t *s = &r->segs[i];
    if (s->state != SEG_READY) return LT_OK;
    int64_t left = s->prev, right = s->next;
    if (left >= 0 && r->segs[left].state == SEG_READY) {
      int rc = pair(r, left, i, head, tail);
      if (rc != LT_OK) return rc;
      i = left;
    } else if (right >= 0 && r->segs[right].state == SEG_READY) {
      int rc = pair(r, i, right, head, tail);
      if (rc != LT_OK) return rc;
    } else {
      return LT_OK;
    }
  }
}

lt_buf_t *lt__sreduce_take(lt_sreduce_t *r, int closed) {
  if (!closed || r->live != 1 || r->nsegs == 0 || r->segs[0].state != SEG_READY) return NULL;
  lt_buf_t *b = r->segs[0].buf;
  r->segs[0].buf = NULL;
  r->segs[0].state = SEG_BUSY; /* taken: never again */
  return b;
}

uint64_t lt__sreduce_parts(const lt_sreduce_t *r) {
  return r->nsegs;
}

void lt__sreduce_free(lt_sreduce_t *r) {
  if (r == NULL) return;
  for (size_t i = 0; i < r->nsegs; i++)
    lt_buf_free(r->segs[i].buf);
  free(r->segs);
  free(r);
}
