/* test_security.c: sessions, peers, CURVE and the secure defaults, end to end with real
 * lithium-server processes. A hostile raw client that knows a victim's client id tries to
 * read, release and overwrite the victim's values, to take over its session, to pose as a
 * peer and to name a stranger holder: all refused, and the victim's results stay right (also
 * for a real evaluator under attack). CURVE: an allowed client runs, a refused or keyless one
 * gets LT_EAUTH from lt_eval_start at once, SIGHUP re-reads the allowed keys, servers sharing
 * a key pair fetch from each other. A public listen without a key and a world-writable module
 * directory refuse to start (exit 2). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium.h>
#include <lithium/error.h>
#include "curve.h"
#include "eval.h"
#include "harness.h"
#include "server/srv_helper.h"
#include "server/zmtp_peer.h"

#define VICTIM  UINT64_C(0x1111222233334444)
#define HOSTILE UINT64_C(0x5555666677778888)

/* ---------------------------------------------------------------------------------------
 * Raw sessions. */

static const char *kernels[] = {"testk:inc"};

/* hello_answer says hello as `name` and returns LT_OK for a welcome, else the error's code
 * (LT_EPROTO for anything else). */
static int hello_answer(th_client_t *c, uint64_t id, uint64_t secret, const char *name) {
  lt_msg_t m = {.type = LT_MSG_HELLO};
  m.u.hello.version = LT_PROTO_VERSION;
  m.u.hello.client_id = id;
  m.u.hello.secret = secret;
  m.u.hello.name = name;
  cr_assert_eq(th_send(c, &m, NULL, 0), 0);
  th_rx_t r;
  cr_assert_eq(th_recv(c, &r, 5000), 0);
  int rc = r.m.type == LT_MSG_WELCOME ? LT_OK
           : r.m.type == LT_MSG_ERROR ? r.m.u.error.code
                                      : LT_EPROTO;
  th_rx_clear(&r);
  return rc;
}

static void open_session(th_client_t *c, const char *ep, uint64_t id, uint64_t secret,
                         const char *name, const char *const *peers, uint32_t npeers) {
  cr_assert_eq(th_client_open(c, ep), 0);
  cr_assert_eq(hello_answer(c, id, secret, name), LT_OK);
  cr_assert_eq(th_program_peers(c, kernels, 1, peers, npeers), 0);
}

/* recv_type is th_recv_type, failing the test when nothing of `type` comes. */
static void recv_type(th_client_t *c, lt_msg_type_t type, th_rx_t *r) {
  cr_assert_eq(th_recv_type(c, type, r, 5000), 0, "no %s", lt__msg_type_name(type));
}

/* fetch1 fetches `id` and returns the VALUE's status (and the value in *val). */
static int fetch1(th_client_t *c, lt_oid_t id, uint64_t secret, int64_t *val) {
  lt_msg_t m = {.type = LT_MSG_FETCH};
  m.u.fetch.id = id;
  m.u.fetch.secret = secret;
  cr_assert_eq(th_send(c, &m, NULL, 0), 0);
  th_rx_t r;
  recv_type(c, LT_MSG_VALUE, &r);
  int st = r.m.u.value.status;
  if (st == LT_OK && val != NULL) *val = th_get_i64(r.frames[1 + r.m.u.value.frame].data);
  th_rx_clear(&r);
  return st;
}

/* A hostile client that knows the victim's client id can neither read, release nor write the
 * victim's values, nor take its session over, nor pose as a peer of it. */
