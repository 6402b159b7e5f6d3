/* benchproc.c: benchmark-owned lithium-server processes and /proc memory readings
 * (benchproc.h). A server is fork+exec'd with its stdout on a pipe, read until its READY
 * line; its stderr stays the benchmark's. Nothing here knows what a benchmark measures. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchproc.h"

/* LT_EXAMPLE_SERVER and LT_EXAMPLE_MODULES: this build's, from examples/CMakeLists.txt. */
#define MAX_ARGS 32

/* exec_server runs in the child: stdout to the pipe, then the server. Never returns. */
static void exec_server(int out_fd, const char *const *extra) {
  const char *server = getenv("LITHIUM_SERVER");
  const char *argv[MAX_ARGS + 1] = {server != NULL ? server : LT_EXAMPLE_SERVER,
                                    "--listen",
                                    "tcp://127.0.0.1:0",
                                    "--no-supervise",
                                    "--modules",
                                    LT_EXAMPLE_MODULES};
  size_t n = 6;
  for (size_t i = 0; extra != NULL && extra[i] != NULL && n < MAX_ARGS; i++)
    argv[n++] = extra[i];
  argv[n] = NULL;
  dup2(out_fd, STDOUT_FILENO);
  close(out_fd);
  execv(argv[0], (char *const *)argv);
  fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

int bench_server_start(const char *prog, bench_server_t *s, const char *const *extra) {
  memset(s, 0, sizeof *s);
  int fds[2];
  if (pipe(fds) != 0) {
    fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    exec_server(fds[1], extra);
  }
  close(fds[1]);
  s->pid = pid;
  s->out = fdopen(fds[0], "r");
  if (s->out == NULL) close(fds[0]);
  char line[512];
  while (s->out != NULL && fgets(line, sizeof line, s->out) != NULL) {
    if (sscanf(line, "READY %255s", s->endpoint) == 1) break;
  }
  if (s->endpoint[0] == '\0') {
    fprintf(stderr, "%s: lithium-server did not start\n", prog);
    bench_server_stop(s);
    return -1;
  }
  return 0;
}

void bench_server_stop(bench_server_t *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  if (s->out != NULL) fclose(s->out);
  s->pid = 0;
  s->out = NULL;
}

long bench_proc_kib(pid_t pid, const char *field) {
  char path[64];
  if (pid == 0)
    snprintf(path, sizeof path, "/proc/self/status");
  else
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[256];
  size_t n = strlen(field);
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kib = strtol(line + n + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kib;
}

int bench_proc_cpu(pid_t pid, double *cpu_s, double *minflt) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  /* The command name may hold spaces and parentheses: the fields follow the last ')'. */
  char *p = got != NULL ? strrchr(line, ')') : NULL;
  unsigned long long flt = 0, utime = 0, stime = 0;
  /* After ')': state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
   * stime (proc(5)). */
  if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %llu %llu", &flt,
                          &utime, &stime) != 3)
    return -1;
  long hz = sysconf(_SC_CLK_TCK);
  *cpu_s = (double)(utime + stime) / (double)(hz > 0 ? hz : 100);
  *minflt = (double)flt;
  return 0;
}
