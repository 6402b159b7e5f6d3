/* quarantine.c: the quarantine policy (option quarantine, on in `optimized`; its stats are
 * there, false and 0, when it is off): flaky hosts
 * get a cool-down. When the worker of a supervised server crashes, its next welcome says
 * which of our instructions were running (and which one the crash came from, when it
 * knows); a host on which instructions of `quarantine_crashes` different tasks crashed the
 * worker within a minute gets no new work (a limit of 0 on its entry) for a cool-down that
 * starts at 10 s and doubles at each quarantine of that host. Work already there finishes;
 * the others take the rest. A host is spared its cool-down while no other server takes work. Stats:
 * each server's `quarantined`, and `quarantines` in all. What a crash is charged to (the tasks of
 * the instructions it names, when the verdict is that it was ours: a culprit none of ours is
 * no crash of ours) it asks the failure accounting (failures.c), which gives the crash policy
 * the same verdict. State: per host its recent crashes and its cool-down. Dispatcher thread
 * only. */
#include <stdlib.h>

#include "log.h"
#include "policy_view.h"
#include "vec.h"

#define WINDOW_MS     60000 /* crashes count for a minute */
#define COOL_FIRST_MS 10000 /* the first cool-down */
#define COOL_MAX_MS   600000
#define CRASHES_KEPT  16

/* Per host: its recent crashes (time and task), and its cool-down. */
typedef struct q_host {
  int64_t at_ms[CRASHES_KEPT];
  uint64_t task[CRASHES_KEPT];
  uint32_t n;       /* crashes recorded, the latest at (n - 1) % CRASHES_KEPT */
  int64_t until_ms; /* quarantined until then; 0: not */
  uint32_t cool_ms; /* the next cool-down */
  size_t entry;     /* its current server entry */
} q_host_t;

typedef struct q_state {
  q_host_t *hosts;
  size_t cap;
  uint64_t quarantines;
} q_state_t;

static q_host_t *host_of(lt_policy_t *p, size_t idx) {
  q_state_t *st = p->state;
  size_t h = p->s->srv[idx].slot.host;
  if (LT_VEC_RESERVE(st->hosts, st->cap, h + 1) != LT_OK) return NULL;
  return &st->hosts[h];
}

/* distinct_recent counts the different tasks among h's crashes since `since`. */
static uint32_t distinct_recent(const q_host_t *h, int64_t since) {
  uint32_t kept = h->n < CRASHES_KEPT ? h->n : CRASHES_KEPT, d = 0;
  for (uint32_t a = 0; a < kept; a++) {
    uint32_t i = (h->n - 1 - a) % CRASHES_KEPT;
    if (h->at_ms[i] < since) continue;
    int seen = 0;
    for (uint32_t b = 0; b < a && !seen; b++) {
      uint32_t k = (h->n - 1 - b) % CRASHES_KEPT;
      seen = h->at_ms[k] >= since && h->task[k] == h->task[i];
    }
    d += !seen;
  }
  return d;
}

static void record(q_host_t *h, uint64_t task, int64_t now) {
  uint32_t i = h->n++ % CRASHES_KEPT;
  h->at_ms[i] = now;
  h->task[i] = task;
}

static void limit(lt_policy_t *p, size_t idx, uint32_t n) {
  lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_LIMIT, .server = idx, .n = n});
}

/* crashed records the crash that ended the session before entry idx's, as told in its
 * welcome `w`: a crash for the task of each instruction the crash is charged to. */
static void crashed(lt_policy_t *p, size_t idx, q_host_t *h, const lt_msg_t *w, int64_t now) {
  const lt_loss_t *l;
  for (uint32_t at = 0; (l = lt__fail_crash_next(p->s, idx, w, &at)) != NULL;)
    record(h, l->task, now);
}

