/* test_restarts.c: a long-lived client against a server that restarts (issue 34 item 6). A
 * lazy pipeline runs on two real lithium-server processes while one of them is killed
 * (SIGKILL) and started again on its own endpoint RESTARTS times, each time after its new
 * session has completed work (so values of the pipeline's tasks are on it when it dies).
 * Every result must come back right, in order: a reference to a value of an ended session is
 * recomputed, never read from the session that took its place in the server table. The
 * table must stay as large as the servers (stats `server_entries`): each ended session's
 * entry is reclaimed and reused, where it used to grow by one entry a restart. And a server
 * that dies during handshakes (a stand-in that drops two connections, then a real server on
 * its endpoint) is connected again, not taken for one that refused our key. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define RESTARTS    20
#define OUTSTANDING 32    /* tasks submitted and not yet read, at most */
#define WAIT_MS     60000 /* the longest any one step may take */

static lt_proc_t steady, phoenix;

static void reap_both(void) {
  lt__proc_stop(&steady, 5000);
  lt__proc_stop(&phoenix, 5000);
}

/* restart starts the phoenix again on `endpoint`; the dead one's port may be held for a
 * moment, so it tries for a while. */
static void restart(const char *endpoint) {
  const char *args[] = {"--no-supervise", "--listen", endpoint, NULL};
  char err[256] = "";
  for (int i = 0; i < 100; i++) {
    if (lt__proc_spawn(&phoenix, LT_TEST_SERVER, LT_TEST_MODULES, 2, "phoenix", args, 10000, err,
                       sizeof err) == LT_OK) {
      cr_assert_str_eq(phoenix.endpoint, endpoint);
      return;
    }
    usleep(100 * 1000);
  }
  cr_assert_fail("cannot restart %s: %s", endpoint, err);
}

typedef struct run {
  lt_eval_t *ev;
  int64_t submitted, read;
  uint64_t most_entries; /* the most server_entries seen */
} run_t;

/* pump submits up to OUTSTANDING tasks (while `more`) and reads the results that come
 * within 20 ms: each must be the next task's, right. */
static void pump(run_t *r, int more) {
  while (more && r->submitted - r->read < OUTSTANDING) {
    unsigned char tok[8];
    put_i64(tok, r->submitted++);
    int rc = lt_eval_submit(r->ev, tok, 8, NULL);
    cr_assert_eq(rc, LT_OK, "submit %lld: %s", (long long)r->submitted, lt_strerror(rc));
  }
  lt_buf_t *b = NULL;
  int rc = lt_eval_next_timeout(r->ev, 20, &b);
  if (rc == LT_ETIMEDOUT) return;
  cr_assert_eq(rc, LT_OK, "result %lld: %s", (long long)r->read, lt_strerror(rc));
  cr_assert_eq(lt_buf_error(b), LT_OK, "task %lld: %s %s", (long long)r->read,
               lt_strerror(lt_buf_error(b)), lt_buf_errmsg(b));
  cr_assert_eq(get_i64(lt_buf_data(b)), (r->read + 1) * 2, "task %lld", (long long)r->read);
  lt_buf_free(b);
  r->read++;
}

/* look reads the stats: the phoenix's (the second server shown: the first host's entry is
 * never reclaimed, and only the phoenix's latest session is shown) sessions and completions
 * in its latest session; notes the table's size. */
static void look(run_t *r, uint64_t *sessions, uint64_t *completed) {
  char *st = stats_of(r->ev);
  uint64_t v[2] = {0};
  cr_assert_eq(stats_each(st, "sessions", v, 2), 2, "two servers shown: %s", st);
  *sessions = v[1];
  cr_assert_eq(stats_each(st, "completed", v, 2), 2);
  *completed = v[1];
  uint64_t n = stats_u64(st, "server_entries");
  if (n > r->most_entries) r->most_entries = n;
  free(st);
}

/* until_worked pumps until the phoenix's session `session` has completed something. */
static void until_worked(run_t *r, uint64_t session) {
  int64_t deadline = mono_ms() + WAIT_MS;
  for (;;) {
    uint64_t sessions = 0, completed = 0;
    look(r, &sessions, &completed);
    if (sessions == session && completed > 0) return;
    cr_assert_lt(mono_ms(), deadline, "session %llu of the phoenix never worked (%llu now)",
                 (unsigned long long)session, (unsigned long long)sessions);
    pump(r, 1);
  }
}