Test(security, hostile_client_refused) {
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, NULL), 0);
  th_client_t v, h;
  open_session(&v, s.endpoint, VICTIM, 0xabcdef, "victim", NULL, 0);
  open_session(&h, s.endpoint, HOSTILE, 0x123456, "hostile", NULL, 0);
  lt_oid_t x = {VICTIM, 10};
  cr_assert_eq(th_exec1(&v, 1, NULL, 41, x, 0, NULL, NULL, 0), LT_OK); /* x = 42, kept */

  /* Read: a FETCH, and an instruction reading x as its input. */
  cr_assert_eq(fetch1(&h, x, 0, NULL), LT_EAUTH);
  lt_input_t ref = {.kind = LT_INPUT_REF, .id = x, .holder = ""};
  char msg[600];
  cr_assert_eq(
      th_exec1(&h, 1, &ref, 0, (lt_oid_t){HOSTILE, 1}, LT_INSTR_RETURN, NULL, msg, sizeof msg),
      LT_EAUTH, "%s", msg);
  /* Release. */
  lt_msg_t rel = {.type = LT_MSG_RELEASE};
  rel.u.release.nids = 1;
  rel.u.release.ids = &x;
  cr_assert_eq(th_send(&h, &rel, NULL, 0), 0);
  th_rx_t r;
  recv_type(&h, LT_MSG_ERROR, &r);
  cr_assert_eq(r.m.u.error.code, LT_EAUTH);
  th_rx_clear(&r);
  /* Overwrite: an output in the victim's id space, existing or future. */
  cr_assert_eq(th_exec1(&h, 2, NULL, 1000, x, 0, NULL, msg, sizeof msg), LT_EAUTH, "%s", msg);
  lt_oid_t y = {VICTIM, 11};
  cr_assert_eq(th_exec1(&h, 3, NULL, 1000, y, 0, NULL, msg, sizeof msg), LT_EAUTH, "%s", msg);
  cr_assert_not_null(strstr(msg, "id space"), "%s", msg);
  /* Take the session over: a hello with the victim's id. (As a peer it is a peer link of
   * its own, apart from the victim's session: see peer_link_makes_no_values.) */
  th_client_t t;
  cr_assert_eq(th_client_open(&t, s.endpoint), 0);
  cr_assert_eq(hello_answer(&t, VICTIM, 0x999, "thief"), LT_EAUTH);
  th_client_close(&t);
  /* Pose as a peer server fetching for the victim, without its secret. */
  th_client_t p;
  open_session(&p, s.endpoint, HOSTILE + 1, 7, "peer tcp://127.0.0.1:2", NULL, 0);
  cr_assert_eq(fetch1(&p, x, 0, NULL), LT_EAUTH);
  cr_assert_eq(fetch1(&p, x, 0xabcdee, NULL), LT_EAUTH);
  /* With the secret (a server the victim told it to) the fetch is served. */
  int64_t got = 0;
  cr_assert_eq(fetch1(&p, x, 0xabcdef, &got), LT_OK);
  cr_assert_eq(got, 42);
  th_client_close(&p);

  /* The victim is untouched: x is still 42, y is its own to write. */
  got = 0;
  cr_assert_eq(fetch1(&v, x, 0, &got), LT_OK);
  cr_assert_eq(got, 42);
  cr_assert_eq(th_exec1(&v, 2, NULL, 6, y, LT_INSTR_RETURN, &got, NULL, 0), LT_OK);
  cr_assert_eq(got, 7);
  /* The victim may come back on a new connection with its secret (a client greeting a
   * server again): the old session is replaced. */
  th_client_t v2;
  open_session(&v2, s.endpoint, VICTIM, 0xabcdef, "victim again", NULL, 0);
  cr_assert_eq(th_exec1(&v2, 1, NULL, 1, (lt_oid_t){VICTIM, 50}, LT_INSTR_RETURN, &got, NULL, 0),
               LT_OK);
  cr_assert_eq(got, 2);
  th_client_close(&v2);
  th_client_close(&v);
  th_client_close(&h);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
}

/* ---------------------------------------------------------------------------------------
 * Sessions bound to their connections (raw ZMTP peers, which can announce a routing id
 * that libzmq's "Identity" property does not show). */

static void z_hello(th_zmtp_t *z, uint64_t id, uint64_t secret, lt_msg_type_t want, int code) {
  lt_msg_t m = {.type = LT_MSG_HELLO};
  m.u.hello.version = LT_PROTO_VERSION;
  m.u.hello.client_id = id;
  m.u.hello.secret = secret;
  m.u.hello.name = "raw";
  cr_assert_eq(th_zmtp_send(z, &m, NULL, 0), 0);
  th_rx_t r;
  cr_assert_eq(th_zmtp_recv(z, &r, 5000), 0);
  cr_assert_eq(r.m.type, want, "got %s", lt__msg_type_name(r.m.type));
  if (want == LT_MSG_ERROR) cr_assert_eq(r.m.u.error.code, code, "%s", r.m.u.error.message);
  th_rx_clear(&r);
}

/* z_exec runs kernel 0 on inline `v` into `out` and returns the first answer: a DONE's
 * status, or an ERROR's code. */
static int z_exec(th_zmtp_t *z, uint64_t seq, int64_t v, lt_oid_t out) {
  unsigned char buf[8];
  th_put_i64(buf, v);
  lt_bytes_t pay = {buf, 8};
  lt_input_t inl = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
  lt_instr_t ins = {.seq = seq, .ninputs = 1, .inputs = &inl, .noutputs = 1, .outputs = &out};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &ins;
  cr_assert_eq(th_zmtp_send(z, &m, &pay, 1), 0);
  for (;;) {
    th_rx_t r;
    cr_assert_eq(th_zmtp_recv(z, &r, 5000), 0, "no answer to an execute");
    int st = r.m.type == LT_MSG_DONE    ? r.m.u.done.compl [0].status
             : r.m.type == LT_MSG_ERROR ? r.m.u.error.code
                                        : 1;
    th_rx_clear(&r);
    if (st != 1) return st;
  }
}

