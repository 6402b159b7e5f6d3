/* test_exhaust.c: a hostile peer on the wire against the server's memory and descriptors,
 * end to end with real lithium-server processes and raw ZMTP peers (tests/server/zmtp_peer.h)
 * beside honest evaluators (issue 22, cases 6 and 7):
 * - a message that never ends (1 MB frames with the MORE flag, no last frame) cannot reach a
 *   CURVE server's memory: the peer is refused at its greeting; without CURVE (the control)
 *   it grows the server, and only the cut of connections without a session ends it;
 * - handshaken connections that never say hello, at an open-file limit of 256, do not keep
 *   an honest client out, and every one of them is cut within LT_CONNS_HELLO_MS;
 * - a holder that answers everything but what was asked (heartbeat echoes, values of other
 *   ids, errors) keeps an instruction parked no longer than --fetch-timeout from the fetch;
 * - a client that names arbitrary endpoints as holders (a TCP listener that stays silent,
 *   one that closes every connection, an ipc:// path) makes the server connect to each at
 *   most a few times, and to the ipc:// path never. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <lithium.h>
#include <lithium/error.h>
#include "curve.h"
#include "harness.h"
#include "hostile.h"
#include "server/srv_helper.h"
#include "server/zmtp_peer.h"

#define MB (UINT64_C(1) << 20)
/* LT_CONNS_HELLO_MS of server/conns.h: how long a connection may stay without a session. */
#define LT_CONNS_HELLO_MS 10000

/* rss_kb returns the resident set of process `pid` in KiB (VmRSS), failing the test when it
 * cannot be read. */
static uint64_t rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  unsigned long long kb = 0;
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL)
    found = sscanf(line, "VmRSS: %llu kB", &kb) == 1;
  fclose(f);
  cr_assert(found, "no VmRSS in %s", path);
  return kb;
}

/* flood connects to `ep` and sends 1 MB frames, each with the MORE flag, until `budget` bytes
 * went or the server ended the connection; returns the bytes sent. With `mech` ("NULL" or
 * "CURVE") it sends them right after its greeting; without (NULL) it completes a NULL
 * handshake first (libzmq drops a peer whose frames come before its handshake is over). The
 * connection is left open in *z (-1 when it could not even greet). */
static uint64_t flood(th_zmtp_t *z, const char *ep, const char *mech, uint64_t budget) {
  uint64_t sent = 0;
  if (mech != NULL ? th_zmtp_greet(z, ep, mech) != 0 : th_zmtp_open(z, ep, NULL, 0, 5000) != 0)
    return 0; /* refused before it could send */
  while (sent < budget && th_zmtp_frame(z, NULL, MB, true) == 0)
    sent += MB;
  return sent;
}

typedef struct keys {
  char dir[64], srv_key[128], cli_key[128], allow[128], srv_pub[41];
} keys_t;

static void make_keys(keys_t *k) {
  snprintf(k->dir, sizeof k->dir, "/tmp/lt-exhaust-XXXXXX");
  cr_assert_not_null(mkdtemp(k->dir));
  char base[100], path[160], pub[41], err[300];
  snprintf(base, sizeof base, "%s/server", k->dir);
  cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
  snprintf(k->srv_key, sizeof k->srv_key, "%s.key", base);
  snprintf(path, sizeof path, "%s.pub", base);
  cr_assert_eq(lt__curve_read_public(path, k->srv_pub, err, sizeof err), LT_OK, "%s", err);
  snprintf(base, sizeof base, "%s/client", k->dir);
  cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
  snprintf(k->cli_key, sizeof k->cli_key, "%s.key", base);
  snprintf(path, sizeof path, "%s.pub", base);
  cr_assert_eq(lt__curve_read_public(path, pub, err, sizeof err), LT_OK, "%s", err);
  snprintf(k->allow, sizeof k->allow, "%s/allow", k->dir);
  FILE *f = fopen(k->allow, "w");
  cr_assert_not_null(f);
  fprintf(f, "%s honest\n", pub);
  fclose(f);
}

static void drop_keys(const keys_t *k) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
  cr_assert_eq(system(cmd), 0);
}

/* Issue 22, case 6. libzmq holds a multipart message until its last frame and bounds neither
 * its frames nor its bytes (ZMQ_MAXMSGSIZE bounds one frame): only who may send is bounded.
 * Under CURVE a peer without an allowed key never gets a frame in: greeted as NULL or as
 * CURVE, or waiting for a NULL handshake, it is dropped at the greeting or at its first
 * frame, round after round, and the
 * server's memory stays where it was while an honest client is served. */