Test(restarts, a_server_restarted_many_times_keeps_results_right_and_the_table_small,
     .timeout = 300, .fini = reap_both) {
  start_server_with(&steady, "steady", 2, (const char *const[]){"--no-supervise", NULL});
  start_server_with(&phoenix, "phoenix", 2, (const char *const[]){"--no-supervise", NULL});
  char endpoint[256];
  snprintf(endpoint, sizeof endpoint, "%s", phoenix.endpoint);
  lt_proc_t procs[2] = {steady, phoenix};
  /* Values stay on the servers between the stages (lazy binding), so a loss recomputes;
   * the kills are no crash of a kernel, so they are charged: max_retries out of reach. */
  const char *opts[] = {"mode", "optimized",          "heartbeat_ms", "200", "max_retries",
                        "1000", "connect_timeout_ms", "30000",        NULL};
  run_t r = {.ev = eval_on_procs(
                 lt_farm(lt_pipeline(lt_seq("testk:inc"), lt_seq_with("testk:sleep", "1", 1),
                                     lt_seq("testk:dbl"), NULL)),
                 procs, 2, opts)};
  for (uint64_t k = 1; k <= RESTARTS; k++) {
    until_worked(&r, k);
    kill(phoenix.pid, SIGKILL);
    lt__proc_stop(&phoenix, 1000);
    restart(endpoint);
  }
  until_worked(&r, RESTARTS + 1);
  cr_assert_eq(lt_eval_close(r.ev), LT_OK);
  int64_t deadline = mono_ms() + WAIT_MS;
  while (r.read < r.submitted) {
    cr_assert_lt(mono_ms(), deadline, "%lld of %lld results", (long long)r.read,
                 (long long)r.submitted);
    pump(&r, 0);
  }
  lt_buf_t *b = NULL;
  cr_assert_eq(lt_eval_next_timeout(r.ev, 10000, &b), LT_ECLOSED);
  /* Nothing runs now: every ended session's entry goes at the next tick or so. */
  uint64_t sessions = 0, completed = 0, entries = 0;
  for (int t = 0; t < 100; t++) {
    char *st = stats_of(r.ev);
    entries = stats_u64(st, "server_entries");
    uint64_t retries = stats_u64(st, "retries");
    cr_assert_gt(retries, 0, "the kills lost values on the phoenix: recomputed");
    free(st);
    if (entries == 2) break;
    usleep(100 * 1000);
  }
  look(&r, &sessions, &completed);
  fprintf(stderr,
          "restarts: %lld tasks right through %d restarts; at most %llu entries, %llu at "
          "the end\n",
          (long long)r.read, RESTARTS, (unsigned long long)r.most_entries,
          (unsigned long long)entries);
  cr_assert_eq(sessions, RESTARTS + 1, "the phoenix's sessions, its latest entry counts them");
  cr_assert_eq(entries, 2, "one entry per server once nothing refers to the ended sessions");
  cr_assert_leq(r.most_entries, 5, "the table stays small while they restart (22 before)");
  lt_eval_free(r.ev);
}

/* The stand-in for a server that dies during handshakes: a TCP listener that accepts
 * `drops` connections and closes each at once (as a supervised worker's crash does to a
 * handshake under way), then stops listening and starts a real server on its endpoint. It
 * gives up when the test says stop. */
typedef struct dropper {
  int fd; /* the listener */
  int drops;
  atomic_int dropped;
  atomic_int stop;
  atomic_int started; /* the real server is up on the endpoint */
  char endpoint[64];
  char err[256];
} dropper_t;

static void *drop_then_serve(void *arg) {
  dropper_t *d = arg;
  while (atomic_load(&d->dropped) < d->drops && !atomic_load(&d->stop)) {
    struct pollfd pfd = {.fd = d->fd, .events = POLLIN};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int c = accept(d->fd, NULL, NULL);
    if (c < 0) continue;
    if (atomic_fetch_add(&d->dropped, 1) + 1 == d->drops) {
      close(d->fd); /* before the last drop, so that no later connect waits in its backlog */
      d->fd = -1;
    }
    close(c);
  }
  const char *args[] = {"--no-supervise", "--listen", d->endpoint, NULL};
  for (int i = 0; i < 100 && !atomic_load(&d->stop) && atomic_load(&d->dropped) == d->drops; i++) {
    if (lt__proc_spawn(&phoenix, LT_TEST_SERVER, LT_TEST_MODULES, 2, "phoenix", args, 10000, d->err,
                       sizeof d->err) == LT_OK) {
      atomic_store(&d->started, 1);
      break;
    }
    usleep(100 * 1000);
  }
  /* The server's parent-death signal follows this thread: it lives as long as the run. */
  while (!atomic_load(&d->stop))
    usleep(10 * 1000);
  return NULL;
}

static void reap_phoenix(void) {
  if (phoenix.pid > 0) lt__proc_stop(&phoenix, 5000);
}

/* A connection that closes during its handshake twice in a row is a server that died or
 * restarted meanwhile, not a refusal: the client greets it again and runs on it once it is
 * back. It used to take the first such close for a refused key: `auth refused` for the rest
 * of the evaluation (a supervised server whose worker crashed during a handshake was lost
 * for good, and lt_eval_start failed LT_EAUTH with it alone). */
Test(restarts, a_handshake_cut_by_a_restart_is_no_refusal, .timeout = 120, .fini = reap_phoenix) {
  dropper_t d = {.drops = 2};
  d.fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(d.fd, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  /* Its closed connections linger (TIME_WAIT) on the port the real server binds next. */
  int one = 1;
  cr_assert_eq(setsockopt(d.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  cr_assert_eq(bind(d.fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(listen(d.fd, 8), 0);
  socklen_t len = sizeof a;
  cr_assert_eq(getsockname(d.fd, (struct sockaddr *)&a, &len), 0);
  snprintf(d.endpoint, sizeof d.endpoint, "tcp://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, drop_then_serve, &d), 0);
  const char *hosts[] = {d.endpoint};
  const char *opts[] = {"connect_timeout_ms", "30000", NULL};
  int64_t ms = 0;
  int rc = run_on_hosts(hosts, 1, opts, &ms);
  atomic_store(&d.stop, 1);
  pthread_join(t, NULL);
  if (d.fd >= 0) close(d.fd);
  cr_assert_eq(atomic_load(&d.dropped), 2, "connections dropped during their handshake");
  cr_assert(atomic_load(&d.started), "the server did not start on %s: %s", d.endpoint, d.err);
  cr_assert_eq(rc, LT_OK, "%s after %lld ms", lt_strerror(rc), (long long)ms);
}