/* z_fetch fetches `id` and returns the VALUE's status, or an ERROR's code. */
static int z_fetch(th_zmtp_t *z, lt_oid_t id) {
  lt_msg_t m = {.type = LT_MSG_FETCH};
  m.u.fetch.id = id;
  cr_assert_eq(th_zmtp_send(z, &m, NULL, 0), 0);
  th_rx_t r;
  cr_assert_eq(th_zmtp_recv(z, &r, 5000), 0, "no answer to a fetch");
  int st = r.m.type == LT_MSG_VALUE   ? r.m.u.value.status
           : r.m.type == LT_MSG_ERROR ? r.m.u.error.code
                                      : 1;
  th_rx_clear(&r);
  return st;
}

/* z_reconnect opens a raw peer announcing `rid` once the server has let go of the last
 * connection that had it (until then libzmq ignores the new one's routing id): a STATUS is
 * answered as such only on a connection that got it. */
static void z_reconnect(th_zmtp_t *z, const char *ep, const void *rid, size_t len) {
  int64_t until = th_now_ms() + 10000;
  for (;;) {
    cr_assert_lt(th_now_ms(), until, "the server never let go of the old connection");
    cr_assert_eq(th_zmtp_open(z, ep, rid, len, 5000), 0);
    lt_msg_t m = {.type = LT_MSG_STATUS};
    cr_assert_eq(th_zmtp_send(z, &m, NULL, 0), 0);
    th_rx_t r;
    int rc = th_zmtp_recv(z, &r, 5000);
    bool ok = rc == 0 && r.m.type == LT_MSG_STATUS_REPLY;
    if (rc == 0) th_rx_clear(&r);
    if (ok) return;
    th_zmtp_close(z);
  }
}

/* Issue 22, case 1: a connection that takes the routing id of a session whose connection
 * dropped without bye gets no part of that session: it must say hello, and the values of
 * the old session are gone with it, not handed over. A routing id chosen through libzmq
 * (ZMQ_ROUTING_ID) that the server can tell from its own is refused outright. */
Test(security, session_bound_to_its_connection) {
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, NULL), 0);
  static const unsigned char rid[] = {0, 'h', 'i', 'j', 'k'};
  th_zmtp_t a, b;
  cr_assert_eq(th_zmtp_open(&a, s.endpoint, rid, sizeof rid, 5000), 0);
  z_hello(&a, VICTIM, 0xabcdef, LT_MSG_WELCOME, 0);
  lt_msg_t prog = {.type = LT_MSG_PROGRAM};
  prog.u.program.nkernels = 1;
  prog.u.program.kernels = kernels;
  cr_assert_eq(th_zmtp_send(&a, &prog, NULL, 0), 0);
  lt_oid_t x = {VICTIM, 10};
  cr_assert_eq(z_exec(&a, 1, 41, x), LT_OK);
  cr_assert_eq(z_fetch(&a, x), LT_OK);
  th_zmtp_close(&a); /* no bye */

  z_reconnect(&b, s.endpoint, rid, sizeof rid);
  cr_assert_eq(z_fetch(&b, x), LT_ESTATE, "the old session's value was served");
  cr_assert_eq(z_exec(&b, 2, 1, (lt_oid_t){VICTIM, 11}), LT_ESTATE);
  /* Said hello with the old client id (the old session is gone, so the id is free): a new
   * session, which finds none of the old one's values. */
  z_hello(&b, VICTIM, 0x999, LT_MSG_WELCOME, 0);
  cr_assert_eq(z_fetch(&b, x), LT_ENOENT);
  th_zmtp_close(&b);

  /* Chosen through libzmq, with a zero first byte like the ROUTER's own ids (but 6 bytes). */
  th_client_t c = {.ctx = zmq_ctx_new()};
  c.sock = zmq_socket(c.ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(c.sock, ZMQ_LINGER, &zero, sizeof zero);
  static const unsigned char chosen[] = {0, 'l', 'm', 'n', 'o', 'p'};
  cr_assert_eq(zmq_setsockopt(c.sock, ZMQ_ROUTING_ID, chosen, sizeof chosen), 0);
  cr_assert_eq(zmq_connect(c.sock, s.endpoint), 0);
  cr_assert_eq(th_hello(&c, HOSTILE, LT_PROTO_VERSION), LT_OK);
  th_rx_t r;
  recv_type(&c, LT_MSG_ERROR, &r);
  cr_assert_eq(r.m.u.error.code, LT_EAUTH);
  cr_assert_not_null(strstr(r.m.u.error.message, "routing id"), "%s", r.m.u.error.message);
  th_rx_clear(&r);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
}

/* status_values asks for the server's STATUS: its sessions and the bytes of its values. */
static void status_values(const char *ep, uint32_t *sessions, uint64_t *bytes) {
  th_client_t c;
  cr_assert_eq(th_client_open(&c, ep), 0);
  lt_msg_t m = {.type = LT_MSG_STATUS};
  cr_assert_eq(th_send(&c, &m, NULL, 0), 0);
  th_rx_t r;
  recv_type(&c, LT_MSG_STATUS_REPLY, &r);
  *sessions = r.m.u.status_reply.sessions;
  *bytes = r.m.u.status_reply.value_bytes;
  th_rx_clear(&r);
  th_client_close(&c);
}

