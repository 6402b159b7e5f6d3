/* trace.h: the trace file of an evaluation (option trace=FILE, DESIGN.md 10): Chrome/Perfetto
 * trace-event JSON that opens in ui.perfetto.dev. One process per server with a track per
 * worker thread (a span per instruction) and counters (window, load), one client process
 * with the dispatcher's track (server losses, re-dispatches, recomputes). Times are µs since
 * lt_eval_start on the client's clock; server times are mapped through a per-server offset
 * taken from the ping with the smallest round trip.
 * The hooks are inline: with tracing off each costs one branch. The file is opened by the
 * evaluator thread before the dispatcher starts and closed after it ended; in between only
 * the dispatcher thread calls in. */
#ifndef LT_TRACE_H
#define LT_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "msg.h"

typedef struct lt_trace lt_trace_t;
struct lt_sched;
struct lt_instr_rec;

/* lt__trace_open creates (truncates) `path` and writes the header and the client's
 * metadata; time 0 of the trace is now. LT_EIO when the file cannot be opened (logged at
 * error level, naming the file and the reason), LT_ENOMEM. Evaluator thread. */
int lt__trace_open(lt_trace_t **out, const char *path);

/* lt__trace_close ends the JSON, closes the file and frees `t`; a write error met on the
 * way is logged, naming the file. Accepts NULL. After the dispatcher thread ended. */
void lt__trace_close(lt_trace_t *t);

/* The hooks' bodies (trace.c); call them through the inline hooks below. */
void lt__trace_message_at(lt_trace_t *t, struct lt_sched *s, size_t idx, const lt_msg_t *m);
void lt__trace_completion_at(lt_trace_t *t, struct lt_sched *s, size_t idx,
                             const struct lt_instr_rec *r, const lt_completion_t *cp);
void lt__trace_turn_at(lt_trace_t *t, struct lt_sched *s);
void lt__trace_server_lost_at(lt_trace_t *t, struct lt_sched *s, size_t idx, const char *why);
void lt__trace_instr_lost_at(lt_trace_t *t, const struct lt_instr_rec *r, const char *endpoint,
                             const char *why);
void lt__trace_recompute_at(lt_trace_t *t, uint64_t task, const char *why);

/* lt__trace_message records what every message from server `idx` tells: its name (welcome),
 * the load report (counters, when they changed) and clock samples (welcome, ping answers).
 * Call it first thing for each received message. Dispatcher thread. */
static inline void lt__trace_message(lt_trace_t *t, struct lt_sched *s, size_t idx,
                                     const lt_msg_t *m) {
  if (t != NULL) lt__trace_message_at(t, s, idx, m);
}

/* lt__trace_completion writes the span of instruction `r` completed by `cp` on server `idx`
 * (nothing when it never ran). `r` is borrowed for the call. Dispatcher thread. */
static inline void lt__trace_completion(lt_trace_t *t, struct lt_sched *s, size_t idx,
                                        const struct lt_instr_rec *r, const lt_completion_t *cp) {
  if (t != NULL) lt__trace_completion_at(t, s, idx, r, cp);
}

/* lt__trace_turn ends a dispatcher loop turn: every server whose thread window or admitted
 * cap changed gets a window counter event, and when nothing is queued or in flight the file
 * is flushed (at most every 100 ms) so that it is valid JSON up to here. Dispatcher thread. */
static inline void lt__trace_turn(lt_trace_t *t, struct lt_sched *s) {
  if (t != NULL) lt__trace_turn_at(t, s);
}

/* lt__trace_server_lost marks the loss of server `idx` (`why`) on the dispatcher's track.
 * Dispatcher thread. */
static inline void lt__trace_server_lost(lt_trace_t *t, struct lt_sched *s, size_t idx,
                                         const char *why) {
  if (t != NULL) lt__trace_server_lost_at(t, s, idx, why);
}

/* lt__trace_instr_lost marks an instruction lost on `endpoint` (to be re-dispatched or its
 * task recomputed) on the dispatcher's track. Dispatcher thread. */
static inline void lt__trace_instr_lost(lt_trace_t *t, const struct lt_instr_rec *r,
                                        const char *endpoint, const char *why) {
  if (t != NULL) lt__trace_instr_lost_at(t, r, endpoint, why);
}

/* lt__trace_recompute marks the recomputation of task `task` on the dispatcher's track.
 * Dispatcher thread. */
static inline void lt__trace_recompute(lt_trace_t *t, uint64_t task, const char *why) {
  if (t != NULL) lt__trace_recompute_at(t, task, why);
}

#endif
