/* binding.c: the binding policy, the one place that reads the `lazy` option to decide how
 * an instruction's inputs and outputs are bound: by value through the client (plain mode:
 * every output comes back and nothing stays on a server) or by reference on the servers
 * (lazy binding: outputs stay where they were made, successors get references at dispatch,
 * and servers drop inputs they are done with, except a copy of a straggler: its twin may
 * still read them where they are held). It decides only; the dispatcher (dispatch.c)
 * and the completions (jobs.c) act. Dispatcher thread only. */
#include "exec.h"
#include "sched_loop.h"

lt_binding_t lt__binding(const lt_sched_t *s, const lt_instr_rec_t *r) {
  const lt_options_t *o = s->opts;
  lt_binding_t b = {.outputs_stay = o->lazy, .inline_max = o->lazy ? o->inline_max : 0};
  if (r == NULL) return b;
  /* A copy never passes its output on: only the twin that wins gives it to the frame. */
  b.moves_on = o->lazy && !r->moved && !r->backup && lt__frame_moves_on(r->frame);
  b.returns = !o->lazy || r->final;
  int last_reader = o->lazy && !lt__op(r->op)->keeps_inputs;
  b.release_inputs = last_reader && !r->backup;
  b.keeps_inputs = last_reader && r->backup;
  return b;
}
