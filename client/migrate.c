/* migrate.c: the migration policy (issue "throttling and heterogeneity"). Whenever nothing
 * waits for placement — at the end of the stream, or mid-stream while the input is slower
 * than the servers — a server with free threads may take work queued but not started on a
 * slower one, when that queue would take clearly longer to drain than a task there (and,
 * mid-stream, at least MIGRATE_MIN_MS: the short queues lookahead keeps are no stranded
 * work): the policy asks
 * the core to recall the newest instructions there (LT_REQ_RECALL), and only the server's ECANCELED
 * — its confirmation that the instruction never ran and never will — puts one back for placement
 * (instr.c). An instruction that had started completes as usual, so nothing runs twice.
 * Only instructions whose inputs the client holds move (a farm's tasks), and one round of
 * recalls is out at a time. State: its counters, recalls sent (stat `migrations`), of those
 * confirmed and placed again (`migrated`), and those not answered yet (a round's cancels out
 * hold the next round), counted as the loop applies its recalls (on_applied) and as records
 * end (on_end). Under either placement: `eft` sends a record put back where it finishes first;
 * under `rr`, which would send it to the next server with room (the slow one too, its queue
 * now shorter), the policy's place hook keeps the records it put back off the servers that
 * have no thread free, until they are placed (`replacing`). Without lookahead no server has
 * work queued beyond its window, so there is nothing to move: the policy is off then, and
 * says so when `migrate=on` was set. Dispatcher thread only. */
#include <stdlib.h>

#include "policy_view.h"

#define MIGRATE_GAIN 1.5 /* move only when the queue to drain is this much longer than a task */
#define MIGRATE_MIN_MS                                                                             \
  20 /* mid-stream, only a queue that takes this long to drain moves: fine                         \
        tasks queued for lookahead are no stranded work */

typedef struct migrate_state {
  uint64_t migrations;  /* cancels sent to move queued instructions */
  uint64_t migrated;    /* of those, confirmed and placed again */
  uint32_t cancels_out; /* cancels not answered yet (records in LT_IR_MIGRATING) */
  uint32_t replacing;   /* rr: records put back not placed yet (the place hook steers them) */
} migrate_state_t;

/* idle_threads returns the threads of the window of server i that have no instruction. */
static uint32_t idle_threads(const lt_sched_t *s, size_t i) {
  if (!lt__server_takes(s, i)) return 0;
  uint32_t t = (uint32_t)lt__pace_parallel(&s->srv[i].pace);
  return s->srv[i].admitted < t ? t - s->srv[i].admitted : 0;
}

/* movable tells whether r may run elsewhere after a confirmed cancel. */
static int movable(const lt_instr_rec_t *r) {
  return r->state == LT_IR_OUT && lt__rec_portable(r);
}

/* A server with work queued beyond its running window, and how long that queue takes. */
typedef struct queue_of {
  size_t srv;
  double drain_us;
} queue_of_t;

static int by_drain_desc(const void *a, const void *b) {
  double x = ((const queue_of_t *)a)->drain_us, y = ((const queue_of_t *)b)->drain_us;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* queues returns the servers with work queued beyond their running window, the slowest to
 * drain first (malloc'd; *n of them), or NULL when none has any. */
static queue_of_t *queues(const lt_sched_t *s, size_t *n) {
  *n = 0;
  queue_of_t *q = NULL;
  for (size_t i = 0; i < s->nsrv; i++) {
    const lt_pace_t *p = &s->srv[i].pace;
    if (!lt__server_takes(s, i) || s->srv[i].admitted <= lt__pace_parallel(p)) continue;
    if (q == NULL && (q = malloc(s->nsrv * sizeof *q)) == NULL) return NULL;
    q[(*n)++] = (queue_of_t){i, lt__pace_backlog_us(s, i)};
  }
  if (q != NULL) qsort(q, *n, sizeof *q, by_drain_desc);
  return q;
}

/* newest collects up to `want` movable records of server `from`, newest (largest seq, so
 * furthest back in its queue) first; returns how many. */
static uint32_t newest(const lt_sched_t *s, int from, const lt_instr_rec_t **out, uint32_t want) {
  uint32_t n = 0;
  for (const lt_instr_rec_t *r = s->srv[from].slot.out; r != NULL; r = r->out_next) {
    if (!movable(r)) continue;
    if (n < want) {
      out[n++] = r;
    } else {
      uint32_t min = 0;
      for (uint32_t k = 1; k < n; k++)
        if (out[k]->seq < out[min]->seq) min = k;
      if (r->seq > out[min]->seq) out[min] = r;
    }
  }
  return n;
}

/* recall_from asks for the recall of up to `want` instructions queued on server `from`, the
 * newest first; returns how many it asked for. */
static uint32_t recall_from(lt_policy_t *p, size_t from, uint32_t want) {
  const lt_sched_t *s = p->s;
  uint32_t queued = s->srv[from].admitted - (uint32_t)lt__pace_parallel(&s->srv[from].pace);
  if (want > queued) want = queued;
  const lt_instr_rec_t **pick = calloc(want ? want : 1, sizeof *pick);
  uint32_t n = pick != NULL ? newest(s, (int)from, pick, want) : 0;
  for (uint32_t k = 0; k < n; k++)
    lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_RECALL, .seq = pick[k]->seq});
  free(pick);
  return n;
}