/* Issue 22, cases 2 and 3: a "peer" link with the id of a client yet to come can make no
 * value in that client's space (PROGRAM and EXECUTE are refused), nor keep the client out;
 * the client then writes and reads its own values, and once every session has ended the
 * server holds no value at all. */
Test(security, peer_link_makes_no_values) {
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, NULL), 0);
  th_client_t p;
  cr_assert_eq(th_client_open(&p, s.endpoint), 0);
  cr_assert_eq(hello_answer(&p, VICTIM, 0x999, "peer tcp://127.0.0.1:2"), LT_OK);
  th_rx_t r;
  cr_assert_eq(th_program(&p, kernels, 1), LT_OK);
  recv_type(&p, LT_MSG_ERROR, &r);
  cr_assert_eq(r.m.u.error.code, LT_EAUTH);
  cr_assert_not_null(strstr(r.m.u.error.message, "peer link"), "%s", r.m.u.error.message);
  th_rx_clear(&r);
  lt_oid_t x = {VICTIM, 10};
  unsigned char buf[8];
  th_put_i64(buf, 1000);
  lt_bytes_t pay = {buf, 8};
  lt_input_t inl = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
  lt_instr_t ins = {.seq = 1, .ninputs = 1, .inputs = &inl, .noutputs = 1, .outputs = &x};
  lt_msg_t ex = {.type = LT_MSG_EXECUTE};
  ex.u.execute.ninstrs = 1;
  ex.u.execute.instrs = &ins;
  cr_assert_eq(th_send(&p, &ex, &pay, 1), 0);
  recv_type(&p, LT_MSG_ERROR, &r);
  cr_assert_eq(r.m.u.error.code, LT_EAUTH);
  th_rx_clear(&r);
  uint32_t sessions;
  uint64_t bytes;
  status_values(s.endpoint, &sessions, &bytes);
  cr_assert_eq(bytes, 0, "a peer link made a value");
  lt_msg_t bye = {.type = LT_MSG_BYE};
  cr_assert_eq(th_send(&p, &bye, NULL, 0), 0);

  /* The client comes (the peer link may still be there: they live apart). */
  th_client_t v;
  open_session(&v, s.endpoint, VICTIM, 0xabcdef, "victim", NULL, 0);
  int64_t got = 0;
  cr_assert_eq(th_exec1(&v, 1, NULL, 41, x, 0, NULL, NULL, 0), LT_OK);
  cr_assert_eq(fetch1(&v, x, 0, &got), LT_OK);
  cr_assert_eq(got, 42);
  status_values(s.endpoint, &sessions, &bytes);
  cr_assert_gt(bytes, 0);
  cr_assert_eq(th_send(&v, &bye, NULL, 0), 0);
  /* Every session gone: no value left (the bye is handled before the STATUS of a later
   * connection only eventually, so ask until it is). */
  int64_t until = th_now_ms() + 10000;
  do {
    cr_assert_lt(th_now_ms(), until, "%u sessions, %llu bytes held", sessions,
                 (unsigned long long)bytes);
    status_values(s.endpoint, &sessions, &bytes);
  } while (sessions > 0);
  cr_assert_eq(bytes, 0, "values held with no session");
  th_client_close(&v);
  th_client_close(&p);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
}

/* A REF naming a holder the session did not announce fails that instruction with
 * LT_EAUTH, and the server connects nowhere; an announced one is fetched from. */
Test(security, stranger_holder_refused) {
  th_server_t a, b;
  cr_assert_eq(th_server_start_default(&a, NULL), 0);
  cr_assert_eq(th_server_start_default(&b, NULL), 0);
  const char *peers[] = {a.endpoint, b.endpoint};
  th_client_t ka, kb;
  open_session(&ka, a.endpoint, VICTIM, 77, "c", peers, 2);
  open_session(&kb, b.endpoint, VICTIM, 77, "c", peers, 2);
  lt_oid_t x = {VICTIM, 1};
  cr_assert_eq(th_exec1(&ka, 1, NULL, 1, x, 0, NULL, NULL, 0), LT_OK);
  lt_input_t stranger = {.kind = LT_INPUT_REF, .id = x, .holder = "tcp://127.0.0.1:9"};
  char msg[600];
  cr_assert_eq(
      th_exec1(&kb, 1, &stranger, 0, (lt_oid_t){VICTIM, 2}, LT_INSTR_RETURN, NULL, msg, sizeof msg),
      LT_EAUTH);
  cr_assert_not_null(strstr(msg, "not one of this session's servers"), "%s", msg);
  lt_input_t ok = {.kind = LT_INPUT_REF, .id = x, .holder = a.endpoint};
  int64_t got = 0;
  cr_assert_eq(
      th_exec1(&kb, 2, &ok, 0, (lt_oid_t){VICTIM, 3}, LT_INSTR_RETURN, &got, msg, sizeof msg),
      LT_OK, "%s", msg);
  cr_assert_eq(got, 3);
  th_client_close(&ka);
  th_client_close(&kb);
  cr_assert_eq(th_server_stop(&a, SIGTERM, 15000), 0);
  cr_assert_eq(th_server_stop(&b, SIGTERM, 15000), 0);
}

