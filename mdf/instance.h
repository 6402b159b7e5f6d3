/* instance.h: a graph instance: the template instantiated for one input task (DESIGN.md 3).
 * It holds the input tokens of every node until the node fires, counts what each node still
 * misses, and reports through a callback which nodes became fireable. A token is a value
 * (plain mode: values travel through the client). Owned by one thread, the dispatcher. */
#ifndef LT_INSTANCE_H
#define LT_INSTANCE_H

#include <stdint.h>
#include "template.h"
#include "value.h"

typedef struct lt_instance lt_instance_t;

/* Called when `node` of `inst` has every input. */
typedef void (*lt_fire_fn)(void *ud, lt_instance_t *inst, uint32_t node);

struct lt_instance {
  uint64_t task;             /* task sequence number, named by the client */
  const lt_template_t *tmpl; /* borrowed */
  lt_value_t **slots;        /* tmpl->nslots input tokens, NULL while missing */
  uint32_t *missing;         /* per node: inputs not yet there */
  lt_value_t *result;        /* the task's result once the graph is done */
  int done;
  void *user; /* the dispatcher's own per-task data */
};

/* lt__instance_new creates the instance of task `task` over `t` (borrowed). */
int lt__instance_new(lt_instance_t **out, const lt_template_t *t, uint64_t task);

/* lt__instance_feed gives the task's input `v` (a new reference is taken) to the entry
 * node, which fires. */
int lt__instance_feed(lt_instance_t *inst, lt_value_t *v, lt_fire_fn fire, void *ud);

/* lt__instance_complete records the output `v` (a new reference is taken) of `node`: its
 * input tokens are dropped, the successor gets the token and fires when complete; a node
 * without successor makes `v` the task's result and sets inst->done. LT_ESTATE when the
 * node had not fired (a duplicate or stray completion). */
int lt__instance_complete(lt_instance_t *inst, uint32_t node, lt_value_t *v, lt_fire_fn fire,
                          void *ud);

/* lt__instance_inputs returns the input tokens of `node` (borrowed) and their count. */
lt_value_t *const *lt__instance_inputs(const lt_instance_t *inst, uint32_t node, uint32_t *n);

/* lt__instance_free drops every token and frees the instance; accepts NULL. */
void lt__instance_free(lt_instance_t *inst);

#endif
