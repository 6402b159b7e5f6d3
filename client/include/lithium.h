/* lithium.h: the client API of Lithium-C.
 *
 * Build a skeleton program (lithium/skel.h), hand it to an evaluator, give the evaluator
 * servers (lt_eval_add_host, lt_eval_spawn_local), start it, submit input tasks and read
 * results. Every call returns LT_OK (0) or a negative lt_err code (lithium/error.h).
 *
 * Threads: lt_eval_submit, lt_eval_submit_owned, lt_eval_close, lt_eval_next, lt_future_*
 * and lt_eval_stats_json may be called from any thread, also concurrently; the other
 * lt_eval_* calls belong to the thread that owns the evaluator. */
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
 * failure. LT_EINVAL for a NULL program, lt_last_error quoting the reason of the builder
 * that made the NULL (a malformed kernel name, ...). */
LT_API int lt_eval_new(lt_eval_t **out, lt_skel_t *program);

/* lt_eval_set sets option `key` to `value` (see docs/guide.md, "Options"); '-' and '_' are
 * alike in keys. Unknown keys, bad values and a value that contradicts another option set
 * before (min_threads above max_threads) give LT_EINVAL, and lt_eval_error says which;
 * options that shape the run give LT_ESTATE after start. */
LT_API int lt_eval_set(lt_eval_t *ev, const char *key, const char *value);

/* lt_eval_error returns why the last failed call on `ev` failed, naming the call's argument
 * and what to do, e.g. "unknown option 'x'", "bad value 'v' for ordered (expected on/off,
 * true/false, yes/no or 1/0)" or "lt_eval_start: no server to start with: add one with
 * ..."; "" when no call on it failed. Every failing lt_eval_* call on `ev` sets it, so no
 * older text survives a later failure. Borrowed from `ev` until lt_eval_free (the next
 * failure overwrites it); "" for NULL. Same thread as lt_eval_set. */
LT_API const char *lt_eval_error(const lt_eval_t *ev);

/* lt_last_error returns why the calling thread's last failed call of this library failed,
 * naming the argument and why: every public call that fails sets it, also those without an
 * evaluator (lt_eval_new, lt_seq and the other builders, lt_skel_parse, lt_options_*,
 * lt_hosts_read, ...), e.g. "lt_seq: kernel name 'mandelk row' has no ':' (expected
 * module:function, ...)". A builder given the NULL another builder made quotes that one's
 * reason, so lt_eval_new(&ev, lt_seq("mandelk row")) says what was wrong with the name. A
 * successful call leaves it as it was (like errno); "" before the thread's first failure.
 * Borrowed, thread-local: valid until the thread's next failing call. Any thread. */
LT_API const char *lt_last_error(void);

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
 * be submitted before or after. It first checks every kernel of the program: a kernel whose
 * module's local copy (option modules) lacks its function fails it with LT_ENOKERNEL before
 * any server is asked; then it waits for a server that has every module of the program (its
 * welcome says which it has; one it will be sent under ship_modules counts), and fails with
 * LT_ENOMODULE when none has, naming each server, module and kernel. Either way nothing is
 * sent and the evaluator is failed. A server lacking a module (also one that joins later)
 * gets no work, with one warning. */
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

/* lt_eval_submit_owned adds an input task without copying its bytes: the evaluator takes
 * ownership of data[0..len), also on failure, and calls free_fn(data, hint) exactly once,
 * when nothing needs the bytes any more: after the last send that uses them, and once
 * lineage no longer needs the task's input (docs/guide.md, "Large values without copies":
 * under lazy binding, the default, when the task is done; with lazy=off once its first
 * instruction has completed; with lt_eval_run_local once that instruction ran), before this
 * returns when the submit fails, and at the latest in lt_eval_free. Until then the bytes must
 * stay valid and unchanged. free_fn runs on any thread, one of ZeroMQ's among them: it must
 * be quick and must not call this library. A NULL free_fn leaves the buffer the caller's,
 * valid and unchanged until lt_eval_free returns. `data` may be NULL only when `len` is 0.
 * Otherwise as lt_eval_submit. */
LT_API int lt_eval_submit_owned(lt_eval_t *ev, void *data, size_t len,
                                void (*free_fn)(void *data, void *hint), void *hint,
                                lt_future_t **out);

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

/* Options without an evaluator: the table behind lt_eval_set (for a tool's --help) and a
 * set of values judged the way an evaluator judges them (for a tool that checks its command
 * line before it builds anything). Any thread; one thread per lt_options_t. */
typedef struct lt_options lt_options_t;

/* lt_option_count returns the number of options (the rows of docs/guide.md's Options table). */
LT_API size_t lt_option_count(void);

/* lt_option_info describes option `i` (0 <= i < lt_option_count(), in the order defaults are
 * applied): its key, the shape of its value as --help shows it ("on|off", "N", "FILE", an
 * enum's values "a|b"), its default (NULL when it has none) and one line of help. Each out
 * parameter may be NULL; the strings are static. LT_EINVAL when `i` is out of range. */