/* A real evaluator under attack: a hostile client that learnt its client id writes every
 * id it will use and releases them, all the while; every result is still right. */
Test(security, evaluator_under_attack) {
  th_server_t s;
  cr_assert_eq(th_server_start_default(&s, NULL), 0);
  lt_skel_t *prog = lt_pipeline(lt_farm(lt_seq("testk:inc")), lt_farm(lt_seq("testk:dbl")), NULL);
  lt_eval_t *ev;
  cr_assert_eq(lt_eval_new(&ev, prog), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, s.endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  th_client_t h;
  open_session(&h, s.endpoint, HOSTILE, 1, "hostile", NULL, 0);
  unsigned char buf[8];
  th_put_i64(buf, 1000);
  lt_bytes_t pay = {buf, 8};
  int refused = 0;
  enum { N = 60 };
  for (uint64_t seq = 0; seq < 8 * N; seq++) {
    lt_input_t inl = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
    lt_oid_t out = {lt__eval_client_id(ev), seq};
    lt_instr_t ins = {.seq = seq + 1, .ninputs = 1, .inputs = &inl, .noutputs = 1, .outputs = &out};
    lt_msg_t m = {.type = LT_MSG_EXECUTE};
    m.u.execute.ninstrs = 1;
    m.u.execute.instrs = &ins;
    cr_assert_eq(th_send(&h, &m, &pay, 1), 0);
    lt_msg_t rel = {.type = LT_MSG_RELEASE};
    rel.u.release.nids = 1;
    rel.u.release.ids = &out;
    cr_assert_eq(th_send(&h, &rel, NULL, 0), 0);
    if (seq == 4 * N) submit_i64s(ev, N);
  }
  for (int i = 0; i < 16 * N; i++) {
    th_rx_t r;
    if (th_recv(&h, &r, 2000) != 0) break;
    if (r.m.type == LT_MSG_DONE)
      for (uint32_t k = 0; k < r.m.u.done.ncompl; k++)
        refused += r.m.u.done.compl [k].status == LT_EAUTH;
    if (r.m.type == LT_MSG_ERROR) refused += r.m.u.error.code == LT_EAUTH;
    th_rx_clear(&r);
  }
  cr_assert_eq(refused, 16 * N, "every write and release refused (%d)", refused);
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  for (int64_t i = 0; i < N; i++)
    cr_assert_eq(next_i64(ev), 2 * (i + 1));
  th_client_close(&h);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
}

/* ---------------------------------------------------------------------------------------
 * Secure defaults. */

static int run_server(const char *const *args, char *err, size_t errlen) {
  const char *argv[32] = {LT_TEST_SERVER};
  size_t n = 1;
  for (size_t i = 0; args[i] != NULL && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  char out[512];
  return th_run(argv, 10000, out, sizeof out, err, errlen);
}

Test(security, public_listen_needs_a_key) {
  char err[4096];
  const char *args[] = {"--listen", "tcp://0.0.0.0:0", "--modules", LT_TEST_MODULES, NULL};
  cr_assert_eq(run_server(args, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "--curve-key"), "%s", err);
  cr_assert_not_null(strstr(err, "--insecure"), "%s", err);
  const char *any[] = {"--listen", "tcp://*:0", NULL};
  cr_assert_eq(run_server(any, err, sizeof err), 2, "%s", err);
  /* --insecure starts it, with a warning. */
  th_server_t s;
  const char *insecure[] = {"--listen", "tcp://0.0.0.0:0", "--insecure", NULL};
  cr_assert_eq(th_server_start(&s, insecure, 10000), 0);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
}

Test(security, unsafe_module_directories) {
  char dir[] = "/tmp/lt-sec-modsXXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  cr_assert_eq(chmod(dir, 0777), 0);
  char err[4096];
  const char *args[] = {"--listen", "tcp://127.0.0.1:0", "--modules", dir, NULL};
  cr_assert_eq(run_server(args, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "writable by everyone"), "%s", err);
  /* A safe directory with a module anyone may write. */
  cr_assert_eq(chmod(dir, 0755), 0);
  char so[300];
  snprintf(so, sizeof so, "%s/libevil.so", dir);
  FILE *f = fopen(so, "w");
  cr_assert_not_null(f);
  fclose(f);
  cr_assert_eq(chmod(so, 0666), 0);
  cr_assert_eq(run_server(args, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "libevil.so"), "%s", err);
  /* --allow-unsafe-modules starts it. */
  th_server_t s;
  const char *unsafe[] = {"--listen", "tcp://127.0.0.1:0",      "--modules",
                          dir,        "--allow-unsafe-modules", NULL};
  cr_assert_eq(th_server_start(&s, unsafe, 10000), 0);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  unlink(so);
  rmdir(dir);
}

/* copy_file copies `from` to `to` with mode `mode`. */
static void copy_file(const char *from, const char *to, mode_t mode) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  cr_assert(in != NULL && out != NULL, "%s -> %s", from, to);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    cr_assert_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
  cr_assert_eq(chmod(to, mode), 0);
}

/* run_kernel makes `kernel` the session's only kernel and runs it on 41: its status, and
 * its message in msg. */
static int run_kernel(th_client_t *c, uint64_t seq, const char *kernel, char *msg, size_t len) {
  const char *names[] = {kernel};
  cr_assert_eq(th_program(c, names, 1), LT_OK);
  return th_exec1(c, seq, NULL, 41, (lt_oid_t){VICTIM, seq}, 0, NULL, msg, len);
}

/* Issue 22, case 8: modules that turn unsafe after the start are refused when they are
 * loaded: a link into a directory anyone may write (the file behind it could be replaced
 * before the first use), a file anyone may write; the module that stayed safe runs. At the
 * start a link is refused like an unsafe file. */
Test(security, module_files_checked_at_each_load) {
  char dir[] = "/tmp/lt-sec-modfileXXXXXX", open_dir[] = "/tmp/lt-sec-wwXXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  cr_assert_not_null(mkdtemp(open_dir));
  cr_assert_eq(chmod(dir, 0755), 0);
  cr_assert_eq(chmod(open_dir, 0777), 0);
  char testk[300], good[300], target[300], evil[300], open_so[300], err[4096];
  snprintf(testk, sizeof testk, "%s/libtestk.so", LT_TEST_MODULES);
  snprintf(good, sizeof good, "%s/libgood.so", dir);
  snprintf(target, sizeof target, "%s/libevil.so", open_dir);
  snprintf(evil, sizeof evil, "%s/libevil.so", dir);
  snprintf(open_so, sizeof open_so, "%s/libopen.so", dir);
  copy_file(testk, good, 0644);
  copy_file(testk, target, 0644);
  th_server_t s;
  const char *args[] = {"--listen", "tcp://127.0.0.1:0", "--modules", dir, NULL};
  cr_assert_eq(th_server_start(&s, args, 10000), 0);
  /* After the start: a link to a file in a world-writable directory, a world-writable
   * file. */
  cr_assert_eq(symlink(target, evil), 0);
  copy_file(testk, open_so, 0666);
  th_client_t c;
  open_session(&c, s.endpoint, VICTIM, 1, "c", NULL, 0);
  char msg[600];
  cr_assert_eq(run_kernel(&c, 1, "evil:inc", msg, sizeof msg), LT_ENOMODULE, "%s", msg);
  cr_assert_not_null(strstr(msg, "symbolic link"), "%s", msg);
  cr_assert_eq(run_kernel(&c, 2, "open:inc", msg, sizeof msg), LT_ENOMODULE, "%s", msg);
  cr_assert_not_null(strstr(msg, "writable by everyone"), "%s", msg);
  cr_assert_eq(run_kernel(&c, 3, "good:inc", msg, sizeof msg), LT_OK, "%s", msg);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  /* A link is refused at the start too. */
  unlink(open_so);
  cr_assert_eq(run_server(args, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "symbolic link"), "%s", err);
  unlink(evil);
  unlink(good);
  unlink(target);
  rmdir(dir);
  rmdir(open_dir);
}

/* ---------------------------------------------------------------------------------------
 * CURVE. */

typedef struct keys {
  char dir[64];
  char srv_key[128], cli_key[128], bad_key[128], allow[128];
  char srv_pub[41], cli_pub[41], bad_pub[41];
} keys_t;

static void read_pub(const char *dir, const char *name, char *pub) {
  char path[160], err[300];
  snprintf(path, sizeof path, "%s/%s.pub", dir, name);
  cr_assert_eq(lt__curve_read_public(path, pub, err, sizeof err), LT_OK, "%s", err);
}

static void make_keys(keys_t *k) {
  snprintf(k->dir, sizeof k->dir, "/tmp/lt-sec-keysXXXXXX");
  cr_assert_not_null(mkdtemp(k->dir));
  const char *names[] = {"server", "client", "bad"};
  char *paths[] = {k->srv_key, k->cli_key, k->bad_key};
  char *pubs[] = {k->srv_pub, k->cli_pub, k->bad_pub};
  for (int i = 0; i < 3; i++) {
    char base[100], err[300];
    snprintf(base, sizeof base, "%s/%s", k->dir, names[i]);
    cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
    snprintf(paths[i], 128, "%s.key", base);
    read_pub(k->dir, names[i], pubs[i]);
    struct stat st;
    cr_assert_eq(stat(paths[i], &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    /* Never overwritten. */
    cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_EEXIST);
  }
  snprintf(k->allow, sizeof k->allow, "%s/allow", k->dir);
  FILE *f = fopen(k->allow, "w");
  cr_assert_not_null(f);
  fprintf(f, "# allowed clients\n%s alice\n\n", k->cli_pub);
  fclose(f);
}

static void drop_keys(keys_t *k) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
  cr_assert_eq(system(cmd), 0);
}

static void start_curve(th_server_t *s, const keys_t *k, const char *const *more) {
  const char *extra[8] = {"--curve-key", k->srv_key, "--allow", k->allow, NULL};
  for (int i = 0; more != NULL && more[i] != NULL && i < 3; i++)
    extra[4 + i] = more[i];
  cr_assert_eq(th_server_start_default(s, extra), 0);
}

/* A key file whose path is 40 characters of the Z85 alphabet is still read as a file. */
Test(security, key_file_named_like_a_key) {
  char dir[] = "/tmp/lt-keyfile-XXXXXX", base[64], path[80], err[300], pub[41];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(base, sizeof base, "%s/abcdefghijklm", dir);
  snprintf(path, sizeof path, "%s.pub", base);
  cr_assert_eq(strlen(path), 40);
  cr_assert_eq(lt__curve_keygen(base, err, sizeof err), LT_OK, "%s", err);
  cr_assert_eq(lt__curve_read_public(path, pub, err, sizeof err), LT_OK, "%s", err);
  char want[41] = "";
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  cr_assert_eq(fscanf(f, "%40s", want), 1);
  fclose(f);
  cr_assert_str_eq(pub, want, "the path was taken for the key");
  /* A key given as text is still a key. */
  cr_assert_eq(lt__curve_read_public(want, pub, err, sizeof err), LT_OK, "%s", err);
  cr_assert_str_eq(pub, want);
  snprintf(path, sizeof path, "%s.key", base);
  unlink(path);
  snprintf(path, sizeof path, "%s.pub", base);
  unlink(path);
  rmdir(dir);
}

/* curve_server makes keys k, starts a CURVE server s on them, and writes its host string
 * (endpoint and public key) into host. */
static void curve_server(th_server_t *s, keys_t *k, char *host, size_t len) {
  make_keys(k);
  start_curve(s, k, NULL);
  snprintf(host, len, "%s %s", s->endpoint, k->srv_pub);
}

Test(security, curve_allowed_and_refused) {
  keys_t k;
  th_server_t s;
  char host[400];
  curve_server(&s, &k, host, sizeof host);
  const char *hosts[] = {host};
  int64_t ms;
  /* Allowed: the key in the host string, or the server key as an option. */
  const char *good[] = {"curve_key", k.cli_key, NULL};
  cr_assert_eq(run_on_hosts(hosts, 1, good, &ms), LT_OK);
  const char *plain_hosts[] = {s.endpoint};
  const char *good2[] = {"curve_key", k.cli_key, "curve_server", k.srv_pub, NULL};
  cr_assert_eq(run_on_hosts(plain_hosts, 1, good2, &ms), LT_OK);
  /* Refused key, no key, CURVE on the client's side only or the server's: LT_EAUTH, at
   * once (well within the 8 s connect timeout). */
  const char *bad[] = {"curve_key", k.bad_key, NULL};
  cr_assert_eq(run_on_hosts(hosts, 1, bad, &ms), LT_EAUTH);
  cr_assert_lt(ms, 3000, "%lld ms", (long long)ms);
  cr_assert_eq(run_on_hosts(hosts, 1, NULL, &ms), LT_EAUTH);
  cr_assert_lt(ms, 3000, "%lld ms", (long long)ms);
  cr_assert_eq(run_on_hosts(plain_hosts, 1, good, &ms), LT_EAUTH);
  cr_assert_lt(ms, 3000, "%lld ms", (long long)ms);
  /* A wrong server key. */
  char wrong[400];
  snprintf(wrong, sizeof wrong, "%s %s", s.endpoint, k.bad_pub);
  const char *wrong_hosts[] = {wrong};
  cr_assert_eq(run_on_hosts(wrong_hosts, 1, good, &ms), LT_EAUTH);
  cr_assert_lt(ms, 3000, "%lld ms", (long long)ms);
  /* SIGHUP re-reads the allowed keys: the refused key is let in. */
  FILE *f = fopen(k.allow, "a");
  cr_assert_not_null(f);
  fprintf(f, "%s bob\n", k.bad_pub);
  fclose(f);
  kill(s.pid, SIGHUP);
  usleep(300 * 1000);
  cr_assert_eq(run_on_hosts(hosts, 1, bad, &ms), LT_OK);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  drop_keys(&k);
}

/* A storm of SIGHUPs (each re-reads the allowed keys) while clients keep connecting: every
 * CURVE handshake is still answered by the server's ZAP handler, none refused or hung (a
 * signal that interrupted the handler's receive or reply would drop or split a ZAP
 * exchange). */
typedef struct hup_storm {
  pid_t pid;
  atomic_int stop; /* set by the test, read by the storm thread */
  long sent;
} hup_storm_t;

static void *hup_storm(void *arg) {
  hup_storm_t *st = arg;
  struct timespec gap = {0, 20000};
  while (!atomic_load(&st->stop)) {
    kill(st->pid, SIGHUP);
    st->sent++;
    nanosleep(&gap, NULL);
  }
  return NULL;
}

Test(security, curve_handshakes_survive_a_sighup_storm, .timeout = 180) {
  keys_t k;
  th_server_t s;
  char host[400];
  curve_server(&s, &k, host, sizeof host);
  const char *hosts[] = {host};
  const char *good[] = {"curve_key", k.cli_key, NULL};
  hup_storm_t st = {.pid = s.pid};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, hup_storm, &st), 0);
  int64_t ms;
  enum { RUNS = 40 };
  int ok = 0;
  for (int i = 0; i < RUNS; i++)
    ok += run_on_hosts(hosts, 1, good, &ms) == LT_OK;
  atomic_store(&st.stop, 1);
  pthread_join(th, NULL);
  cr_assert_eq(ok, RUNS, "%d of %d evaluations ran; the storm sent %ld signals", ok, RUNS, st.sent);
  cr_assert_gt(st.sent, 100, "the storm sent %ld signals", st.sent);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 15000), 0);
  drop_keys(&k);
}

