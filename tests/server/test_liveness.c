/* test_liveness.c: what a client needs to tell a server's life from its death, on real
 * lithium-server processes driven over raw DEALERs: the incarnation and frame limit in
 * welcome and every load report, the stopping flag sent at once on SIGTERM, a client that
 * greets again on a new connection replacing its old session without losing the new one's
 * values, a second PROGRAM while instructions run, errors that do not depend on when a
 * failing or missing kernel's successors arrive, and parked instructions that never wait
 * forever for a peer (full link table, LOST from the client). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "server/srv_helper.h"

#define CLIENT 0x11e5ea01ULL
#define MAXSEQ 256

typedef struct rec {
  bool got;
  int order; /* arrival index among completions, from 1 */
  int status;
  char msg[1200];
  uint32_t nout;
  int32_t frame;
  int64_t v;
} rec_t;

/* One DEALER to one server, with what came back. */
typedef struct conn {
  th_client_t c;
  uint64_t client;
  rec_t done[MAXSEQ];
  int ndone;
  rec_t value[MAXSEQ];
  int nerror, last_error;
  int nmsgs;
  uint64_t last_hb;
  int nhb0;   /* heartbeats with seq 0 (the server's own) */
  int hb0_at; /* nmsgs when the first one came */
  bool all_stopping_after_hb0;
  lt_load_t load;
  uint64_t welcome_incarnation, welcome_max_frame;
} conn_t;

enum { K_INC, K_SLEEP, K_FAIL, K_ECHO, K_BAD, K_DBL };

static void record(conn_t *k, th_rx_t *r) {
  cr_assert(r->m.has_load, "every server message carries the load report");
  cr_assert_neq(r->m.load.incarnation, 0, "every load report carries the incarnation");
  if (k->welcome_incarnation != 0)
    cr_assert_eq(r->m.load.incarnation, k->welcome_incarnation, "one incarnation per process");
  k->load = r->m.load;
  k->nmsgs++;
  if (k->nhb0 > 0 && !r->m.load.stopping) k->all_stopping_after_hb0 = false;
  switch (r->m.type) {
  case LT_MSG_WELCOME:
    k->welcome_incarnation = r->m.u.welcome.incarnation;
    k->welcome_max_frame = r->m.u.welcome.max_frame;
    break;
  case LT_MSG_DONE:
    for (uint32_t i = 0; i < r->m.u.done.ncompl; i++) {
      const lt_completion_t *c = &r->m.u.done.compl [i];
      cr_assert_lt(c->seq, MAXSEQ);
      rec_t *d = &k->done[c->seq];
      cr_assert(!d->got, "two completions for seq %llu", (unsigned long long)c->seq);
      d->got = true;
      d->order = ++k->ndone;
      d->status = c->status;
      snprintf(d->msg, sizeof d->msg, "%s", c->errmsg);
      d->nout = c->noutputs;
      if (c->noutputs > 0) {
        d->frame = c->outputs[0].frame;
        if (d->frame >= 0 && r->m.frames[d->frame].len == 8)
          d->v = th_get_i64(r->m.frames[d->frame].data);
      }
    }
    break;
  case LT_MSG_VALUE: {
    cr_assert_lt(r->m.u.value.id.seq, MAXSEQ);
    rec_t *v = &k->value[r->m.u.value.id.seq];
    v->got = true;
    v->status = r->m.u.value.status;
    snprintf(v->msg, sizeof v->msg, "%s", r->m.u.value.errmsg);
    if (r->m.u.value.frame >= 0 && r->m.frames[r->m.u.value.frame].len == 8)
      v->v = th_get_i64(r->m.frames[r->m.u.value.frame].data);
    break;
  }
  case LT_MSG_HEARTBEAT:
    if (r->m.u.heartbeat.seq == 0) {
      if (k->nhb0++ == 0) {
        k->hb0_at = k->nmsgs;
        k->all_stopping_after_hb0 = r->m.load.stopping;
      }
    } else {
      k->last_hb = r->m.u.heartbeat.seq;
    }
    break;
  case LT_MSG_ERROR:
    k->nerror++;
    k->last_error = r->m.u.error.code;
    break;
  default:
    cr_assert_fail("unexpected %s", lt__msg_type_name(r->m.type));
  }
}

