/* spawn.c: starting and stopping local lithium-server processes. The READY line is the
 * only thing read from a server's stdout; its stderr is the caller's. Evaluator thread
 * only (fork happens here, so the child calls only async-signal-safe functions). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lithium/error.h>
#include "spawn.h"
#include "clock.h"

/* resolve_program finds `program` on PATH when it has no slash (execv in the child must
 * not search). */
static int resolve_program(const char *program, char *path, size_t len) {
  if (strchr(program, '/') != NULL) {
    if ((size_t)snprintf(path, len, "%s", program) >= len) return LT_EINVAL;
    return access(path, X_OK) == 0 ? LT_OK : LT_ENOENT;
  }
  const char *env = getenv("PATH");
  if (env == NULL) env = "/usr/local/bin:/usr/bin:/bin";
  while (*env != '\0') {
    size_t n = strcspn(env, ":");
    if ((size_t)snprintf(path, len, "%.*s/%s", (int)n, env, program) < len &&
        access(path, X_OK) == 0)
      return LT_OK;
    env += n + (env[n] == ':');
  }
  return LT_ENOENT;
}

/* read_ready reads stdout until a line "READY <endpoint>" or the deadline. */
static int read_ready(lt_proc_t *p, int timeout_ms, char *err, size_t errlen) {
  char line[512];
  size_t have = 0;
  int64_t deadline = lt__clock_ms() + timeout_ms;
  for (;;) {
    char *nl = memchr(line, '\n', have);
    if (nl != NULL) {
      *nl = '\0';
      if (strncmp(line, "READY ", 6) == 0 && line[6] != '\0') {
        p->endpoint = strdup(line + 6);
        return p->endpoint != NULL ? LT_OK : LT_ENOMEM;
      }
      size_t used = (size_t)(nl - line) + 1;
      memmove(line, nl + 1, have - used);
      have -= used;
      continue;
    }
    int64_t left = deadline - lt__clock_ms();
    if (left <= 0 || have == sizeof line) {
      snprintf(err, errlen, "no READY line within %d ms", timeout_ms);
      return LT_ESPAWN;
    }
    struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
    int r = poll(&pfd, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t got = read(p->out_fd, line + have, sizeof line - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      snprintf(err, errlen, "server exited before READY");
      return LT_ESPAWN;
    }
    have += (size_t)got;
  }
}

int lt__proc_spawn(lt_proc_t *p, const char *program, const char *modules, uint32_t threads,
                   const char *name, const char *const *extra, int timeout_ms, char *err,
                   size_t errlen) {
  memset(p, 0, sizeof *p);
  p->out_fd = -1;
  char path[4096];
  if (resolve_program(program, path, sizeof path) != LT_OK) {
    snprintf(err, errlen, "cannot find server program '%s'", program);
    return LT_ESPAWN;
  }
  char threads_s[16];
  snprintf(threads_s, sizeof threads_s, "%u", threads);
  const char *argv[20];
  int argc = 0;
  argv[argc++] = path;
  argv[argc++] = "--listen";
  argv[argc++] = "tcp://127.0.0.1:0";
  argv[argc++] = "--name";
  argv[argc++] = name;
  if (modules != NULL) {
    argv[argc++] = "--modules";
    argv[argc++] = modules;
  }
  if (threads > 0) {
    argv[argc++] = "--threads";
    argv[argc++] = threads_s;
  }
  for (int i = 0; extra != NULL && extra[i] != NULL && i < 8; i++)
    argv[argc++] = extra[i];
  argv[argc] = NULL;

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return LT_ESPAWN;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return LT_ESPAWN;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(fds[1], STDOUT_FILENO);
    execv(path, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  p->pid = pid;
  p->out_fd = fds[0];
  int rc = read_ready(p, timeout_ms, err, errlen);
  if (rc != LT_OK) {
    lt__proc_stop(p, 1000);
    return LT_ESPAWN;
  }
  return LT_OK;
}

int lt__proc_exited(lt_proc_t *p) {
  if (p->pid <= 0) return 1;
  int status;
  pid_t r = waitpid(p->pid, &status, WNOHANG);
  if (r == p->pid || (r < 0 && errno == ECHILD)) {
    p->pid = 0;
    return 1;
  }
  return 0;
}

void lt__proc_stop(lt_proc_t *p, int timeout_ms) {
  if (p->pid > 0) {
    kill(p->pid, SIGTERM);
    int64_t deadline = lt__clock_ms() + timeout_ms;
    while (!lt__proc_exited(p) && lt__clock_ms() < deadline) {
      struct timespec ts = {0, 5 * 1000000L};
      nanosleep(&ts, NULL);
    }
    if (p->pid > 0) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, NULL, 0);
      p->pid = 0;
    }
  }
  if (p->out_fd >= 0) close(p->out_fd);
  p->out_fd = -1;
  free(p->endpoint);
  p->endpoint = NULL;
}