/* Two servers sharing a key pair trust each other's fetches: successors of cheap first
 * stages leave a 20 x slower server (as in test_throttle) and fetch their inputs from it,
 * peer to peer under CURVE; every result is right. As there: no copies (a copy of a first
 * stage that wins on the fast server leaves its successor nothing to fetch), and rounds of
 * tasks, each read before the next, until a value moved (at most 4). */
Test(security, curve_peers_share_a_key, .timeout = 180) {
  keys_t k;
  make_keys(&k);
  th_server_t a, b;
  start_curve(&a, &k, NULL);
  const char *slow[] = {"--slowdown", "20", NULL};
  start_curve(&b, &k, slow);
  char ha[400], hb[400];
  snprintf(ha, sizeof ha, "%s %s", a.endpoint, k.srv_pub);
  snprintf(hb, sizeof hb, "%s %s", b.endpoint, k.srv_pub);
  lt_eval_t *ev;
  lt_skel_t *prog = lt_pipeline(lt_farm(lt_seq("testk:inc")),
                                lt_farm(lt_seq_with("testk:spin", "3000000", 7)), NULL);
  cr_assert_eq(lt_eval_new(&ev, prog), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "curve_key", k.cli_key), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "max_threads", "2"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "inline_max", "0"), LT_OK);
  cr_assert_eq(lt_eval_set(ev, "backup", "off"), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, ha), LT_OK);
  cr_assert_eq(lt_eval_add_host(ev, hb), LT_OK);
  cr_assert_eq(lt_eval_start(ev), LT_OK);
  enum { N = 150, ROUNDS = 4 };
  int round = 0;
  while (round < ROUNDS && (round == 0 || peer_bytes_now(ev) == 0)) {
    submit_i64s(ev, N);
    for (int64_t i = 0; i < N; i++)
      cr_assert_eq(next_i64(ev), i + 1, "round %d", round);
    round++;
  }
  cr_assert_eq(lt_eval_close(ev), LT_OK);
  cr_assert_gt(peer_bytes_now(ev), 0, "no value went peer to peer in %d rounds", round);
  lt_eval_free(ev);
  cr_assert_eq(th_server_stop(&a, SIGTERM, 15000), 0);
  cr_assert_eq(th_server_stop(&b, SIGTERM, 15000), 0);
  drop_keys(&k);
}