LT_API int lt_option_info(size_t i, const char **key, const char **arg, const char **def,
                          const char **help);

/* lt_options_new creates a set holding every option's default in *out (caller frees with
 * lt_options_free). LT_ENOMEM. */
LT_API int lt_options_new(lt_options_t **out);

/* lt_options_from_env applies every LITHIUM_<KEY> variable that names an option, as
 * lt_eval_new does (a LITHIUM_* variable that names none is warned about, once a process).
 * LT_EINVAL when one holds a bad value, lt_options_error naming the variable. */
LT_API int lt_options_from_env(lt_options_t *o);

/* lt_options_set is lt_eval_set on the set: the same keys, values, checks and messages. */
LT_API int lt_options_set(lt_options_t *o, const char *key, const char *value);

/* lt_options_check makes the checks lt_eval_start makes that no single set can (a value
 * set against another's default): LT_EINVAL with the reason in lt_options_error. */
LT_API int lt_options_check(lt_options_t *o);

/* lt_options_get writes the value option `key` holds as text into buf (len bytes, truncated,
 * always terminated when len > 0): a boolean "on" or "off", a number in decimal, an enum's
 * name, a path ("" when unset), for curve_key the public key of the pair. LT_EINVAL for an
 * unknown key or a NULL argument, with lt_options_error saying so. */
LT_API int lt_options_get(lt_options_t *o, const char *key, char *buf, size_t len);

/* lt_options_error returns the message of the last failure of `o` ("" when none; "" for
 * NULL), borrowed until the next call on `o`. */
LT_API const char *lt_options_error(const lt_options_t *o);

/* lt_options_free frees the set; accepts NULL. */
LT_API void lt_options_free(lt_options_t *o);

/* lt_kernel_report_fn hears of one kernel of a program that cannot be loaded: its name
 * ("module:function"), the error (LT_ENOMODULE, LT_ENOKERNEL, LT_EINVAL) and a message
 * saying why, borrowed for the call. */
typedef void (*lt_kernel_report_fn)(void *ud, const char *kernel, int err, const char *msg);

/* lt_skel_check_kernels loads every kernel `s` names from the modules of directory `dir` the
 * way lt_eval_run_local does and calls `fn` for each one that does not load, in the order
 * the compiled program names them. Returns how many did not load (0: all of them did),
 * LT_EINVAL when `dir` is not a readable directory or `s` is no valid program, LT_ENOMEM.
 * Any thread. */
LT_API int lt_skel_check_kernels(const lt_skel_t *s, const char *dir, lt_kernel_report_fn fn,
                                 void *ud);

/* Hosts. A host string is "ENDPOINT" or "ENDPOINT KEY" (lt_eval_add_host): a tcp://host:port
 * endpoint of at most LT_ENDPOINT_MAX bytes and the server's CURVE public key in Z85 text
 * (LT_KEY_LEN characters). A hosts file holds one host a line, with '#' comments; an
 * announce directory holds one `<name>.endpoint` file per server (lithium-server --announce).
 * Any thread. */
#define LT_ENDPOINT_MAX 255
#define LT_KEY_LEN      40

/* lt_hosts_fn receives one host: `endpoint` and `key` (NULL when it has none), both borrowed
 * for the call. A non-zero return stops the reading and is returned. */
typedef int (*lt_hosts_fn)(void *ud, const char *endpoint, const char *key);

/* lt_hosts_read calls `fn` for every host of `path`: a hosts file, or each `*.endpoint` file
 * of an announce directory (a malformed one is skipped with a warning). LT_ENOENT, LT_EINVAL
 * (a malformed hosts file: its name and line), LT_EIO, or what `fn` returned, with a message
 * in err (errlen bytes). */
LT_API int lt_hosts_read(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen);

/* lt_host_split splits host string `host` into `endpoint` (LT_ENDPOINT_MAX + 1 bytes) and
 * `key` (LT_KEY_LEN + 1 bytes, "" when the string has none). LT_EINVAL when it is malformed. */
LT_API int lt_host_split(const char *host, char *endpoint, char *key);

/* lt_key_valid tells whether `text` is a CURVE public key in Z85 text (LT_KEY_LEN
 * characters of the Z85 alphabet). */
LT_API int lt_key_valid(const char *text);

/* lt_keypair_write writes a new CURVE key pair: NAME.key (public and secret, mode 0600) and
 * NAME.pub (the public key), as `lithium keygen NAME` does. Never overwrites: LT_EEXIST when
 * either exists; LT_EINVAL, LT_EIO; the message goes into err (errlen bytes). */
LT_API int lt_keypair_write(const char *name, char *err, size_t errlen);