Test(exhaust, never_ending_message_under_curve, .timeout = 120) {
  keys_t k;
  make_keys(&k);
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer keeps freed memory in a quarantine (256 MB): the frames each refused
   * peer got in before its refusal would show as growth. The server gets none. */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts_env[1024];
  snprintf(opts_env, sizeof opts_env, "%s%squarantine_size_mb=0", asan != NULL ? asan : "",
           asan != NULL && asan[0] != '\0' ? ":" : "");
  setenv("ASAN_OPTIONS", opts_env, 1);
#endif
  /* --no-supervise: the pid is the server's own, whose RSS is measured. */
  const char *extra[] = {"--curve-key", k.srv_key, "--allow", k.allow, "--no-supervise", NULL};
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, extra), 0);
  char host[400];
  snprintf(host, sizeof host, "%s %s", s.endpoint, k.srv_pub);
  const char *hosts[] = {host};
  const char *opts[] = {"curve_key", k.cli_key, NULL};
  int64_t ms;
  cr_assert_eq(run_on_hosts(hosts, 1, opts, &ms), LT_OK); /* warm: the server's own growth */
  uint64_t rss0 = rss_kb(s.pid), tried = 0;
  int rounds = 0;
  for (int64_t until = th_now_ms() + 3000; th_now_ms() < until; rounds++) {
    th_zmtp_t z;
    static const char *const mechs[] = {"NULL", "CURVE", NULL};
    uint64_t sent = flood(&z, s.endpoint, mechs[rounds % 3], 256 * MB);
    cr_assert_lt(sent, 256 * MB, "round %d: 256 MB of one message went in", rounds);
    tried += sent;
    th_zmtp_close(&z);
  }
  uint64_t rss1 = rss_kb(s.pid);
  cr_assert_lt(rss1, rss0 + 32 * 1024, "RSS %llu kB -> %llu kB after %d rounds (%llu MB sent)",
               (unsigned long long)rss0, (unsigned long long)rss1, rounds,
               (unsigned long long)(tried / MB));
  cr_log_info("under CURVE: %d rounds, %llu MB sent, RSS %llu kB -> %llu kB", rounds,
              (unsigned long long)(tried / MB), (unsigned long long)rss0, (unsigned long long)rss1);
  cr_assert_eq(run_on_hosts(hosts, 1, opts, &ms), LT_OK);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
  drop_keys(&k);
}

/* The control, without CURVE: the same peer grows the server by what it sends (so the test
 * above could fail), and is cut only because its connection has no session after
 * LT_CONNS_HELLO_MS; an honest client is served meanwhile. */
Test(exhaust, never_ending_message_without_curve, .timeout = 120) {
  const char *extra[] = {"--no-supervise", NULL};
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, extra), 0);
  const char *hosts[] = {s.endpoint};
  int64_t ms;
  cr_assert_eq(run_on_hosts(hosts, 1, NULL, &ms), LT_OK);
  uint64_t rss0 = rss_kb(s.pid);
  int64_t t0 = th_now_ms();
  th_zmtp_t z;
  uint64_t sent = flood(&z, s.endpoint, NULL, 96 * MB);
  cr_assert_eq(sent, 96 * MB, "the server ended the connection after %llu MB",
               (unsigned long long)(sent / MB));
  uint64_t rss1 = rss0;
  for (int64_t until = th_now_ms() + 3000; th_now_ms() < until && rss1 < rss0 + 64 * 1024;) {
    usleep(50 * 1000);
    rss1 = rss_kb(s.pid);
  }
  cr_assert_geq(rss1, rss0 + 64 * 1024, "RSS %llu kB -> %llu kB: the message was not held",
                (unsigned long long)rss0, (unsigned long long)rss1);
  cr_log_info("without CURVE: %llu MB sent, RSS %llu kB -> %llu kB",
              (unsigned long long)(sent / MB), (unsigned long long)rss0, (unsigned long long)rss1);
  cr_assert_eq(run_on_hosts(hosts, 1, NULL, &ms), LT_OK);
  int left = (int)(t0 + LT_CONNS_HELLO_MS + 3000 - th_now_ms());
  cr_assert_eq(th_conn_ended(z.fd, left > 0 ? left : 1), 1,
               "the connection without a session was not cut");
  th_zmtp_close(&z);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
}

