/* policy_try.c: a policy written as a policy is (one file, including policy_view.h and
 * nothing of the dispatcher's core), built by tests/layers to prove what the view lets it
 * touch. Built as it is, it must compile: it reads records and servers, asks the table's
 * answers and the pacing's figures, and files requests. Built with LT_TRY_CORE_CALL naming
 * one of the core's calls that move or end a record, or count a failure (failures.c), it
 * makes that call on a record it found in flight, as a policy that reached past the view
 * would; that build must fail, since the view declares no such call
 * (-Werror=implicit-function-declaration). */
#include "policy_view.h"

typedef struct try_srv {
  uint32_t seen;
} try_srv_t;

/* pick returns the server that would finish r's chain first among those that take work,
 * or -1: what a placement-shaping policy reads. */
static int pick(const lt_sched_t *s, const lt_instr_rec_t *r, int64_t now_ms) {
  int best = -1;
  double best_us = 0;
  for (size_t i = 0; i < s->nsrv; i++) {
    if (!lt__server_takes(s, i) || !lt__server_has_room(s, i)) continue;
    double us = lt__server_left_us(s, i, now_ms) + lt__pace_cost_us(s, i, r->stages);
    if (best < 0 || us < best_us) best = (int)i, best_us = us;
  }
  return best;
}

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  const lt_sched_t *s = p->s;
  lt_instr_rec_t *r, *tmp;
  HASH_ITER(hh, s->inflight, r, tmp) {
    if (r->state != LT_IR_OUT || lt__rec_stale(r) || !lt__rec_portable(r)) continue;
    try_srv_t *t = lt__policy_server(p, (size_t)r->conn);
    t->seen++;
    if (pick(s, r, now_ms) < 0 || pick(s, r, now_ms) == r->conn) continue;
#if LT_TRY_CORE_CALL == 1
    lt__rec_to(r, LT_IR_QUEUED);
#elif LT_TRY_CORE_CALL == 2
    lt__sched_take_off((lt_sched_t *)s, r);
#elif LT_TRY_CORE_CALL == 3
    lt__sched_rec_done((lt_sched_t *)s, r);
#elif LT_TRY_CORE_CALL == 4
    lt__sched_end((lt_sched_t *)s, r, LT_END_TAKEN_BACK, NULL, NULL, 0, NULL);
#elif LT_TRY_CORE_CALL == 5
    lt__fail_charge_try((lt_sched_t *)s, r);
#else
    lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_RECALL, .seq = r->seq});
#endif
  }
}

static size_t stats(const lt_policy_t *p, size_t idx, lt_stat_t *out) {
  if (idx == SIZE_MAX) return 0;
  const try_srv_t *t = p->s->srv[idx].blob[p->id];
  out[0] = (lt_stat_t){.key = "try_seen", .v = t->seen};
  return 1;
}

const lt_policy_ops_t lt__policy_try = {
    .name = "try",
    .server_size = sizeof(try_srv_t),
    .on_tick = on_tick,
    .stats = stats,
};
