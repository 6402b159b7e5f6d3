/* lithium.h: the client API of Lithium-C.
 *
 * Build a skeleton program (lithium/skel.h), hand it to an evaluator, give the evaluator
 * servers (lt_eval_add_host, lt_eval_spawn_local), start it, submit input tasks and read
 * results. Every call returns LT_OK (0) or a negative lt_err code (lithium/error.h).
 *
 * Threads: lt_eval_submit, lt_eval_close, lt_eval_next, lt_future_* and lt_eval_stats_json
 * may be called from any thread, also concurrently; the other lt_eval_* calls belong to the
 * thread that owns the evaluator. */
#ifndef LITHIUM_H
#define LITHIUM_H

#include <stddef.h>
#include <stdint.h>
#include <lithium/error.h>
#include <lithium/export.h>
#include <lithium/skel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_eval lt_eval_t;
typedef struct lt_future lt_future_t;
typedef struct lt_buf lt_buf_t;

/* lt_eval_new creates an evaluator for `program`. Takes ownership of `program`, also on
 * failure. */
LT_API int lt_eval_new(lt_eval_t **out, lt_skel_t *program);

/* lt_eval_set sets option `key` to `value` (see README.md, "Options"); '-' and '_' are
 * alike in keys. Unknown keys, bad values and a value that contradicts another option set
 * before (min_threads above max_threads) give LT_EINVAL, and lt_eval_error says which;
 * options that shape the run give LT_ESTATE after start. */
LT_API int lt_eval_set(lt_eval_t *ev, const char *key, const char *value);

/* lt_eval_error returns the message of the last option error of `ev` (from lt_eval_set, or
 * lt_eval_start's LT_EINVAL for options that contradict each other), e.g. "unknown option
 * 'x'" or "bad value 'v' for ordered (expected on/off, true/false, yes/no or 1/0)"; "" when
 * there was none. Borrowed from `ev` until lt_eval_free; the next error overwrites it; ""
 * for NULL. Same thread as lt_eval_set. */
LT_API const char *lt_eval_error(const lt_eval_t *ev);

/* lt_eval_add_host connects to a running lithium-server at `endpoint`
 * ("tcp://host:port"). Before start it only records the endpoint. */
LT_API int lt_eval_add_host(lt_eval_t *ev, const char *endpoint);

/* lt_eval_remove_host drains the server at `endpoint` (as it was added): no new work goes
 * there, work queued there moves elsewhere, running work finishes, and its session ends
 * once nothing runs there; values it held that are still needed are recomputed. No task
 * fails for it. LT_ENOENT for an endpoint that was never added (or already removed). Any
 * thread. */
LT_API int lt_eval_remove_host(lt_eval_t *ev, const char *endpoint);

/* lt_eval_spawn_local starts `nservers` lithium-server processes on free loopback ports
 * (option `server` names the program, option `modules` their module directory), waits until
 * each is ready and adds them as hosts. They are stopped by lt_eval_free. */
LT_API int lt_eval_spawn_local(lt_eval_t *ev, int nservers);

/* lt_eval_start connects to every host and starts dispatching (Lithium's parDo). Tasks may
 * be submitted before or after. */
LT_API int lt_eval_start(lt_eval_t *ev);

/* lt_eval_run_local is lt_eval_start's alternative: the sequential reference evaluator runs
 * every task in this process, one instruction at a time, with kernels loaded from option
 * `modules`; no servers. Submit, close, next, futures and stats work the same. It is the
 * oracle of the tests and a debugging aid (a kernel can be stepped in a debugger). */
LT_API int lt_eval_run_local(lt_eval_t *ev);

/* lt_eval_submit adds an input task (the bytes are copied). It blocks while `max_pending`
 * tasks are unfinished (LT_EAGAIN instead when option `nonblocking` is on). With `out` not
 * NULL the result goes to *out only, and lt_eval_next skips it; the caller owns *out. */
LT_API int lt_eval_submit(lt_eval_t *ev, const void *data, size_t len, lt_future_t **out);

/* lt_eval_close marks the end of the input stream. */
LT_API int lt_eval_close(lt_eval_t *ev);

/* lt_eval_next waits for the next result (in submission order when `ordered` is on, the
 * default) and returns it in *out, which the caller owns (lt_buf_free). A task whose kernel
 * failed still yields a result, with lt_buf_error set. LT_ECLOSED once the input is closed
 * and every result was read. */
LT_API int lt_eval_next(lt_eval_t *ev, lt_buf_t **out);

/* lt_eval_next_timeout is lt_eval_next waiting at most `timeout_ms` (0: do not wait; a
 * negative value waits as long as it takes): LT_ETIMEDOUT when no result came in time. */
LT_API int lt_eval_next_timeout(lt_eval_t *ev, int timeout_ms, lt_buf_t **out);

/* lt_eval_stats_json returns counters as a JSON object in *json (caller frees with free()). */
LT_API int lt_eval_stats_json(lt_eval_t *ev, char **json);

/* lt_eval_free stops dispatching, disconnects, stops spawned servers and frees everything;
 * accepts NULL. Futures not yet released stay valid to release. */
LT_API void lt_eval_free(lt_eval_t *ev);

/* lt_future_wait waits up to `timeout_ms` (-1: forever) for the result of a task submitted
 * with a future; LT_ETIMEDOUT when it is not ready in time. The result moves to *out (caller
 * owns it); a second wait gives LT_ESTATE. */
LT_API int lt_future_wait(lt_future_t *f, int timeout_ms, lt_buf_t **out);

/* lt_future_wait_any waits up to `timeout_ms` (-1: forever, 0: do not wait) until one of the
 * `n` futures in `fs` has a result not yet taken, moves that result to *out (caller owns it)
 * and its index in `fs` to *which; the lowest index when several are ready. The futures may
 * belong to one evaluator or several. Futures whose result was taken already are skipped;
 * LT_ESTATE when that is all of them, LT_ETIMEDOUT when none is ready in time, LT_EINVAL
 * when `fs`, `which` or `out` is NULL, `n` is not positive or a future is NULL. The futures
 * must not be released during the wait. Any thread. (The signature of DESIGN.md §8.) */
LT_API int lt_future_wait_any(lt_future_t **fs, int n, int timeout_ms, int *which, lt_buf_t **out);

/* lt_future_release drops the future (and its result if not taken); accepts NULL. */
LT_API void lt_future_release(lt_future_t *f);

/* Result buffers. Data is borrowed from `b`; errmsg is "" when there is no error. */
LT_API const void *lt_buf_data(const lt_buf_t *b);
LT_API size_t lt_buf_len(const lt_buf_t *b);
LT_API int lt_buf_error(const lt_buf_t *b);
LT_API const char *lt_buf_errmsg(const lt_buf_t *b);
LT_API void lt_buf_free(lt_buf_t *b);

/* lt_buf_task returns which task `b` is the result of: its submission index, counting every
 * lt_eval_submit of the evaluator from 0 (with or without a future, also the tasks whose
 * result comes from the journal or the sequential evaluator), so that results read with
 * ordered=off can be tied to their input. A failed task's result carries its index too.
 * UINT64_MAX for NULL. Any thread. */
LT_API uint64_t lt_buf_task(const lt_buf_t *b);

#ifdef __cplusplus
}
#endif
#endif