static void pump(conn_t *k, int timeout_ms) {
  th_rx_t r;
  int rc = th_recv(&k->c, &r, timeout_ms);
  if (rc == LT_ETIMEDOUT) return;
  cr_assert_eq(rc, LT_OK, "undecodable reply: %s", lt_strerror(rc));
  record(k, &r);
  th_rx_clear(&r);
}

#define WAIT_FOR(k, cond, ms)                                                                      \
  do {                                                                                             \
    int64_t until_ = th_now_ms() + (ms);                                                           \
    while (!(cond)) {                                                                              \
      cr_assert_lt(th_now_ms(), until_, "timed out waiting for " #cond);                           \
      pump((k), 20);                                                                               \
    }                                                                                              \
  } while (0)

static void send_msg(conn_t *k, lt_msg_t *m, const lt_bytes_t *pay, uint32_t n) {
  cr_assert_eq(th_send(&k->c, m, pay, n), LT_OK);
}

static void heartbeat(conn_t *k) {
  static uint64_t seq = 100;
  lt_msg_t m = {.type = LT_MSG_HEARTBEAT};
  m.u.heartbeat.seq = ++seq;
  send_msg(k, &m, NULL, 0);
  uint64_t want = seq;
  WAIT_FOR(k, k->last_hb == want, 5000);
}

static const char *const kernels[] = {"testk:inc",  "testk:sleep", "testk:fail",
                                      "testk:echo", "nosuchmod:f", "testk:dbl"};

/* The servers the test's sessions announce: the holders their instructions may name. */
static const char *known[8];
static uint32_t nknown;

static void program(conn_t *k, const char *const *names, uint32_t n) {
  cr_assert_eq(th_program_peers(&k->c, names, n, known, nknown), 0);
}

/* hello opens k to `ep` as `client` and loads the kernel table. */
static void hello(conn_t *k, const char *ep, uint64_t client) {
  memset(k, 0, sizeof *k);
  k->client = client;
  cr_assert_eq(th_client_open(&k->c, ep), 0);
  cr_assert_eq(th_hello(&k->c, client, LT_PROTO_VERSION), 0);
  WAIT_FOR(k, k->welcome_incarnation != 0, 5000);
  program(k, kernels, 6);
}

static lt_oid_t oid(const conn_t *k, uint64_t seq) {
  return (lt_oid_t){k->client, seq};
}

static lt_input_t inl(void) {
  return (lt_input_t){.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
}

/* exec sends one instruction: kernel `kernel` (then `more` fused stages) with `param` on
 * one input, output id `out`; an inline input is the int `v`. */
static void exec_more(conn_t *k, uint64_t seq, uint32_t kernel, const char *param, lt_stage_t *more,
                      uint32_t nmore, lt_input_t in, uint64_t out, uint32_t flags, int64_t v) {
  unsigned char buf[8];
  th_put_i64(buf, v);
  lt_bytes_t pay = {buf, 8};
  lt_oid_t o = oid(k, out);
  lt_instr_t i = {.seq = seq,
                  .kernel = kernel,
                  .param = {param, param ? strlen(param) : 0},
                  .nmore = nmore,
                  .more = more,
                  .ninputs = 1,
                  .inputs = &in,
                  .noutputs = 1,
                  .outputs = &o,
                  .flags = flags};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &i;
  send_msg(k, &m, in.kind == LT_INPUT_INLINE ? &pay : NULL, in.kind == LT_INPUT_INLINE ? 1 : 0);
}

static void exec(conn_t *k, uint64_t seq, uint32_t kernel, const char *param, lt_input_t in,
                 uint64_t out, uint32_t flags, int64_t v) {
  exec_more(k, seq, kernel, param, NULL, 0, in, out, flags, v);
}

static void fetch(conn_t *k, uint64_t seq) {
  lt_msg_t f = {.type = LT_MSG_FETCH};
  f.u.fetch.id = oid(k, seq);
  send_msg(k, &f, NULL, 0);
  WAIT_FOR(k, k->value[seq].got, 5000);
}

static void stop(th_server_t *s) {
  cr_assert_eq(th_server_stop(s, SIGTERM, 15000), 0, "server exits 0 on SIGTERM");
}

/* ---------------------------------------------------------------------------------------
 * A. Incarnation and frame limit. */

Test(liveness, incarnation_and_max_frame) {
  th_server_t a, b;
  const char *extra[] = {"--max-frame", "3m", NULL};
  cr_assert_eq(th_server_start_default(&a, extra), 0);
  cr_assert_eq(th_server_start_default(&b, NULL), 0);
  conn_t *ka = calloc(1, sizeof *ka), *ka2 = calloc(1, sizeof *ka2), *kb = calloc(1, sizeof *kb);
  hello(ka, a.endpoint, CLIENT);
  hello(ka2, a.endpoint, CLIENT + 1);
  hello(kb, b.endpoint, CLIENT);
  cr_assert_eq(ka->welcome_max_frame, 3u << 20, "welcome tells the enforced --max-frame");
  cr_assert_eq(kb->welcome_max_frame, (uint64_t)1 << 30, "the default is 1g");
  cr_assert_eq(ka->welcome_incarnation, ka2->welcome_incarnation, "one per process");
  cr_assert_neq(ka->welcome_incarnation, kb->welcome_incarnation, "random per process");
  exec(ka, 1, K_INC, NULL, inl(), 1, LT_INSTR_RETURN, 1);
  WAIT_FOR(ka, ka->done[1].got, 5000);
  heartbeat(ka); /* record() checked the incarnation of every load report */
  cr_assert_eq(ka->load.incarnation, ka->welcome_incarnation);
  cr_assert(!ka->load.stopping);
  th_client_close(&ka->c);
  th_client_close(&ka2->c);
  th_client_close(&kb->c);
  stop(&a);
  stop(&b);
  free(ka);
  free(ka2);
  free(kb);
}

/* ---------------------------------------------------------------------------------------
 * B. Stopping. */

/* On SIGTERM every session hears at once (a heartbeat with seq 0) that the server stops;
 * every later message says so too; a running kernel still finishes and replies. */
Test(liveness, stopping_told_at_once) {
  th_server_t a;
  cr_assert_eq(th_server_start_default(&a, NULL), 0);
  conn_t *k = calloc(1, sizeof *k), *idle = calloc(1, sizeof *idle);
  hello(k, a.endpoint, CLIENT);
  hello(idle, a.endpoint, CLIENT + 1);
  exec(k, 1, K_SLEEP, "1500", inl(), 1, LT_INSTR_RETURN, 5);
  exec(k, 2, K_SLEEP, "1500", inl(), 2, LT_INSTR_RETURN, 5);
  exec(k, 3, K_SLEEP, "1500", inl(), 3, LT_INSTR_RETURN, 5); /* queued: 2 threads */
  int64_t until = th_now_ms() + 5000;
  do {
    cr_assert_lt(th_now_ms(), until, "the kernels never ran");
    heartbeat(k);
  } while (k->load.active != 2);
  cr_assert(!k->load.stopping);
  int64_t t0 = th_now_ms();
  kill(a.pid, SIGTERM);
  WAIT_FOR(k, k->nhb0 == 1, 5000);
  WAIT_FOR(idle, idle->nhb0 == 1, 5000);
  cr_assert_lt(th_now_ms() - t0, 1000, "told at once, not when the kernels end");
  cr_assert(k->all_stopping_after_hb0);
  cr_assert(idle->all_stopping_after_hb0);
  cr_assert(!k->done[3].got, "the notice comes before the queued work is given back");
  WAIT_FOR(k, k->done[1].got && k->done[2].got && k->done[3].got, 5000);
  cr_assert_eq(k->done[3].status, LT_ESHUTDOWN, "the queued one is given back");
  cr_assert_eq(k->done[1].status, LT_OK, "%s", k->done[1].msg);
  cr_assert_eq(k->done[2].status, LT_OK, "%s", k->done[2].msg);
  cr_assert(k->all_stopping_after_hb0, "every later message says stopping");
  cr_assert_eq(k->nhb0, 1, "one notice");
  th_client_close(&k->c);
  th_client_close(&idle->c);
  cr_assert_eq(th_server_stop(&a, 0, 5000), 0);
  free(k);
  free(idle);
}

/* ---------------------------------------------------------------------------------------
 * C. A client greeting again on a new connection. */

/* Session 1 (connection A, client X) holds a value and runs a slow instruction; session 2
 * (connection B, same client) says hello: session 1 is dropped at once, with its values.
 * Session 2 makes the same id the slow one was to make, and another: neither the old
 * instruction finishing later nor the idle timeout (session 1 stays silent) loses them. */
Test(liveness, new_connection_replaces_session) {
  th_server_t a;
  const char *extra[] = {"--idle-timeout", "600", NULL};
  cr_assert_eq(th_server_start_default(&a, extra), 0);
  conn_t *k1 = calloc(1, sizeof *k1), *k2 = calloc(1, sizeof *k2);
  hello(k1, a.endpoint, CLIENT);
  exec(k1, 1, K_INC, NULL, inl(), 10, 0, 1);
  WAIT_FOR(k1, k1->done[1].got, 5000);
  exec(k1, 2, K_SLEEP, "800", inl(), 30, 0, 1);
  int64_t until = th_now_ms() + 5000;
  do {
    cr_assert_lt(th_now_ms(), until, "the slow kernel never ran");
    heartbeat(k1);
  } while (k1->load.active != 1);
  cr_assert_eq(k1->load.values_held, 2);
  int64_t t0 = th_now_ms();
  hello(k2, a.endpoint, CLIENT);
  heartbeat(k2);
  cr_assert_eq(k2->load.values_held, 0, "the old session's values went with it");
  exec(k2, 1, K_INC, NULL, inl(), 30, 0, 41);
  exec(k2, 2, K_INC, NULL, inl(), 20, 0, 7);
  WAIT_FOR(k2, k2->done[1].got && k2->done[2].got, 5000);
  cr_assert_eq(k2->done[1].status, LT_OK, "%s", k2->done[1].msg);
  cr_assert_eq(k2->done[2].status, LT_OK, "%s", k2->done[2].msg);
  /* Past the old instruction's end and twice the idle timeout, session 2 speaking. */
  while (th_now_ms() - t0 < 1800) {
    heartbeat(k2);
    usleep(100 * 1000);
  }
  cr_assert_eq(k2->load.active, 0);
  cr_assert_eq(k2->load.values_held, 2);
  fetch(k2, 20);
  cr_assert_eq(k2->value[20].status, LT_OK, "%s", k2->value[20].msg);
  cr_assert_eq(k2->value[20].v, 8);
  fetch(k2, 30);
  cr_assert_eq(k2->value[30].status, LT_OK, "%s", k2->value[30].msg);
  cr_assert_eq(k2->value[30].v, 42, "session 2's value, not the old instruction's");
  fetch(k2, 10);
  cr_assert_eq(k2->value[10].status, LT_ENOENT, "session 1's value was released");
  cr_assert(!k1->done[2].got, "the replaced session hears nothing more");
  lt_msg_t hb = {.type = LT_MSG_HEARTBEAT};
  hb.u.heartbeat.seq = 1;
  send_msg(k1, &hb, NULL, 0);
  WAIT_FOR(k1, k1->nerror == 1, 5000);
  cr_assert_eq(k1->last_error, LT_ESTATE, "the old connection has no session");
  th_client_close(&k1->c);
  th_client_close(&k2->c);
  stop(&a);
  free(k1);
  free(k2);
}

/* ---------------------------------------------------------------------------------------
 * D. A second PROGRAM while instructions of the first are queued and running. */

/* Four slow instructions whose second stage fails (the worker names that kernel when it
 * fails, after the PROGRAM below replaced the table): every completion names the kernel of
 * the table it was made under; an instruction sent after the new table uses it. */
Test(liveness, program_replaced_while_running) {
  th_server_t a;
  cr_assert_eq(th_server_start_default(&a, NULL), 0);
  conn_t *k = calloc(1, sizeof *k);
  hello(k, a.endpoint, CLIENT);
  lt_stage_t then_fail = {K_FAIL, {NULL, 0}};
  for (uint64_t i = 1; i <= 4; i++)
    exec_more(k, i, K_SLEEP, "400", &then_fail, 1, inl(), i, LT_INSTR_RETURN, 0);
  int64_t until = th_now_ms() + 5000;
  do {
    cr_assert_lt(th_now_ms(), until, "the kernels never ran");
    heartbeat(k);
  } while (k->load.active != 2);
  /* Names of the same lengths, so that freed names would be reused by the new ones. */
  const char *const other[] = {"testk:echo", "testk:dbl",   "testk:none",
                               "testk:inc",  "testk:upper", "testk:two"};
  program(k, other, 6);
  program(k, other, 6);                               /* the same table again: nothing changes */
  exec(k, 5, 1, NULL, inl(), 5, LT_INSTR_RETURN, 21); /* index 1 is dbl now */
  WAIT_FOR(k, k->done[1].got && k->done[2].got && k->done[3].got && k->done[4].got, 10000);
  for (int i = 1; i <= 4; i++) {
    cr_assert_eq(k->done[i].status, LT_EKERNEL, "%d: %s", i, k->done[i].msg);
    cr_assert_str_eq(k->done[i].msg, "testk:fail: fail: asked to fail");
  }
  WAIT_FOR(k, k->done[5].got, 5000);
  cr_assert_eq(k->done[5].status, LT_OK, "%s", k->done[5].msg);
  cr_assert_eq(k->done[5].v, 42);
  th_client_close(&k->c);
  stop(&a);
  free(k);
}

/* ---------------------------------------------------------------------------------------
 * F. Errors in dataflow order, whatever was dispatched ahead. */

/* A three-stage chain sent at once (lookahead): the first runs, the second fails, the
 * third's kernel does not resolve. The third fails with the second's error unchanged, after
 * it, as in the sequential evaluator; a missing kernel fails its instruction only once its
 * inputs are there. */
Test(liveness, errors_in_dataflow_order) {
  th_server_t a;
  cr_assert_eq(th_server_start_default(&a, NULL), 0);
  conn_t *k = calloc(1, sizeof *k);
  hello(k, a.endpoint, CLIENT);
  unsigned char buf[8];
  th_put_i64(buf, 1);
  lt_bytes_t pay = {buf, 8};
  lt_input_t in[3] = {inl(),
                      {.kind = LT_INPUT_REF, .id = oid(k, 1), .holder = ""},
                      {.kind = LT_INPUT_REF, .id = oid(k, 2), .holder = ""}};
  lt_oid_t out[3] = {oid(k, 1), oid(k, 2), oid(k, 3)};
  uint32_t kern[3] = {K_SLEEP, K_FAIL, K_BAD};
  lt_instr_t ins[3];
  for (int i = 0; i < 3; i++)
    ins[i] = (lt_instr_t){.seq = (uint64_t)i + 1,
                          .kernel = kern[i],
                          .param = {i == 0 ? "300" : NULL, i == 0 ? 3 : 0},
                          .ninputs = 1,
                          .inputs = &in[i],
                          .noutputs = 1,
                          .outputs = &out[i],
                          .flags = i == 2 ? LT_INSTR_RETURN | LT_INSTR_KEEP : 0};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 3;
  m.u.execute.instrs = ins;
  send_msg(k, &m, &pay, 1);
  WAIT_FOR(k, k->done[1].got && k->done[2].got && k->done[3].got, 5000);
  cr_assert_eq(k->done[1].status, LT_OK, "%s", k->done[1].msg);
  cr_assert_eq(k->done[2].status, LT_EKERNEL, "%s", k->done[2].msg);
  cr_assert_str_eq(k->done[2].msg, "testk:fail: fail: asked to fail");
  cr_assert_eq(k->done[3].status, LT_EKERNEL, "the input's error, not ENOKERNEL: %s",
               k->done[3].msg);
  cr_assert_str_eq(k->done[3].msg, k->done[2].msg, "unchanged");
  cr_assert_lt(k->done[1].order, k->done[2].order);
  cr_assert_lt(k->done[2].order, k->done[3].order, "the first failure reaches the client first");
  fetch(k, 3);
  cr_assert_eq(k->value[3].status, LT_EKERNEL, "its output failed the same way");
  /* With its input there, a missing kernel fails its instruction when it would run, with
   * the resolver's error (here: no such module). */
  exec(k, 4, K_BAD, NULL, inl(), 4, LT_INSTR_RETURN, 1);
  exec(k, 5, K_BAD, NULL, (lt_input_t){.kind = LT_INPUT_REF, .id = oid(k, 1), .holder = ""}, 5,
       LT_INSTR_RETURN, 0);
  WAIT_FOR(k, k->done[4].got && k->done[5].got, 5000);
  for (int i = 4; i <= 5; i++) {
    cr_assert_eq(k->done[i].status, LT_ENOMODULE, "%s", k->done[i].msg);
    cr_assert_not_null(strstr(k->done[i].msg, "nosuchmod"), "%s", k->done[i].msg);
  }
  /* An index outside the table is still refused at once. */
  exec(k, 6, 17, NULL, inl(), 6, LT_INSTR_RETURN, 1);
  WAIT_FOR(k, k->done[6].got, 5000);
  cr_assert_eq(k->done[6].status, LT_ENOKERNEL, "%s", k->done[6].msg);
  th_client_close(&k->c);
  stop(&a);
  free(k);
}

/* ---------------------------------------------------------------------------------------
 * E. Parked instructions never wait forever for a peer. */

/* A holder that never answers: a bound ROUTER that swallows what it gets. */
typedef struct mute {
  void *ctx, *sock;
  char ep[256];
} mute_t;

static void mute_open(mute_t *h) {
  h->ctx = zmq_ctx_new();
  h->sock = zmq_socket(h->ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt(h->sock, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(h->sock, "tcp://127.0.0.1:0"), 0);
  size_t len = sizeof h->ep;
  cr_assert_eq(zmq_getsockopt(h->sock, ZMQ_LAST_ENDPOINT, h->ep, &len), 0);
}

static void mute_close(mute_t *h) {
  zmq_close(h->sock);
  zmq_ctx_term(h->ctx);
}

static lt_input_t ref_at(const conn_t *k, uint64_t seq, const char *holder) {
  return (lt_input_t){.kind = LT_INPUT_REF, .id = oid(k, seq), .holder = holder};
}

static void lost(conn_t *k, const char *holder) {
  lt_msg_t m = {.type = LT_MSG_LOST};
  m.u.lost.nholders = 1;
  m.u.lost.holders = &holder;
  send_msg(k, &m, NULL, 0);
}

/* B keeps one peer link at most and waits a minute for a silent peer. A reader of a second
 * holder while the link to the first has a fetch pending fails at once with LT_ELOST (it
 * used to park forever); the client's LOST fails the first reader at once and closes its
 * link; a link with nothing pending makes room for a new one; a holder named lost gets a
 * new link on the next need. */
Test(liveness, peers_never_park_forever) {
  th_server_t a, b;
  const char *bextra[] = {"--max-peers", "1", "--fetch-timeout", "60000", NULL};
  cr_assert_eq(th_server_start_default(&a, NULL), 0);
  cr_assert_eq(th_server_start_default(&b, bextra), 0);
  mute_t f1, f2;
  mute_open(&f1);
  mute_open(&f2);
  known[0] = a.endpoint;
  known[1] = f1.ep;
  known[2] = f2.ep;
  nknown = 3;
  conn_t *ka = calloc(1, sizeof *ka), *kb = calloc(1, sizeof *kb);
  hello(ka, a.endpoint, CLIENT);
  hello(kb, b.endpoint, CLIENT);

  exec(kb, 1, K_INC, NULL, ref_at(kb, 50, f1.ep), 1, LT_INSTR_RETURN, 0);
  heartbeat(kb);
  cr_assert_eq(kb->load.parked, 1, "waits for the silent holder");
  int64_t t0 = th_now_ms();
  exec(kb, 2, K_INC, NULL, ref_at(kb, 60, f2.ep), 2, LT_INSTR_RETURN, 0);
  WAIT_FOR(kb, kb->done[2].got, 3000);
  cr_assert_eq(kb->done[2].status, LT_ELOST, "%s", kb->done[2].msg);
  cr_assert_not_null(strstr(kb->done[2].msg, "peer links"), "%s", kb->done[2].msg);
  cr_assert(!kb->done[1].got);

  lost(kb, f1.ep);
  WAIT_FOR(kb, kb->done[1].got, 3000);
  cr_assert_lt(th_now_ms() - t0, 5000, "well before the fetch timeout");
  cr_assert_eq(kb->done[1].status, LT_ELOST, "%s", kb->done[1].msg);
  char want[300];
  snprintf(want, sizeof want, "holder %s is gone", f1.ep);
  cr_assert_not_null(strstr(kb->done[1].msg, want), "%s", kb->done[1].msg);
  heartbeat(kb);
  cr_assert_eq(kb->load.parked, 0);
  cr_assert_eq(kb->load.values_held, 0, "nothing pending is left behind");

  /* The lost holder's link is closed: a link to A fits, and is idle once read. */
  exec(ka, 1, K_INC, NULL, inl(), 80, 0, 1);
  exec(ka, 2, K_INC, NULL, inl(), 81, 0, 10);
  WAIT_FOR(ka, ka->done[1].got && ka->done[2].got, 5000);
  exec(kb, 3, K_INC, NULL, ref_at(kb, 80, a.endpoint), 3, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS,
       0);
  WAIT_FOR(kb, kb->done[3].got, 5000);
  cr_assert_eq(kb->done[3].status, LT_OK, "%s", kb->done[3].msg);
  cr_assert_eq(kb->done[3].v, 3);

  /* The idle link to A makes room for one to f2. */
  exec(kb, 4, K_INC, NULL, ref_at(kb, 70, f2.ep), 4, LT_INSTR_RETURN, 0);
  heartbeat(kb);
  cr_assert(!kb->done[4].got, "%s", kb->done[4].msg);
  cr_assert_eq(kb->load.parked, 1);
  lost(kb, f2.ep);
  WAIT_FOR(kb, kb->done[4].got, 3000);
  cr_assert_eq(kb->done[4].status, LT_ELOST, "%s", kb->done[4].msg);

  /* Lost, closed, needed again: a new link. */
  exec(kb, 5, K_INC, NULL, ref_at(kb, 81, a.endpoint), 5, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS,
       0);
  WAIT_FOR(kb, kb->done[5].got, 5000);
  cr_assert_eq(kb->done[5].status, LT_OK, "%s", kb->done[5].msg);
  cr_assert_eq(kb->done[5].v, 12);

  /* A LOST naming what cannot be a holder is refused, and nothing else changes. */
  lost(kb, "bogus");
  WAIT_FOR(kb, kb->nerror == 1, 3000);
  cr_assert_eq(kb->last_error, LT_EINVAL);
  th_client_close(&ka->c);
  th_client_close(&kb->c);
  mute_close(&f1);
  mute_close(&f2);
  stop(&a);
  stop(&b);
  free(ka);
  free(kb);
}
