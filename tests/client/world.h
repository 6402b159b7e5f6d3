/* world.h: a hand-built dispatcher state for the unit tests of the client's dispatcher
 * (test_placement.c, test_backup.c, test_servers.c, test_jobs.c, test_deadline.c):
 * WORLD_SERVERS ready servers, no sockets, the default options. The tests act as the core
 * does, so it includes the owner headers (records, jobs, servers), not only the policies'
 * view. Header-only; one test's thread. */
#ifndef LT_TEST_WORLD_H
#define LT_TEST_WORLD_H

#include <string.h>

#include "sched_jobs.h"
#include "sched_loop.h"
#include "sched_records.h"
#include "sched_servers.h"

#define WORLD_SERVERS 3

typedef struct world {
  lt_options_t opts;
  lt_sched_t s;
  lt_server_t srv[WORLD_SERVERS];
} world_t;

/* world_init makes w a dispatcher state over WORLD_SERVERS ready servers with the default
 * options; world_fini frees what it holds. */
static inline void world_init(world_t *w) {
  memset(w, 0, sizeof *w);
  lt__options_init(&w->opts);
  w->s.opts = &w->opts;
  w->s.srv = w->srv;
  w->s.nsrv = WORLD_SERVERS;
  for (size_t i = 0; i < WORLD_SERVERS; i++) {
    w->srv[i].sid = lt__entry_sid(&w->s); /* in use, as links.c's add_entry gives it */
    w->srv[i].conn.state = LT_CONN_READY;
    for (size_t k = 0; k < LT_POLICY_MAX; k++)
      w->srv[i].limit[k] = LT_NO_LIMIT;
  }
}

/* world_policies turns on the policies w's options enable, with their state and their blob
 * in each server entry (world_fini frees them); their hooks run only when a test calls them
 * (lt__policies_end, lt__policies_applied). Returns LT_OK or LT_ENOMEM. */
static inline int world_policies(world_t *w) {
  w->s.capsrv = WORLD_SERVERS;
  int rc = lt__policies_init(&w->s);
  for (size_t i = 0; i < WORLD_SERVERS && rc == LT_OK; i++)
    rc = lt__policies_server_new(&w->s, i);
  return rc;
}

/* world_policy returns the index of the enabled policy `ops` in w's table, or SIZE_MAX. */
static inline size_t world_policy(const world_t *w, const lt_policy_ops_t *ops) {
  for (size_t k = 0; k < w->s.npolicies; k++)
    if (w->s.policies[k].ops == ops) return k;
  return SIZE_MAX;
}

static inline void world_fini(world_t *w) {
  if (w->s.npolicies > 0) lt__policies_free(&w->s); /* what world_policies made */
  lt__sched_pools_clear(&w->s);
  lt__options_clear(&w->opts);
}

#endif
