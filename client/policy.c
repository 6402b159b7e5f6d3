/* policy.c: the registry of the dispatcher's policies and the core's side of their hook
 * table (policy.h): it makes each enabled policy's state and its blob in each server entry,
 * calls their hooks in registry order, and keeps their requests for the loop (requests.c
 * applies them). It decides nothing itself and touches no record, job or connection.
 * Dispatcher thread only, except lt__policies_stats (under the stats lock). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "policy.h"
#include "sched_loop.h"
#include "vec.h"

/* The registry: a new policy is one line in policy_registry.h and one file. Their hooks run
 * in this order. */
#define LT_POLICY_REF(name) &lt__policy_##name,
static const lt_policy_ops_t *const registry[] = {LT_POLICY_REGISTRY(LT_POLICY_REF)};
#undef LT_POLICY_REF
_Static_assert(sizeof registry / sizeof registry[0] == LT_POLICY_MAX,
               "the table fits the registry");

/* warn_unused warns that a policy's option, set on, does nothing with the others given. */
static void warn_unused(const lt_policy_ops_t *ops, const lt_options_t *o) {
  const char *why = ops->unused_why != NULL ? ops->unused_why(o) : NULL;
  if (why != NULL && lt__option_given(o, ops->name))
    lt__log(LT_LOG_WARN, "%s=on does nothing: %s", ops->name, why);
}

int lt__policies_init(lt_sched_t *s) {
  for (size_t k = 0; k < sizeof registry / sizeof registry[0]; k++) {
    const lt_policy_ops_t *ops = registry[k];
    if (ops->enabled != NULL && !ops->enabled(s->opts)) {
      warn_unused(ops, s->opts);
      continue;
    }
    lt_policy_t *p = &s->policies[s->npolicies];
    p->ops = ops;
    p->s = s;
    p->id = s->npolicies;
    p->q = &s->requests;
    p->places = ops->place != NULL && (ops->places == NULL || ops->places(s->opts));
    s->nplacers += p->places != 0;
    if (ops->state_size > 0 && (p->state = calloc(1, ops->state_size)) == NULL) return LT_ENOMEM;
    s->npolicies++;
  }
  return LT_OK;
}

void lt__policies_free(lt_sched_t *s) {
  for (size_t k = 0; k < s->npolicies; k++) {
    lt_policy_t *p = &s->policies[k];
    if (p->ops->fini != NULL) p->ops->fini(p);
    free(p->state);
  }
  for (size_t i = 0; i < s->capsrv; i++) /* entries past nsrv are zeroed */
    lt__policies_server_free(s, i);
  free(s->requests.reqs);
}

int lt__policies_server_new(lt_sched_t *s, size_t idx) {
  lt_server_t *v = &s->srv[idx];
  for (size_t k = 0; k < LT_POLICY_MAX; k++) {
    v->limit[k] = LT_NO_LIMIT;
    v->blob[k] = NULL;
  }
  for (size_t k = 0; k < s->npolicies; k++) {
    size_t size = s->policies[k].ops->server_size;
    if (size > 0 && (v->blob[k] = calloc(1, size)) == NULL) return LT_ENOMEM;
  }
  return LT_OK;
}

void lt__policies_server_free(lt_sched_t *s, size_t idx) {
  for (size_t k = 0; k < LT_POLICY_MAX; k++) {
    free(s->srv[idx].blob[k]);
    s->srv[idx].blob[k] = NULL;
  }
}

/* Each hook, called on every policy that has it, in registry order. */
#define EACH(s, hook, ...)                                                                         \
  for (size_t k_ = 0; k_ < (s)->npolicies; k_++) {                                                 \
    lt_policy_t *p_ = &(s)->policies[k_];                                                          \
    if (p_->ops->hook != NULL) p_->ops->hook(p_, __VA_ARGS__);                                     \
  }

void lt__policies_server_ready(lt_sched_t *s, size_t idx, const lt_msg_t *welcome) {
  EACH(s, on_server_ready, idx, welcome);
}

void lt__policies_server_lost(lt_sched_t *s, size_t idx) {
  EACH(s, on_server_lost, idx);
}

void lt__policies_dispatch(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx) {
  EACH(s, on_dispatch, r, idx);
}

void lt__policies_end(lt_sched_t *s, const lt_instr_rec_t *r, size_t idx, lt_end_t why,
                      const lt_completion_t *cp) {
  EACH(s, on_end, r, idx, why, cp);
}

void lt__policies_idle(lt_sched_t *s, int64_t now_ms) {
  EACH(s, on_idle, now_ms);
}

void lt__policies_tick(lt_sched_t *s, int64_t now_ms) {
  EACH(s, on_tick, now_ms);
}

int lt__policies_place(lt_sched_t *s, const lt_place_t *c, double *weight) {
  int set = 0;
  for (size_t k = 0; k < s->npolicies; k++) {
    lt_policy_t *p = &s->policies[k];
    if (p->places && p->ops->place(p, c, weight)) set = 1;
  }
  return set;
}

void lt__policies_placed(lt_sched_t *s, const lt_place_t *c, int to, int unshaped) {
  for (size_t k = 0; k < s->npolicies; k++) {
    lt_policy_t *p = &s->policies[k];
    if (p->places && p->ops->placed != NULL) p->ops->placed(p, c, to, unshaped);
  }
}

void lt__policies_applied(lt_sched_t *s, const lt_req_t *q) {
  lt_policy_t *p = &s->policies[q->policy];
  if (p->ops->on_applied != NULL) p->ops->on_applied(p, q);
}

size_t lt__policies_stats(const lt_sched_t *s, size_t idx, lt_stat_t *out, size_t max) {
  size_t n = 0;
  for (size_t k = 0; k < s->npolicies; k++) {
    const lt_policy_t *p = &s->policies[k];
    if (p->ops->stats == NULL || n + LT_POLICY_STATS > max) continue;
    n += p->ops->stats(p, idx, out + n);
  }
  return n;
}

uint64_t lt__policies_stat(const lt_sched_t *s, size_t idx, const char *key) {
  lt_stat_t st[LT_POLICY_MAX * LT_POLICY_STATS];
  return lt__stat_sum(st, lt__policies_stats(s, idx, st, sizeof st / sizeof st[0]), key);
}

uint64_t lt__stat_sum(const lt_stat_t *st, size_t n, const char *key) {
  uint64_t v = 0;
  for (size_t k = 0; k < n; k++)
    if (strcmp(st[k].key, key) == 0) v += st[k].v;
  return v;
}
