/* placement.h: the placement policies (option `placement`) behind one small ops table, so
 * that the dispatcher only asks where an instruction goes and packs batches (dispatch.c).
 * Dispatcher thread only. */
#ifndef LT_PLACEMENT_H
#define LT_PLACEMENT_H

#include <stddef.h>

#include "instance.h"
#include "options.h"

typedef struct lt_sched lt_sched_t;
struct lt_place;

/* A placement policy. `place` returns the server for an instruction with inputs `fi`, or -1
 * when none has room for it now; `chained` when a predecessor's dispatch fired it, so that its
 * input will be on the predecessor's server (it is placed whatever the room there). Placing
 * new (unchained) work moves the round-robin cursor past the server chosen. */
typedef struct lt_placement_ops {
  const char *name;
  int (*place)(lt_sched_t *s, const lt_fire_t *fi, int chained);
} lt_placement_ops_t;

/* eft: earliest estimated finish (DESIGN.md 7), round robin in plain mode (no lookahead). */
extern const lt_placement_ops_t lt__placement_eft;
/* rr: round robin over the servers with room; a successor stays with its input. */
extern const lt_placement_ops_t lt__placement_rr;

/* lt__policies_place and lt__policies_placed (policy.c) run the enabled policies' place and
 * placed hooks (policy.h), in registry order: placement calls them only when s->nplacers is
 * not 0, weight[] of s->nsrv entries set to 1 first; lt__policies_place returns nonzero when
 * some policy set a weight (only then is placed called). */
int lt__policies_place(lt_sched_t *s, const struct lt_place *c, double *weight);
void lt__policies_placed(lt_sched_t *s, const struct lt_place *c, int to, int unshaped);

/* lt__placement_of returns the policy the options name (borrowed, static). */
const lt_placement_ops_t *lt__placement_of(const lt_options_t *o);

#endif
