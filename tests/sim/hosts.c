/* hosts.c: the hosts the evaluator knows (sim.h), as lt_eval_add_host and
 * lt_eval_remove_host change them: the door lists the first `nhosts` servers, with the
 * removed ones marked gone, and tells the dispatcher's poll when that changed. Draw 2 adds a
 * server mid-run in a quarter of the seeds and removes one in a fifth, from the stream
 * `fourth`, so what the other streams draw is as it was. */
#include <stdio.h>
#include <stdlib.h>

#include <lithium/error.h>
#include "sim.h"

typedef struct change {
  int add; /* 1: the server `srv` joins the evaluation; 0: it is removed from it */
  int srv;
} change_t;

static void on_change(sim_world_t *w, void *arg) {
  change_t *c = arg;
  if (!w->tearing && !w->calm) {
    if (c->add) {
      w->nhosts = (uint32_t)c->srv + 1;
      sim_note(w, "host: server %d added", c->srv);
    } else {
      w->gone[c->srv] = 1;
      sim_note(w, "host: server %d removed", c->srv);
    }
    w->hosts_changed = 1;
  }
  free(c);
}

static void schedule(sim_world_t *w, int64_t at, int add, int srv) {
  change_t *c = malloc(sizeof *c);
  *c = (change_t){add, srv};
  sim_at(w, at, on_change, c);
}

int sim_draw_hosts(sim_world_t *w, int64_t horizon) {
  static const double speeds[] = {0.5, 1, 2, 4};
  w->nhosts = w->nsrv;
  if (w->p.draw == 1) return LT_OK;
  sim_rng_t *r = &w->fourth;
  if (w->nhosts > 1 && sim_chance(r, 1, 5))
    schedule(w, (int64_t)sim_below(r, (uint64_t)horizon), 0, 1 + (int)sim_below(r, w->nhosts - 1));
  if (w->nsrv < SIM_DRAW_MAX_SERVERS && sim_chance(r, 1, 4)) {
    uint32_t i = w->nsrv;
    snprintf(w->eps[i], sizeof w->eps[i], "tcp://sim%u:9000", i);
    int rc = sim_server_new(w, (int)i, speeds[sim_below(r, 4)], 1 + (uint32_t)sim_below(r, 4));
    if (rc != LT_OK) return rc;
    w->nsrv++;
    schedule(w, (int64_t)sim_below(r, (uint64_t)horizon), 1, (int)i);
  }
  return LT_OK;
}

int sim_hosts_poll(sim_world_t *w) {
  int changed = w->hosts_changed;
  w->hosts_changed = 0;
  return changed;
}
