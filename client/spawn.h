/* spawn.h: local lithium-server processes for lt_eval_spawn_local: start one on a free
 * loopback port, wait for its READY line, stop it (SIGTERM, then SIGKILL). Evaluator
 * thread only. */
#ifndef LT_SPAWN_H
#define LT_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct lt_proc {
  pid_t pid;      /* 0 once reaped */
  int out_fd;     /* read end of its stdout, kept open so it never gets SIGPIPE */
  char *endpoint; /* from its READY line */
} lt_proc_t;

/* lt__proc_spawn starts `program` with --listen tcp://127.0.0.1:0, --modules `modules`
 * (unless NULL), --threads `threads` (unless 0), --name `name` and the NULL-terminated
 * `extra` arguments (may be NULL, at most 8), and waits up to
 * `timeout_ms` for READY. The child gets SIGTERM if the spawning thread dies. On failure
 * returns LT_ESPAWN with the reason in err, and leaves nothing running. */
int lt__proc_spawn(lt_proc_t *p, const char *program, const char *modules, uint32_t threads,
                   const char *name, const char *const *extra, int timeout_ms, char *err,
                   size_t errlen);

/* lt__proc_exited tells (without blocking) whether the process has ended; reaps it. */
int lt__proc_exited(lt_proc_t *p);

/* lt__proc_stop sends SIGTERM, waits up to `timeout_ms` for the exit, then SIGKILLs; reaps
 * and frees; accepts a stopped or zeroed proc. */
void lt__proc_stop(lt_proc_t *p, int timeout_ms);

#endif
