/* supervisor.h: lithium-server as a small supervisor process and a worker process. The
 * supervisor maps the crash log (crashlog.h), forks the worker (which binds, loads the
 * modules and runs kernels), forwards SIGINT/SIGTERM/SIGHUP to it, and restarts it on the
 * same endpoint as a new incarnation when it dies of a signal it was not sent by us, or
 * asks to be recycled. Main thread of the process, before any other thread exists. */
#ifndef LT_SUPERVISOR_H
#define LT_SUPERVISOR_H

#include "args.h"

/* What lt__supervise returns in the forked worker: go on and be the server. */
#define LT_SUPERVISE_WORKER (-1)

/* At most this many restarts within LT_SUPERVISE_WINDOW_MS; one more and the supervisor
 * gives up (exit status 1). */
#define LT_SUPERVISE_MAX_RESTARTS 5
#define LT_SUPERVISE_WINDOW_MS    10000

/* lt__supervise forks the worker and watches it. In the worker it returns
 * LT_SUPERVISE_WORKER with the crash log attached and, for a restart, a->listen replaced by
 * the endpoint the previous worker bound. In the supervisor it returns the exit status once
 * the worker has exited for good: the worker's own status, 128 + N for a forwarded signal N
 * the worker died of (the supervisor re-raises it where it can), 1 when the worker crashed
 * too often or could not be forked. */
int lt__supervise(lt_srv_args_t *a);

#endif