/* Issue 22, case 7: at an open-file limit of 256 (prlimit), 400 connections that complete
 * the ZMTP handshake and never say hello would take every descriptor. The server cuts the
 * oldest connections without a session beyond a quarter of its descriptors (conns.h): an
 * honest evaluator starts and runs its tasks at once, most idle connections are cut by then,
 * and every one within LT_CONNS_HELLO_MS. */
Test(exhaust, idle_connections_at_a_low_descriptor_limit, .timeout = 120) {
  enum { IDLE = 400 };
  const char *argv[] = {
      "/usr/bin/prlimit", "--nofile=256:256", LT_TEST_SERVER, "--listen", "tcp://127.0.0.1:0",
      "--modules",        LT_TEST_MODULES,    "--threads",    "2",        NULL};
  if (access(argv[0], X_OK) != 0) cr_skip_test("no %s", argv[0]);
  th_server_t s;
  cr_assert_eq(th_server_start_argv(&s, argv, 10000), 0);
  static th_zmtp_t idle[IDLE];
  for (int i = 0; i < IDLE; i++)
    cr_assert_eq(th_zmtp_open(&idle[i], s.endpoint, NULL, 0, 5000), 0,
                 "idle connection %d: no handshake", i);
  int64_t opened = th_now_ms();
  const char *hosts[] = {s.endpoint};
  int64_t ms;
  cr_assert_eq(run_on_hosts(hosts, 1, NULL, &ms), LT_OK);
  int64_t took = th_now_ms() - opened;
  cr_assert_lt(took, 5000, "the honest client took %lld ms", (long long)took);
  int ended = 0;
  for (int i = 0; i < IDLE; i++)
    ended += th_conn_ended(idle[i].fd, 1);
  cr_log_info("idle connections at nofile 256: the honest client done %lld ms after the last "
              "of %d opened, %d of them cut by then",
              (long long)took, IDLE, ended);
  cr_assert_gt(ended, IDLE / 2, "only %d of %d idle connections cut", ended, IDLE);
  for (int i = 0; i < IDLE; i++) {
    int left = (int)(opened + LT_CONNS_HELLO_MS + 3000 - th_now_ms());
    cr_assert_eq(th_conn_ended(idle[i].fd, left > 0 ? left : 1), 1,
                 "idle connection %d still open %d ms after the last one opened", i,
                 LT_CONNS_HELLO_MS + 3000);
    th_zmtp_close(&idle[i]);
  }
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
}

/* greeted_server starts a server with --fetch-timeout 1500 and greets it as `client`. */
static void greeted_server(th_server_t *s, th_client_t *c, uint64_t client) {
  const char *extra[] = {"--fetch-timeout", "1500", NULL};
  cr_assert_eq(th_server_start_default(s, extra), 0);
  cr_assert_eq(th_client_open(c, s->endpoint), 0);
  cr_assert_eq(th_hello_ok(c, client), 0);
}

/* Issue 22, case 7: the fetch timeout counts from the request. The hostile holder echoes
 * every heartbeat and answers every FETCH with a value of another id and "hello first";
 * before, any of these kept the reader parked (the echoes for ever). Now only a "still
 * pending" about the very id would: the instruction fails LT_ELOST --fetch-timeout after
 * its fetch, give or take the peer timer's tick (a quarter of it). */
