/* main.c: lithium-server's entry point: parse the flags, fork the worker under a supervisor
 * (unless --no-supervise), start the server, announce it (--announce), print
 * "READY <endpoint>" once bound, run until SIGINT/SIGTERM, remove the announcement. Exit
 * codes: 0 after a clean shutdown (and for --help/--version), 1 when the server fails, 2 for
 * bad flags or values, 75 from a worker that asks to be recycled. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <lithium/error.h>
#include "announce.h"
#include "args.h"
#include "crashlog.h"
#include "log.h"
#include "server.h"
#include "supervisor.h"

/* SHUTDOWN_S bounds the freeing of the server after its loop ended: zmq_ctx_term waits
 * for every socket of the context, and one left open by a bug would hold a stopping server
 * for ever (and whoever waits for it). */
#define SHUTDOWN_S 10

static volatile sig_atomic_t exit_code;

/* on_shutdown_overdue ends a server whose shutdown did not finish in time. */
static void on_shutdown_overdue(int sig) {
  (void)sig;
  static const char msg[] = "lithium-server: shutdown did not finish in 10 s: exiting\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
  lt__crashlog_leaving();
  _exit(exit_code);
}

/* free_bounded frees the server, exiting with `rc` if that takes over SHUTDOWN_S. */
static void free_bounded(lt_server_t *srv, int rc) {
  exit_code = rc;
  signal(SIGALRM, on_shutdown_overdue);
  alarm(SHUTDOWN_S);
  lt__server_free(srv);
  alarm(0);
}

/* serve runs the worker (the process itself under --no-supervise) until it stops, and
 * returns its exit status. */
static int serve(lt_srv_args_t *args) {
  lt_server_t *srv;
  char err[512];
  int rc = lt__server_new(&srv, args, err, sizeof err);
  if (rc != LT_OK) {
    fprintf(stderr, "lithium-server: %s\n", err[0] ? err : lt_strerror(rc));
    if (rc == LT_EINVAL) lt__args_usage(stderr);
    /* A server that would run unprotected (or cannot set up its protection) is refused
     * like a bad flag: exit 2. */
    return rc == LT_EINVAL || rc == LT_EAUTH ? LT_ARGS_EXIT_USAGE : 1;
  }
  char announced[4096] = "";
  if (args->announce != NULL) {
    char ep[512];
    rc = lt__announce_endpoint(lt__server_endpoint(srv), args->advertise, ep, sizeof ep);
    if (rc != LT_OK) {
      snprintf(err, sizeof err, "--announce: cannot make an endpoint to announce from %s",
               lt__server_endpoint(srv));
    } else {
      rc = lt__announce_write(args->announce, srv->server_id, ep, announced, sizeof announced, err,
                              sizeof err);
    }
    if (rc != LT_OK) {
      fprintf(stderr, "lithium-server: %s\n", err);
      lt__server_free(srv);
      return 1;
    }
    lt__log(LT_LOG_INFO, "announced %s in %s", ep, announced);
  }
  /* Under a supervisor only the first worker announces itself: a restart is the same
   * server to whoever reads our stdout. */
  if (lt__crashlog_started(srv->incarnation, lt__server_endpoint(srv))) {
    printf("READY %s\n", lt__server_endpoint(srv));
    fflush(stdout);
  }
  rc = lt__server_run(srv);
  lt__announce_remove(announced);
  free_bounded(srv, rc);
  return rc;
}

int main(int argc, char **argv) {
  /* A parent that stops reading our stdout must not kill us with SIGPIPE. */
  signal(SIGPIPE, SIG_IGN);
  lt_srv_args_t args;
  int rc = lt__args_parse(&args, argc, argv, stdout, stderr);
  if (rc != LT_ARGS_RUN) {
    lt__args_free(&args);
    return rc;
  }
  if (args.log_level >= 0) lt__log_set_level(args.log_level);
  if (!args.no_supervise && (rc = lt__supervise(&args)) != LT_SUPERVISE_WORKER) {
    lt__args_free(&args);
    return rc;
  }
  rc = serve(&args);
  lt__args_free(&args);
  /* Every exit of the worker through here is its own decision: any other (a kernel that
   * calls exit) is a crash to its supervisor. */
  lt__crashlog_leaving();
  return rc;
}
