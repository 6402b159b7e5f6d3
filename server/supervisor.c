/* supervisor.c: the supervisor half of lithium-server (see supervisor.h). It never binds,
 * loads modules or starts threads: one signalfd (SIGCHLD and the stop signals, blocked)
 * drives a blocking read loop. The worker it forks continues in main() as the server; its
 * stdout is the supervisor's own, and only the first worker that binds prints READY
 * (crashlog.c), so a reader of our stdout sees the line exactly once. */
#include "supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <lithium/error.h>
#include "clock.h"
#include "crashlog.h"
#include "log.h"

static const char *sig_name(int sig, char *buf, size_t len) {
  const char *abbrev = sig > 0 && sig < LT_CRASH_EXIT ? sigabbrev_np(sig) : NULL;
  if (sig >= LT_CRASH_EXIT)
    snprintf(buf, len, "exit(%d)", sig - LT_CRASH_EXIT);
  else if (abbrev != NULL)
    snprintf(buf, len, "SIG%s", abbrev);
  else
    snprintf(buf, len, "signal %d", sig);
  return buf;
}

/* start_worker forks. In the child it sets up the death signal, restores the signal mask
 * and returns 0; in the parent the child's pid (or -1). */
static pid_t start_worker(lt_crashlog_t *cl, const sigset_t *oldmask, int sfd, pid_t self) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* The worker must not outlive us: a kill -9 of the supervisor takes the server down. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != self) _exit(1);
  close(sfd);
  sigprocmask(SIG_SETMASK, oldmask, NULL);
  lt__crashlog_attach(cl);
  lt__crashlog_catch_fatal();
  return 0;
}

/* set_listen points the next worker at the endpoint its predecessor bound. */
static int set_listen(lt_srv_args_t *a, const char *ep) {
  if (ep[0] == '\0' || strcmp(ep, a->listen) == 0) return LT_OK;
  char *s = strdup(ep);
  if (s == NULL) return LT_ENOMEM;
  free(a->listen);
  a->listen = s;
  return LT_OK;
}

/* die_like ends the supervisor of the same signal as its worker, else returns 128 + sig. */
static int die_like(int sig, const sigset_t *oldmask) {
  signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, oldmask, NULL);
  raise(sig);
  return 128 + sig;
}

int lt__supervise(lt_srv_args_t *a) {
  lt_crashlog_t *cl;
  if (lt__crashlog_new(&cl) != LT_OK) {
    fprintf(stderr, "lithium-server: cannot map the crash log: %s\n", strerror(errno));
    return 1;
  }
  sigset_t set, oldmask;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR1);
  sigprocmask(SIG_BLOCK, &set, &oldmask);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd < 0) {
    fprintf(stderr, "lithium-server: signalfd: %s\n", strerror(errno));
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    lt__crashlog_free(cl);
    return 1;
  }
  pid_t self = getpid();
  uint64_t restarts[LT_SUPERVISE_MAX_RESTARTS] = {0};
  unsigned nrestarts = 0;
  int stop_sig = 0; /* a stop signal we forwarded */
  int rc = 1;
  pid_t worker = start_worker(cl, &oldmask, sfd, self);
  if (worker == 0) return LT_SUPERVISE_WORKER;
  if (worker < 0) {
    fprintf(stderr, "lithium-server: cannot fork the worker: %s\n", strerror(errno));
    goto out;
  }
  for (;;) {
    struct signalfd_siginfo si;
    ssize_t r = read(sfd, &si, sizeof si);
    if (r != (ssize_t)sizeof si) {
      if (r < 0 && errno == EINTR) continue;
      fprintf(stderr, "lithium-server: reading signals: %s\n", strerror(errno));
      kill(worker, SIGKILL);
      waitpid(worker, NULL, 0);
      goto out;
    }
    if (si.ssi_signo != SIGCHLD) {
      /* SIGHUP re-reads the allow list; the others stop the worker gracefully. */
      if (si.ssi_signo != SIGHUP) stop_sig = (int)si.ssi_signo;
      kill(worker, (int)si.ssi_signo);
      continue;
    }
    int st;
    pid_t p = waitpid(worker, &st, WNOHANG);
    if (p != worker) continue;
    char name[32];
    /* An exit the worker did not decide on (a kernel called exit or _exit), whatever its
     * status, is a crash like a fatal signal; one it decided on ends us too, but a
     * recycle. */
    bool decided = lt__crashlog_left(cl);
    bool recycle = WIFEXITED(st) && WEXITSTATUS(st) == LT_EXIT_RECYCLE && stop_sig == 0 && decided;
    bool unexpected = WIFEXITED(st) && stop_sig == 0 && !decided;
    if (WIFEXITED(st) && !recycle && !unexpected) {
      /* A worker that left to be recycled (a kernel far past its deadline) while a stop was
       * on its way has stopped: the stop's answer is a clean exit, not the recycle's 75. */
      rc = stop_sig != 0 && WEXITSTATUS(st) == LT_EXIT_RECYCLE ? 0 : WEXITSTATUS(st);
      goto out;
    }
    if (WIFSIGNALED(st) && stop_sig != 0) {
      rc = WTERMSIG(st) == stop_sig ? die_like(stop_sig, &oldmask) : 128 + WTERMSIG(st);
      goto out;
    }
    int sig = recycle ? 0 : unexpected ? LT_CRASH_EXIT + WEXITSTATUS(st) : WTERMSIG(st);
    uint64_t dead = lt__crashlog_incarnation(cl);
    lt__crashlog_record(cl, sig);
    if (recycle)
      lt__log(LT_LOG_WARN, "worker %d (incarnation %016llx) recycled after a stuck kernel",
              (int)worker, (unsigned long long)dead);
    else
      lt__log(LT_LOG_WARN, "worker %d (incarnation %016llx) died of %s%s: restarting", (int)worker,
              (unsigned long long)dead, sig_name(sig, name, sizeof name),
              unexpected ? ", which it had not decided on (a kernel ended the process)" : "");
    uint64_t now = (uint64_t)lt__clock_ms();
    if (nrestarts == LT_SUPERVISE_MAX_RESTARTS && now - restarts[0] < LT_SUPERVISE_WINDOW_MS) {
      fprintf(stderr,
              "lithium-server: the worker died %d times within %d s: giving up (last: %s)\n",
              LT_SUPERVISE_MAX_RESTARTS + 1, LT_SUPERVISE_WINDOW_MS / 1000,
              recycle ? "recycled" : sig_name(sig, name, sizeof name));
      rc = 1;
      goto out;
    }
    /* The last restart times, oldest first. */
    if (nrestarts < LT_SUPERVISE_MAX_RESTARTS) {
      restarts[nrestarts++] = now;
    } else {
      memmove(restarts, restarts + 1, sizeof restarts - sizeof restarts[0]);
      restarts[LT_SUPERVISE_MAX_RESTARTS - 1] = now;
    }
    if (set_listen(a, lt__crashlog_endpoint(cl)) != LT_OK) {
      fprintf(stderr, "lithium-server: out of memory restarting the worker\n");
      goto out;
    }
    worker = start_worker(cl, &oldmask, sfd, self);
    if (worker == 0) return LT_SUPERVISE_WORKER;
    if (worker < 0) {
      fprintf(stderr, "lithium-server: cannot fork the worker: %s\n", strerror(errno));
      goto out;
    }
  }
out:
  close(sfd);
  sigprocmask(SIG_SETMASK, &oldmask, NULL);
  lt__crashlog_free(cl);
  return rc;
}