Test(exhaust, stray_holder_parks_nothing_past_the_fetch_timeout, .timeout = 60) {
  enum { FETCH_MS = 1500 };
  const uint64_t client = UINT64_C(0x7e57ab1e);
  lt_hostile_t h;
  hostile_start(&h, LT_HOSTILE_STRAY);
  th_server_t s;
  th_client_t c;
  greeted_server(&s, &c, client);
  const char *kernels[] = {"testk:inc"};
  const char *peers[] = {s.endpoint, h.endpoint};
  cr_assert_eq(th_program_peers(&c, kernels, 1, peers, 2), 0);
  lt_input_t in = {.kind = LT_INPUT_REF, .id = {client, 5}, .holder = h.endpoint};
  char msg[600] = "";
  int64_t t0 = th_now_ms();
  int st = th_exec1(&c, 1, &in, 0, (lt_oid_t){client, 6}, LT_INSTR_RETURN, NULL, msg, sizeof msg);
  int64_t took = th_now_ms() - t0;
  cr_log_info("stray holder: LT_ELOST after %lld ms (%d fetches answered astray, %d hellos)",
              (long long)took, atomic_load(&h.fetches), atomic_load(&h.welcomes));
  cr_assert_eq(st, LT_ELOST, "status %d: %s", st, msg);
  cr_assert_gt(atomic_load(&h.fetches), 0, "the holder was never asked");
  cr_assert_geq(took, FETCH_MS - 100, "failed after %lld ms: %s", (long long)took, msg);
  cr_assert_lt(took, FETCH_MS + FETCH_MS / 4 + 1000, "failed after %lld ms: %s", (long long)took,
               msg);
  lt_msg_t bye = {.type = LT_MSG_BYE};
  cr_assert_eq(th_send(&c, &bye, NULL, 0), 0);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
  hostile_stop(&h);
}

/* Listeners that are not Lithium servers, counting the connections they get: a TCP one that
 * accepts and says nothing, a TCP one that closes at once, a Unix one at an ipc:// path. */
typedef struct listeners {
  int fd[3];
  char ep[3][160];
  char dir[64];
  atomic_int accepts[3];
  atomic_int stop;
  int kept[64];
  int nkept;
  pthread_t thread;
} listeners_t;

static int tcp_listener(char *ep, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  socklen_t sl = sizeof sa;
  cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 64) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
  snprintf(ep, len, "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
  return fd;
}

static void *accept_loop(void *arg) {
  listeners_t *l = arg;
  while (!atomic_load(&l->stop)) {
    struct pollfd p[3];
    for (int i = 0; i < 3; i++)
      p[i] = (struct pollfd){.fd = l->fd[i], .events = POLLIN};
    if (poll(p, 3, 50) <= 0) continue;
    for (int i = 0; i < 3; i++) {
      if (!(p[i].revents & POLLIN)) continue;
      int c = accept(l->fd[i], NULL, NULL);
      if (c < 0) continue;
      atomic_fetch_add(&l->accepts[i], 1);
      if (i == 0 && l->nkept < 64)
        l->kept[l->nkept++] = c;
      else
        close(c);
    }
  }
  return NULL;
}

static void listeners_start(listeners_t *l) {
  memset(l, 0, sizeof *l);
  l->fd[0] = tcp_listener(l->ep[0], sizeof l->ep[0]);
  l->fd[1] = tcp_listener(l->ep[1], sizeof l->ep[1]);
  snprintf(l->dir, sizeof l->dir, "/tmp/lt-exhaust-XXXXXX");
  cr_assert_not_null(mkdtemp(l->dir));
  struct sockaddr_un su = {.sun_family = AF_UNIX};
  snprintf(su.sun_path, sizeof su.sun_path, "%s/s", l->dir);
  snprintf(l->ep[2], sizeof l->ep[2], "ipc://%s", su.sun_path);
  l->fd[2] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert(l->fd[2] >= 0 && bind(l->fd[2], (struct sockaddr *)&su, sizeof su) == 0 &&
            listen(l->fd[2], 64) == 0);
  cr_assert_eq(pthread_create(&l->thread, NULL, accept_loop, l), 0);
}

static void listeners_stop(listeners_t *l) {
  atomic_store(&l->stop, 1);
  pthread_join(l->thread, NULL);
  for (int i = 0; i < l->nkept; i++)
    close(l->kept[i]);
  for (int i = 0; i < 3; i++)
    close(l->fd[i]);
  char path[100];
  snprintf(path, sizeof path, "%s/s", l->dir);
  unlink(path);
  rmdir(l->dir);
}

/* send_ref sends, without waiting, an instruction of kernel 0 reading value `id` of `holder`
 * into output `seq` of `client`. */
static void send_ref(th_client_t *c, uint64_t client, uint64_t seq, const char *holder) {
  lt_input_t in = {.kind = LT_INPUT_REF, .id = {client, 100000 + seq}, .holder = holder};
  lt_oid_t out = {client, seq};
  lt_instr_t ins = {.seq = seq,
                    .ninputs = 1,
                    .inputs = &in,
                    .noutputs = 1,
                    .outputs = &out,
                    .flags = LT_INSTR_RETURN};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &ins;
  cr_assert_eq(th_send(c, &m, NULL, 0), 0);
}