/* lt_keypair_read reads a key file of lt_keypair_write into pub and sec (LT_KEY_LEN + 1 bytes
 * each; the public key is derived when only the secret is there). LT_EIO (cannot read),
 * LT_EINVAL (no valid secret key; a file readable by others is refused too), with a message
 * in err. */
LT_API int lt_keypair_read(const char *path, char *pub, char *sec, char *err, size_t errlen);

/* What a server said of itself (`lithium status`): lt_status_query fills one a host. */
typedef struct lt_server_module {
  char *name;   /* a loaded kernel module */
  char *sha256; /* the hex SHA-256 of its file, "" when unknown */
} lt_server_module_t;

typedef struct lt_server_status {
  char *endpoint;       /* the endpoint asked, as given */
  int answered;         /* 1: the fields below hold its answer; 0: `error` says why not */
  char *error;          /* "no answer", "refused: ...", "cannot connect: ..."; "" answered */
  char *name;           /* the server's id (lithium-server --name) */
  char *version;        /* its version */
  char *bound;          /* the endpoint it is bound to */
  uint32_t protocol;    /* its wire protocol version */
  uint64_t incarnation; /* random per server process */
  uint64_t uptime_ms;   /* since it started */
  uint32_t threads;     /* worker threads */
  uint32_t cores;       /* cores of its machine */
  double speed;         /* its relative speed */
  uint32_t sessions;    /* clients connected */
  uint32_t draining;    /* sessions moving their work off it (lt_eval_remove_host) */
  uint32_t active;      /* instructions running */
  uint32_t queued;      /* fireable instructions waiting for a thread */
  uint32_t parked;      /* instructions waiting for inputs */
  uint64_t completed;   /* instructions finished since start */
  double cpu;           /* recent CPU use of the process, 0..cores */
  uint64_t values_held; /* values in its store */
  uint64_t value_bytes; /* their bytes */
  int stopping;         /* shutting down (SIGTERM, SIGUSR1) */
  size_t nmodules;      /* loaded kernel modules */
  lt_server_module_t *modules;
  uint64_t peer_in, peer_out; /* bytes of values fetched from, served to other servers */
  uint64_t shm_in, shm_out;   /* of those, moved within this host as memfds */
  uint64_t shm_fallbacks;     /* large values from a server of this host that came by TCP */
} lt_server_status_t;

/* lt_status_query asks each of the `n` servers at `endpoints` (the same endpoint twice is
 * asked once) at once how it is, without opening a session, and waits at most `timeout_ms`
 * for the answers. keys[i] is the CURVE public key of server i (Z85 text; `keys` or keys[i]
 * NULL: none); `pub` and `sec` are our key pair ("" or NULL: none), used with the servers
 * that have a key. *out gets one entry a distinct endpoint, in the order given, and *nout
 * their count (caller frees with lt_status_free); a server that does not answer is an entry
 * with `answered` 0 and the reason in `error`. LT_EINVAL for a NULL endpoint, LT_EIO when no
 * ZeroMQ context can be made, LT_ENOMEM. Any thread. */
LT_API int lt_status_query(lt_server_status_t **out, size_t *nout, const char *const *endpoints,
                           const char *const *keys, size_t n, const char *pub, const char *sec,
                           int timeout_ms);

/* lt_status_json returns the `n` entries of `st` as a JSON array, an object an entry (the
 * output of `lithium status --json`); the caller frees it with free(). NULL when memory runs
 * out. */
LT_API char *lt_status_json(const lt_server_status_t *st, size_t n);

/* lt_status_free frees the `n` entries of lt_status_query; accepts NULL. */
LT_API void lt_status_free(lt_server_status_t *st, size_t n);

/* What lt_journal_compact did to a results journal (option journal=FILE). */
typedef struct lt_journal_stats {
  uint64_t records;      /* records kept */
  uint64_t duplicates;   /* records dropped: the same input was journaled before */
  uint64_t damaged;      /* records dropped: their checksum or their lengths fail */
  uint64_t torn_bytes;   /* bytes of a torn tail dropped (a record cut short by a crash) */
  uint64_t bytes_before; /* the file's size before */
  uint64_t bytes_after;  /* and after */
} lt_journal_stats_t;

/* lt_journal_compact rewrites the results journal at `path` without the records of a torn
 * tail, the damaged ones and the duplicates (the first record of an input is kept), as
 * `lithium journal compact FILE` does: the new file is written beside it, made durable and
 * renamed over it, so that a crash leaves one or the other. The header (the program and its
 * modules' hashes) is kept. *stats gets what it did (may be NULL). LT_ENOENT, LT_EINVAL (not
 * a journal, or one of format 1), LT_EAGAIN (a run has it open), LT_EIO, LT_ENOMEM, with a
 * message in err (errlen bytes). Any thread. */
LT_API int lt_journal_compact(const char *path, lt_journal_stats_t *stats, char *err,
                              size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