/* look asks for the recall of work queued on the slowest servers, as much as idle threads
 * elsewhere could take: from the slowest to drain on, every queue that takes clearly longer
 * than a task on an idle server, in one round (on a thousand servers, a round per server
 * would leave most queues where they are until the end). */
static void look(lt_policy_t *p) {
  const lt_sched_t *s = p->s;
  migrate_state_t *st = p->state;
  if (s->fire_head == NULL) st->replacing = 0; /* placed, or ended otherwise */
  if (st->cancels_out > 0 || s->fire_head != NULL) return;
  uint32_t idle = 0;
  double fast_us = -1; /* the cheapest estimate among the idle servers */
  for (size_t i = 0; i < s->nsrv; i++) {
    uint32_t t = idle_threads(s, i);
    if (t == 0) continue;
    idle += t;
    double c = s->srv[i].pace.svc_us > 0 ? s->srv[i].pace.svc_us : 1;
    if (fast_us < 0 || c < fast_us) fast_us = c;
  }
  size_t n = 0;
  queue_of_t *q = idle > 0 ? queues(s, &n) : NULL;
  int closed = s->door->input_closed(s->ev);
  for (size_t k = 0; k < n && idle > 0; k++) {
    if (q[k].drain_us < MIGRATE_GAIN * fast_us) break;
    if (!closed && q[k].drain_us < MIGRATE_MIN_MS * 1000.0) break;
    idle -= recall_from(p, q[k].srv, idle);
  }
  free(q);
}

static void on_idle(lt_policy_t *p, int64_t now_ms) {
  (void)now_ms;
  look(p);
}

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  (void)now_ms;
  look(p);
}

/* A recall went out: its cancel is on its way. */
static void on_applied(lt_policy_t *p, const lt_req_t *q) {
  migrate_state_t *st = p->state;
  if (q->kind != LT_REQ_RECALL) return;
  st->migrations++;
  st->cancels_out++;
}

/* A cancel is answered when its record ends (placed again if it never ran there,
 * lt__end_migrates), or when the record's copy elsewhere decides the twins first: the
 * answer then only frees the dropped record. */
static void on_end(lt_policy_t *p, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                   const lt_completion_t *cp) {
  (void)idx;
  migrate_state_t *st = p->state;
  if (r->state == LT_IR_MIGRATING) {
    st->cancels_out--;
    if (lt__end_migrates(r, why, cp)) {
      st->migrated++;
      st->replacing++;
    }
  }
  if (r->twin != NULL && r->twin->state == LT_IR_MIGRATING && lt__end_decides(r, why, cp))
    st->cancels_out--;
}

/* rr: while records put back wait, new work goes only to servers with a thread free. */
static int place(lt_policy_t *p, const lt_place_t *c, double *weight) {
  if (((const migrate_state_t *)p->state)->replacing == 0 || c->chained) return 0;
  for (size_t i = 0; i < p->s->nsrv; i++)
    if (idle_threads(p->s, i) == 0) weight[i] = LT_PLACE_OUT;
  return 1;
}

static void placed(lt_policy_t *p, const lt_place_t *c, int to, int unshaped) {
  (void)unshaped;
  migrate_state_t *st = p->state;
  if (to >= 0 && !c->chained && st->replacing > 0) st->replacing--;
}

static int places(const lt_options_t *o) {
  return o->placement == LT_PLACE_RR;
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx != SIZE_MAX) return 0;
  const migrate_state_t *st = p->state;
  out[0] = (lt_stat_t){"migrations", 0, st->migrations};
  out[1] = (lt_stat_t){"migrated", 0, st->migrated};
  return 2;
}

static int enabled(const lt_options_t *o) {
  return o->migrate && o->lookahead;
}

static const char *unused_why(const lt_options_t *o) {
  return o->migrate && !o->lookahead ? "without lookahead no server has work queued" : NULL;
}

const lt_policy_ops_t lt__policy_migrate = {
    .name = "migrate",
    .state_size = sizeof(migrate_state_t),
    .enabled = enabled,
    .unused_why = unused_why,
    .on_idle = on_idle,
    .on_tick = on_tick,
    .on_end = on_end,
    .on_applied = on_applied,
    .place = place,
    .placed = placed,
    .places = places,
    .stats = stats,
};

uint32_t lt__migrate_cancels_out(const lt_sched_t *s) {
  for (size_t k = 0; k < s->npolicies; k++)
    if (s->policies[k].ops == &lt__policy_migrate)
      return ((const migrate_state_t *)s->policies[k].state)->cancels_out;
  return 0;
}