/* others_take tells whether a server other than entry idx takes work (SIZE_MAX: any). */
static int others_take(const lt_sched_t *s, size_t idx) {
  for (size_t k = 0; k < s->nsrv; k++)
    if (k != idx && lt__server_takes(s, k)) return 1;
  return 0;
}

/* spared_as_the_last tells whether entry idx, due a cool-down, is spared it as no other
 * server takes work: the work would wait for it, or fail LT_ENOSERVER after
 * connect_timeout_ms, and an innocent task must not pay for crashes that, on every server,
 * may well be one poison task's (the crash policy ends that task at its second crash). Its
 * crashes stay counted: it cools down at its next welcome that finds another server. */
static int spared_as_the_last(const lt_sched_t *s, size_t idx) {
  if (others_take(s, idx)) return 0;
  lt__log(LT_LOG_WARN,
          "server %s: its worker crashed for %u different tasks within a minute, but no other "
          "server takes work: no cool-down",
          s->srv[idx].conn.endpoint, s->opts->quarantine_crashes);
  return 1;
}

static void on_server_ready(lt_policy_t *p, size_t idx, const lt_msg_t *w) {
  const lt_sched_t *s = p->s;
  q_host_t *h = s->opts->quarantine ? host_of(p, idx) : NULL;
  if (h == NULL) return;
  h->entry = idx;
  int64_t now = lt__clock_ms();
  crashed(p, idx, h, w, now);
  q_state_t *st = p->state;
  if (h->until_ms == 0 && distinct_recent(h, now - WINDOW_MS) >= s->opts->quarantine_crashes &&
      spared_as_the_last(s, idx))
    return;
  if (h->until_ms == 0 && distinct_recent(h, now - WINDOW_MS) >= s->opts->quarantine_crashes) {
    h->cool_ms = h->cool_ms ? h->cool_ms * 2 : COOL_FIRST_MS;
    if (h->cool_ms > COOL_MAX_MS) h->cool_ms = COOL_MAX_MS;
    h->until_ms = now + h->cool_ms;
    h->n = 0; /* the crashes that led here are paid for */
    st->quarantines++;
    lt__log(LT_LOG_WARN,
            "server %s: its worker crashed for %u different tasks within a minute: "
            "no new work for %u s",
            s->srv[idx].conn.endpoint, s->opts->quarantine_crashes, h->cool_ms / 1000);
  }
  if (h->until_ms != 0) limit(p, idx, 0);
}

/* On a tick, cool-downs end when due, or at once when no server takes work any more (the
 * others died or left since): the run is not left without a server by this policy. */
static void on_tick(lt_policy_t *p, int64_t now_ms) {
  q_state_t *st = p->state;
  int none = !others_take(p->s, SIZE_MAX);
  for (size_t k = 0; k < st->cap; k++) {
    q_host_t *h = &st->hosts[k];
    if (h->until_ms == 0 || (now_ms < h->until_ms && !none)) continue;
    int early = now_ms < h->until_ms;
    h->until_ms = 0;
    if (h->entry < p->s->nsrv) {
      lt__log(early ? LT_LOG_WARN : LT_LOG_INFO, "server %s: its cool-down is over%s",
              p->s->srv[h->entry].conn.endpoint, early ? " (no other server takes work)" : "");
      limit(p, h->entry, LT_NO_LIMIT);
    }
  }
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  const q_state_t *st = p->state;
  if (idx == SIZE_MAX) {
    out[0] = (lt_stat_t){"quarantines", 0, st->quarantines};
    return 1;
  }
  out[0] = (lt_stat_t){"quarantined", 1, p->s->srv[idx].limit[p->id] == 0};
  return 1;
}

static void fini(lt_policy_t *p) {
  q_state_t *st = p->state;
  free(st->hosts);
}

const lt_policy_ops_t lt__policy_quarantine = {
    .name = "quarantine",
    .state_size = sizeof(q_state_t),
    .on_server_ready = on_server_ready,
    .on_tick = on_tick,
    .stats = stats,
    .fini = fini,
};