/* Issue 22, case 7: a client can name any endpoint among its servers, but the server
 * connects only to tcp:// ones, and keeps a link only to one that welcomes it as a Lithium
 * server would, within min(--fetch-timeout, 5 s) (1.5 s here); one that does not is not
 * connected to again for 1 s, then 2, 4, ... (at most 10 min), and libzmq reconnects a link
 * after a third of that 1.5 s, not every 100 ms. For 8 s the client names a silent TCP
 * listener and one that closes every connection as holders, 10 times a second each: the
 * silent one gets at most 3 connections (tries at 0, 2.5 and 6 s), the closing one at most
 * 12 (4 a try), and an ipc:// path none. (Before: a new link whenever the last one timed
 * out, and a reconnect every 100 ms, some 80 connections to the closing listener.) */
Test(exhaust, arbitrary_peer_endpoints, .timeout = 60) {
  const uint64_t client = UINT64_C(0xa7b17a7e);
  listeners_t l;
  listeners_start(&l);
  th_server_t s;
  th_client_t c;
  greeted_server(&s, &c, client);
  const char *kernels[] = {"testk:inc"};
  /* An ipc:// server is refused in the list itself; the list stays as it was. */
  const char *with_ipc[] = {s.endpoint, l.ep[2]};
  cr_assert_eq(th_program_peers(&c, kernels, 1, with_ipc, 2), 0);
  th_rx_t r;
  cr_assert_eq(th_recv_type(&c, LT_MSG_ERROR, &r, 5000), 0, "an ipc:// peer was taken");
  cr_assert_eq(r.m.u.error.code, LT_EINVAL, "%s", r.m.u.error.message);
  th_rx_clear(&r);
  const char *peers[] = {s.endpoint, l.ep[0], l.ep[1]};
  cr_assert_eq(th_program_peers(&c, kernels, 1, peers, 3), 0);
  char msg[600] = "";
  lt_input_t ipc = {.kind = LT_INPUT_REF, .id = {client, 1}, .holder = l.ep[2]};
  int st = th_exec1(&c, 1, &ipc, 0, (lt_oid_t){client, 2}, LT_INSTR_RETURN, NULL, msg, sizeof msg);
  cr_assert_eq(st, LT_EINVAL, "%d %s", st, msg);
  uint64_t seq = 2;
  for (int64_t until = th_now_ms() + 8000; th_now_ms() < until; usleep(100 * 1000)) {
    send_ref(&c, client, ++seq, l.ep[0]);
    send_ref(&c, client, ++seq, l.ep[1]);
  }
  int sent = (int)seq - 2, done = 0, refused = 0;
  while (done < sent) {
    cr_assert_eq(th_recv_type(&c, LT_MSG_DONE, &r, 5000), 0, "%d of %d done", done, sent);
    for (uint32_t i = 0; i < r.m.u.done.ncompl; i++, done++) {
      const lt_completion_t *k = &r.m.u.done.compl [i];
      cr_assert_eq(k->status, LT_ELOST, "%d %s", k->status, k->errmsg);
      cr_assert_not_null(strstr(k->errmsg, "not a Lithium server"), "%s", k->errmsg);
      refused += strstr(k->errmsg, "not tried again") != NULL;
    }
    th_rx_clear(&r);
  }
  usleep(1000 * 1000); /* reconnects of a link left behind would come now */
  int silent = atomic_load(&l.accepts[0]), closing = atomic_load(&l.accepts[1]),
      nipc = atomic_load(&l.accepts[2]);
  cr_log_info("arbitrary peers, 8 s: %d connections to the silent listener, %d to the closing "
              "one, %d to the ipc:// path; %d of %d reads refused at once",
              silent, closing, nipc, refused, sent);
  cr_assert_geq(silent, 1, "the server never tried: the test proves nothing");
  cr_assert_leq(silent, 3, "%d connections to a silent listener", silent);
  cr_assert_leq(closing, 12, "%d connections to a listener that closes them", closing);
  cr_assert_eq(nipc, 0, "%d connections to an ipc:// path", nipc);
  cr_assert_gt(refused, 0, "no read of %d refused at once", sent);
  lt_msg_t bye = {.type = LT_MSG_BYE};
  cr_assert_eq(th_send(&c, &bye, NULL, 0), 0);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
  listeners_stop(&l);
}
