/* benchproc.h: lithium-server processes a benchmark starts and stops itself (so that it knows
 * each one's pid and endpoint), and the memory of a process as Linux reports it. For the
 * memory benchmark, which reads the servers' peak RSS, and the data-heavy ones, which read
 * their CPU time and page faults. The thread that starts a server
 * stops it; bench_proc_kib may be called from any thread. */
#ifndef LT_BENCHPROC_H
#define LT_BENCHPROC_H

#include <stdio.h>
#include <sys/types.h>

/* A server started by bench_server_start. */
typedef struct bench_server {
  pid_t pid;
  char endpoint[256]; /* from its READY line, e.g. tcp://127.0.0.1:40123 */
  FILE *out;          /* its stdout, kept open until it stops (no SIGPIPE if it writes) */
} bench_server_t;

/* bench_server_start runs this build's lithium-server (LITHIUM_SERVER overrides it) on a
 * free loopback port, without a supervisor (the pid is the process that holds the values),
 * with this build's modules and the extra flags `extra` (NULL-terminated, may be NULL), and
 * waits for its READY line. Returns 0, or -1 after printing why. */
int bench_server_start(const char *prog, bench_server_t *s, const char *const *extra);

/* bench_server_stop sends SIGTERM, reaps the server and closes its stdout; a server not
 * started is left alone. */
void bench_server_stop(bench_server_t *s);

/* bench_proc_kib returns the value in KiB of `field` ("VmRSS", "VmHWM": the peak RSS) of
 * /proc/PID/status (pid 0: this process), or -1 when it cannot be read. */
long bench_proc_kib(pid_t pid, const char *field);

/* bench_proc_cpu reads the CPU time (user + system, in seconds) and the minor page faults of
 * process `pid` from /proc/PID/stat into *cpu_s and *minflt. Returns 0, or -1 when it cannot
 * be read. */
int bench_proc_cpu(pid_t pid, double *cpu_s, double *minflt);

#endif
