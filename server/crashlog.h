/* crashlog.h: the block of shared memory between lithium-server's supervisor and its
 * worker process. The worker writes the id (client, seq) of the instruction each worker
 * thread runs into one slot per thread, its incarnation and its bound endpoint; a fatal
 * signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) received by a worker thread names that
 * thread's slot as the culprit. After the worker dies of a signal the supervisor copies the
 * running slots and the culprit into the "last crash" area, which the next worker reads to
 * tell each client that greets it which of its instructions the crash is charged to: the
 * culprit alone when it is known, else every one that was running. Slots are written with
 * plain atomic stores (no locks a crash could leave held). Without a supervisor
 * (--no-supervise) nothing is attached and every worker-side call does nothing. Threads are
 * stated per function. */
#ifndef LT_CRASHLOG_H
#define LT_CRASHLOG_H

#include <stdbool.h>
#include <stdint.h>

/* Slots of running instructions: one per worker thread (at most LT_SRV_MAX_THREADS). */
#define LT_CRASHLOG_SLOTS 4096

/* The exit status of a worker that asks its supervisor to be recycled (a kernel overran its
 * deadline and holds a thread for good): restarted, but not a crash. */
#define LT_EXIT_RECYCLE 75

typedef struct lt_crashlog lt_crashlog_t;

/* lt__crashlog_new maps a zeroed shared block (MAP_SHARED|MAP_ANONYMOUS), to be inherited
 * by the workers the supervisor forks. LT_ENOMEM. Supervisor, before any fork. */
int lt__crashlog_new(lt_crashlog_t **out);

/* lt__crashlog_free unmaps the block; accepts NULL. */
void lt__crashlog_free(lt_crashlog_t *cl);

/* lt__crashlog_attach makes `cl` the block of this (worker) process: the worker-side calls
 * below write to it. Before any worker thread starts. */
void lt__crashlog_attach(lt_crashlog_t *cl);

/* lt__crashlog_catch_fatal installs, in an attached worker, the handler of the fatal signals
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT): it records the slot of the worker thread that
 * received one as the culprit (async-signal-safe: one atomic compare-and-swap), restores
 * the default action and raises the signal again, so the worker dies of it as before (core
 * dump included). It runs on the thread's alternate stack when it has one
 * (lt__crashlog_thread_start), so a kernel's stack overflow is caught too. Worker's main
 * thread, after lt__crashlog_attach and before any worker thread starts. */
void lt__crashlog_catch_fatal(void);

/* lt__crashlog_thread_start gives the calling worker thread an alternate signal stack for
 * the fatal-signal handler, unless it has one already (a sanitizer's) or no supervisor
 * watches the process; it returns what lt__crashlog_thread_end frees (NULL: nothing).
 * Each worker thread, at its start and its end. */
void *lt__crashlog_thread_start(void);
void lt__crashlog_thread_end(void *altstack);

/* lt__crashlog_attached tells whether a supervisor watches this process. Any thread. */
bool lt__crashlog_attached(void);

/* lt__crashlog_enter records that worker thread `slot` runs instruction {client, seq} (and
 * that the calling thread is slot's, for the fatal-signal handler); lt__crashlog_leave that
 * it runs none. Worker threads (each its own slot). */
void lt__crashlog_enter(uint32_t slot, uint64_t client, uint64_t seq);
void lt__crashlog_leave(uint32_t slot);

/* lt__crashlog_started records the worker's incarnation and bound endpoint, and returns
 * true when the READY line is still to be printed (the first worker of a supervisor that
 * gets this far prints it; later ones stay silent). Worker's main thread. */
bool lt__crashlog_started(uint64_t incarnation, const char *endpoint);

/* lt__crashlog_take fills what the welcome to `client` says of the previous incarnation's
 * death: its signal (0 for none or a recycle), the incarnation that died, the culprit when
 * it is `client`'s instruction (else 0), and the seqs of `client`'s instructions the crash
 * is charged to (a malloc'ed array in *seqs, NULL when none; the caller frees it): the
 * culprit alone when one is known, none when it is another client's, else every one that
 * was running. Each seq is told once: taken entries are cleared. Loop thread of the
 * worker. */
void lt__crashlog_take(uint64_t client, int *sig, uint64_t *incarnation, uint64_t *culprit,
                       uint64_t **seqs, uint32_t *n);

/* The "signal" of a worker that exited with status N when it had not decided to
 * (lt__crashlog_leaving): LT_CRASH_EXIT + N, never a signal number. A kernel that calls
 * exit() or _exit() ends the process as a fatal signal would: it is a crash, charged to what
 * was running, and the worker is restarted. The welcome's crash_signal carries it as is. */
#define LT_CRASH_EXIT 256

/* lt__crashlog_leaving marks the attached worker's coming exit as its own decision (a stop,
 * a recycle, a failed start): the supervisor then ends or restarts as that exit says. Any
 * thread, async-signal-safe; nothing when no log is attached. */
void lt__crashlog_leaving(void);

/* lt__crashlog_left tells, in the supervisor after its worker exited, whether that worker
 * had marked its exit (lt__crashlog_leaving), and clears the mark. */
bool lt__crashlog_left(lt_crashlog_t *cl);

/* lt__crashlog_record, in the supervisor after the worker died: `sig` > 0 (a death by
 * that signal, or an unexpected exit: LT_CRASH_EXIT + status) copies the running slots and the
 * culprit into the last crash; 0 (a recycle) records the death without instructions. Clears the
 * running slots and the culprit. */
void lt__crashlog_record(lt_crashlog_t *cl, int sig);

/* lt__crashlog_endpoint returns the endpoint the last worker bound ("" before one did), and
 * lt__crashlog_incarnation its incarnation. Supervisor, while no worker runs or for reading
 * only. */
const char *lt__crashlog_endpoint(const lt_crashlog_t *cl);
uint64_t lt__crashlog_incarnation(const lt_crashlog_t *cl);

#endif
