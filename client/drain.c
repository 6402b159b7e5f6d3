/* drain.c: the drain policy (lt_eval_remove_host). A removed server takes no new work; its
 * queued instructions are cancelled (they come back ECANCELED and are placed elsewhere;
 * running ones finish), and once nothing is out there its session ends for good. The links
 * mark an entry `removed` when its host goes; this policy asks the core to drain it
 * (LT_REQ_DRAIN) and then to retire it (LT_REQ_RETIRE). State: how far each server is.
 * Dispatcher thread only. */
#include "policy_view.h"

enum { DRAIN_NONE = 0, DRAIN_ASKED, DRAIN_RETIRED };

typedef struct drain_srv {
  int phase;
} drain_srv_t;

static void on_tick(lt_policy_t *p, int64_t now_ms) {
  (void)now_ms;
  const lt_sched_t *s = p->s;
  for (size_t i = 0; i < s->nsrv; i++) {
    drain_srv_t *d = lt__policy_server(p, i);
    const lt_server_t *v = &s->srv[i];
    if (!v->slot.removed || d->phase == DRAIN_RETIRED) continue;
    if (d->phase == DRAIN_NONE) {
      lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_DRAIN, .server = i});
      d->phase = DRAIN_ASKED;
    } else if (v->conn.state == LT_CONN_DEAD || v->conn.inflight == 0) {
      lt__policy_ask(p, &(lt_req_t){.kind = LT_REQ_RETIRE, .server = i});
      d->phase = DRAIN_RETIRED;
    }
  }
}

const lt_policy_ops_t lt__policy_drain = {
    .name = "drain",
    .server_size = sizeof(drain_srv_t),
    .on_tick = on_tick,
};