/* tool_status runs `lithium status HOST [--curve-key KEY]` and returns its exit status with
 * its standard output in `out`. */
static int tool_status(const char *host, const char *key, char *out, size_t len) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s' status '%s' --timeout 3000 %s%s%s 2>&1", LT_TEST_TOOL, host,
           key != NULL ? "--curve-key '" : "", key != NULL ? key : "", key != NULL ? "'" : "");
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(security, status_of_a_curve_server, .timeout = 60) {
  keys_t k;
  make_keys(&k);
  th_server_t s;
  start_curve(&s, &k, NULL);
  char host[400], out[4096];
  snprintf(host, sizeof host, "%s %s", s.endpoint, k.srv_pub);
  /* An allowed key pair gets the status row. */
  cr_assert_eq(tool_status(host, k.cli_key, out, sizeof out), 0, "%s", out);
  cr_assert_not_null(strstr(out, s.endpoint), "%s", out);
  cr_assert_null(strstr(out, "auth refused"), "%s", out);
  /* No key pair: refused at once, saying why; a key the server does not allow: no answer. */
  cr_assert_eq(tool_status(host, NULL, out, sizeof out), 1, "%s", out);
  cr_assert_not_null(strstr(out, "auth refused"), "%s", out);
  cr_assert_eq(tool_status(host, k.bad_key, out, sizeof out), 1, "%s", out);
  cr_assert_eq(th_server_stop(&s, SIGTERM, 10000), 0);
  drop_keys(&k);
}
