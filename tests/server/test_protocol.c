/* test_protocol.c: a real lithium-server driven over a raw DEALER, message by message:
 * welcome, execute with inline and REF inputs, parking on pending inputs, deferred fetch,
 * release, cancel, heartbeat with load reports, arity checks, failure propagation,
 * duplicate ids, bye and idle timeout dropping a session, and shutdown on SIGTERM
 * (queued and parked instructions answered with LT_ESHUTDOWN, running ones finished); packs:
 * members in order as one task, per-member failures and deadlines (the inputs of members not
 * run kept for their retry), cancel and refusal whole, the queue quota counted per member. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>
#include <lithium/error.h>
#include "server/srv_helper.h"

#define CLIENT 0x1234abcdULL
#define MAXSEQ 1024

typedef struct rec {
  bool got;
  int status;
  char msg[600];
  uint32_t nout;
  uint64_t size[4];
  int32_t frame[4];
  int64_t v[4];
  int answer;
  uint32_t worker;   /* the worker thread that ran it */
  uint64_t start_us; /* when it started (server CLOCK_MONOTONIC), 0 when it never ran */
  uint32_t pack;     /* the members of a packed instruction, on the first of them */
} rec_t;

typedef struct st {
  th_server_t srv;
  th_client_t c;
  rec_t done[MAXSEQ];
  int ndone, ndone_msgs;
  rec_t value[MAXSEQ];
  int nerror, last_error;
  char last_errmsg[600];
  int nhb;
  uint64_t last_hb, hb_dones; /* the last heartbeat answer's seq and count of dones */
  lt_load_t load;
} st_t;

static void record(st_t *s, th_rx_t *r) {
  cr_assert(r->m.has_load, "every server message carries the load report");
  s->load = r->m.load;
  switch (r->m.type) {
  case LT_MSG_DONE:
    s->ndone_msgs++;
    /* Numbered in the session from 1, in order: a client can tell one lost on the way. */
    cr_assert_eq(r->m.u.done.batch, (uint64_t)s->ndone_msgs, "done number %llu, %d received",
                 (unsigned long long)r->m.u.done.batch, s->ndone_msgs);
    for (uint32_t i = 0; i < r->m.u.done.ncompl; i++) {
      const lt_completion_t *c = &r->m.u.done.compl [i];
      cr_assert_lt(c->seq, MAXSEQ);
      rec_t *d = &s->done[c->seq];
      cr_assert(!d->got, "two completions for seq %llu", (unsigned long long)c->seq);
      d->got = true;
      d->status = c->status;
      snprintf(d->msg, sizeof d->msg, "%s", c->errmsg);
      d->nout = c->noutputs;
      d->answer = c->answer;
      d->worker = c->worker;
      d->start_us = c->start_us;
      d->pack = c->pack;
      for (uint32_t k = 0; k < c->noutputs && k < 4; k++) {
        d->size[k] = c->outputs[k].size;
        d->frame[k] = c->outputs[k].frame;
        if (c->outputs[k].frame >= 0) {
          const lt_bytes_t *f = &r->m.frames[c->outputs[k].frame];
          cr_assert_eq(f->len, c->outputs[k].size);
          if (f->len == 8) d->v[k] = th_get_i64(f->data);
        }
      }
      s->ndone++;
    }
    break;
  case LT_MSG_VALUE: {
    cr_assert_lt(r->m.u.value.id.seq, MAXSEQ);
    rec_t *v = &s->value[r->m.u.value.id.seq];
    v->got = true;
    v->status = r->m.u.value.status;
    snprintf(v->msg, sizeof v->msg, "%s", r->m.u.value.errmsg);
    v->frame[0] = r->m.u.value.frame;
    if (r->m.u.value.frame >= 0) {
      v->size[0] = r->m.frames[r->m.u.value.frame].len;
      if (v->size[0] == 8) v->v[0] = th_get_i64(r->m.frames[r->m.u.value.frame].data);
    }
    break;
  }
  case LT_MSG_ERROR:
    s->nerror++;
    s->last_error = r->m.u.error.code;
    snprintf(s->last_errmsg, sizeof s->last_errmsg, "%s", r->m.u.error.message);
    break;
  case LT_MSG_HEARTBEAT:
    s->nhb++;
    s->last_hb = r->m.u.heartbeat.seq;
    s->hb_dones = r->m.u.heartbeat.dones;
    break;
  default:
    cr_assert_fail("unexpected %s", lt__msg_type_name(r->m.type));
  }
}

/* pump receives and records one message; 0 or LT_ETIMEDOUT. */
static int pump(st_t *s, int timeout_ms) {
  th_rx_t r;
  int rc = th_recv(&s->c, &r, timeout_ms);
  if (rc == LT_ETIMEDOUT) return rc;
  cr_assert_eq(rc, LT_OK, "undecodable reply: %s", lt_strerror(rc));
  record(s, &r);
  th_rx_clear(&r);
  return 0;
}

#define WAIT_FOR(s, cond)                                                                          \
  do {                                                                                             \
    int64_t until_ = th_now_ms() + 10000;                                                          \
    while (!(cond)) {                                                                              \
      cr_assert_lt(th_now_ms(), until_, "timed out waiting for " #cond);                           \
      pump((s), 200);                                                                              \
    }                                                                                              \
  } while (0)

/* start_peers starts a server with the flags `extra` and opens the test's session, whose
 * servers (the holders its REF inputs may name) are `peers`. */
static void start_peers(st_t *s, const char *const *extra, const char *const *peers,
                        uint32_t npeers) {
  memset(s, 0, sizeof *s);
  cr_assert_eq(th_server_start_default(&s->srv, extra), 0, "server did not start");
  cr_assert_eq(th_client_open(&s->c, s->srv.endpoint), 0);
  cr_assert_eq(th_hello_ok(&s->c, CLIENT), 0);
  const char *kernels[] = {"testk:inc",    "testk:sleep",     "testk:fail",  "testk:two",
                           "testk:none",   "testk:echo",      "nosuchmod:f", "testk:positive",
                           "testk:dbl",    "testk:neg_fails", "testk:busy",  "testk:inplace",
                           "testk:concat", "testk:rewrite"};
  cr_assert_eq(th_program_peers(&s->c, kernels, 14, peers, npeers), 0);
}

static void start(st_t *s, const char *const *extra) {
  start_peers(s, extra, NULL, 0);
}

enum {
  K_INC,
  K_SLEEP,
  K_FAIL,
  K_TWO,
  K_NONE,
  K_ECHO,
  K_BAD,
  K_POS,
  K_DBL,
  K_NEG,
  K_BUSY,
  K_INPLACE,
  K_CONCAT,
  K_REWRITE
};

static void stop(st_t *s) {
  th_client_close(&s->c);
  cr_assert_eq(th_server_stop(&s->srv, SIGTERM, 15000), 0, "server exits 0 on SIGTERM");
}

static lt_oid_t oid(uint64_t seq) {
  return (lt_oid_t){CLIENT, seq};
}

static lt_input_t inl(uint32_t frame) {
  return (lt_input_t){.kind = LT_INPUT_INLINE, .frame = frame, .holder = ""};
}

static lt_input_t ref(uint64_t seq) {
  return (lt_input_t){.kind = LT_INPUT_REF, .id = oid(seq), .holder = ""};
}

static lt_instr_t op_instr(uint64_t seq, uint32_t op, uint32_t kernel, lt_stage_t *more,
                           uint32_t nmore, lt_input_t *in, lt_oid_t *out, uint32_t flags) {
  return (lt_instr_t){.seq = seq,
                      .op = op,
                      .kernel = kernel,
                      .nmore = nmore,
                      .more = more,
                      .ninputs = 1,
                      .inputs = in,
                      .noutputs = 1,
                      .outputs = out,
                      .flags = flags};
}

static lt_instr_t instr(uint64_t seq, uint32_t kernel, lt_input_t *in, uint32_t nin, lt_oid_t *out,
                        uint32_t nout, uint32_t flags, const char *param) {
  return (lt_instr_t){.seq = seq,
                      .kernel = kernel,
                      .param = {param, param ? strlen(param) : 0},
                      .ninputs = nin,
                      .inputs = in,
                      .noutputs = nout,
                      .outputs = out,
                      .flags = flags};
}

/* execute_within sends an EXECUTE of n instructions with the session's deadline per
 * instruction (0: none). */
static void execute_within(st_t *s, lt_instr_t *ins, uint32_t n, const lt_bytes_t *pay, uint32_t np,
                           uint32_t timeout_ms) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = n;
  m.u.execute.instrs = ins;
  m.u.execute.timeout_ms = timeout_ms;
  cr_assert_eq(th_send(&s->c, &m, pay, np), LT_OK);
}

static void execute(st_t *s, lt_instr_t *ins, uint32_t n, const lt_bytes_t *pay, uint32_t np) {
  execute_within(s, ins, n, pay, np, 0);
}

static void simple(st_t *s, lt_msg_type_t type, lt_oid_t id, uint64_t seq) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = type;
  if (type == LT_MSG_FETCH) m.u.fetch.id = id;
  if (type == LT_MSG_RELEASE) {
    m.u.release.nids = 1;
    m.u.release.ids = &id;
  }
  if (type == LT_MSG_CANCEL) {
    m.u.cancel.nseqs = 1;
    m.u.cancel.seqs = &seq;
  }
  if (type == LT_MSG_HEARTBEAT) m.u.heartbeat.seq = seq;
  cr_assert_eq(th_send(&s->c, &m, NULL, 0), LT_OK);
}

static void heartbeat(st_t *s, uint64_t seq) {
  simple(s, LT_MSG_HEARTBEAT, oid(0), seq);
  WAIT_FOR(s, s->last_hb == seq);
}

/* wait_active polls with heartbeats until `n` kernels run: "queued" only means no worker
 * has taken the job yet, which on a loaded machine can take a while. */
static void wait_active(st_t *s, uint32_t n) {
  int64_t until = th_now_ms() + 5000;
  uint64_t seq = 1000;
  do {
    cr_assert_lt(th_now_ms(), until, "never %u active", n);
    heartbeat(s, ++seq);
  } while (s->load.active != n);
}

Test(protocol, welcome_and_inline_execute) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8];
  th_put_i64(v, 41);
  lt_bytes_t pay = {v, 8};
  lt_input_t in = inl(0);
  lt_oid_t out = oid(100);
  lt_instr_t i = instr(1, K_INC, &in, 1, &out, 1, LT_INSTR_RETURN, NULL);
  uint64_t before_us = (uint64_t)th_now_ms() * 1000;
  execute(s, &i, 1, &pay, 1);
  WAIT_FOR(s, s->done[1].got);
  uint64_t after_us = (uint64_t)th_now_ms() * 1000 + 1000;
  cr_assert_eq(s->done[1].status, LT_OK, "%s", s->done[1].msg);
  /* For traces: which worker ran it and when, on the server's (here the same) clock. */
  cr_assert_lt(s->done[1].worker, 2);
  cr_assert(s->done[1].start_us >= before_us && s->done[1].start_us <= after_us,
            "start %llu not in [%llu, %llu]", (unsigned long long)s->done[1].start_us,
            (unsigned long long)before_us, (unsigned long long)after_us);
  cr_assert_eq(s->done[1].nout, 1);
  cr_assert_eq(s->done[1].size[0], 8);
  cr_assert_eq(s->done[1].frame[0], 0);
  cr_assert_eq(s->done[1].v[0], 42);
  cr_assert_eq(s->load.threads, 2);
  cr_assert_geq(s->load.completed, 1);
  cr_assert_eq(s->load.values_held, 0, "returned, not kept");
  stop(s);
  free(s);
}

Test(protocol, welcome_fields) {
  th_server_t srv;
  const char *extra[] = {"--name", "unit-7", NULL};
  cr_assert_eq(th_server_start_default(&srv, extra), 0);
  th_client_t c;
  cr_assert_eq(th_client_open(&c, srv.endpoint), 0);
  cr_assert_eq(th_hello(&c, 77, LT_PROTO_VERSION), 0);
  th_rx_t r;
  cr_assert_eq(th_recv(&c, &r, 5000), 0);
  cr_assert_eq(r.m.type, LT_MSG_WELCOME);
  cr_assert_eq(r.m.u.welcome.version, LT_PROTO_VERSION);
  cr_assert_str_eq(r.m.u.welcome.server_id, "unit-7");
  cr_assert_gt(r.m.u.welcome.cores, 0);
  cr_assert_eq(r.m.u.welcome.threads, 2);
  cr_assert_gt(r.m.u.welcome.speed, 0.0, "a calibrated speed");
  cr_assert(r.m.has_load);
  /* The server's clock (CLOCK_MONOTONIC, here the same as ours) in welcome and pong. */
  uint64_t now_us = (uint64_t)th_now_ms() * 1000 + 1000;
  cr_assert(r.m.u.welcome.now_us > 0 && r.m.u.welcome.now_us <= now_us);
  uint64_t welcome_us = r.m.u.welcome.now_us;
  th_rx_clear(&r);
  lt_msg_t ping = {.type = LT_MSG_HEARTBEAT};
  ping.u.heartbeat.seq = 5;
  cr_assert_eq(th_send(&c, &ping, NULL, 0), LT_OK);
  cr_assert_eq(th_recv(&c, &r, 5000), 0);
  cr_assert_eq(r.m.type, LT_MSG_HEARTBEAT);
  cr_assert_eq(r.m.u.heartbeat.seq, 5);
  cr_assert_geq(r.m.u.heartbeat.now_us, welcome_us);
  cr_assert_leq(r.m.u.heartbeat.now_us, (uint64_t)th_now_ms() * 1000 + 1000);
  th_rx_clear(&r);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&srv, SIGINT, 5000), 0);
}

/* A chain through the store: A keeps X, B reads X by reference and returns; B is parked
 * while A sleeps, visible in the load report. Then fetch, release, fetch again. */
/* testk:inplace adds this to its input when its output is the input's own buffer
 * (lt_call_output_from_input), 1 when it was copied. */
#define INPLACE_MARK 1000000

/* make_value runs testk:echo on `v` under instruction seq `seq` into the kept id `id`. */
static void make_value(st_t *s, uint64_t seq, uint64_t id, int64_t v) {
  unsigned char b[8];
  th_put_i64(b, v);
  lt_bytes_t pay = {b, 8};
  lt_input_t in = inl(0);
  lt_oid_t out = oid(id);
  lt_instr_t i = instr(seq, K_ECHO, &in, 1, &out, 1, 0, NULL);
  execute(s, &i, 1, &pay, 1);
  WAIT_FOR(s, s->done[seq].got);
  cr_assert_eq(s->done[seq].status, LT_OK, "%s", s->done[seq].msg);
}

/* run_inplace runs testk:inplace on the kept id `id` with `flags` (LT_INSTR_RETURN and more)
 * and returns its result. */
static int64_t run_kernel_inplace(st_t *s, uint32_t kernel, uint64_t seq, uint64_t id,
                                  uint64_t out_id, uint32_t flags) {
  lt_input_t in = ref(id);
  lt_oid_t out = oid(out_id);
  lt_instr_t i = instr(seq, kernel, &in, 1, &out, 1, flags, NULL);
  execute(s, &i, 1, NULL, 0);
  WAIT_FOR(s, s->done[seq].got);
  cr_assert_eq(s->done[seq].status, LT_OK, "%s", s->done[seq].msg);
  return s->done[seq].v[0];
}

static int64_t run_inplace(st_t *s, uint64_t seq, uint64_t id, uint64_t out_id, uint32_t flags) {
  return run_kernel_inplace(s, K_INPLACE, seq, id, out_id, flags);
}

/* Only a kernel declared to write in place (LT_KERNEL_IN_PLACE) is given its input's buffer:
 * testk:rewrite, the same kernel declared with LT_KERNEL, gets a copy even as the last
 * reader, and its input stays readable until it has run (a copy of a straggler elsewhere may
 * fetch it meanwhile). */
Test(protocol, output_from_input_needs_the_kernel_s_declaration) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  make_value(s, 1, 15, 41);
  cr_assert_eq(
      run_kernel_inplace(s, K_REWRITE, 2, 15, 16, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS), 42,
      "not declared: a copy");
  heartbeat(s, 22);
  cr_assert_eq(s->load.values_held, 0, "the input still left with its last reader");
  stop(s);
  free(s);
}

/* The last reader of a kernel's output held by nobody else writes its output over the input
 * (no copy); a reader that is not the last one gets a copy and the value stays as it was. */
Test(protocol, output_from_input_in_place_for_the_last_reader) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  make_value(s, 1, 10, 41);
  cr_assert_eq(run_inplace(s, 2, 10, 11, LT_INSTR_RETURN), 42, "not the last reader: a copy");
  simple(s, LT_MSG_FETCH, oid(10), 0);
  WAIT_FOR(s, s->value[10].got);
  cr_assert_eq(s->value[10].v[0], 41, "the value read by a copy is unchanged");
  heartbeat(s, 20);
  cr_assert_eq(s->load.values_held, 1);
  cr_assert_eq(run_inplace(s, 3, 10, 12, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS),
               41 + INPLACE_MARK, "the last reader writes in place");
  heartbeat(s, 21);
  cr_assert_eq(s->load.values_held, 0, "the input left with its last reader");
  memset(&s->value[10], 0, sizeof s->value[10]);
  simple(s, LT_MSG_FETCH, oid(10), 0);
  WAIT_FOR(s, s->value[10].got);
  cr_assert_eq(s->value[10].status, LT_ENOENT);
  stop(s);
  free(s);
}

/* A last reader whose input another task still holds gets a copy, so the other reader's bytes
 * are not written over. The other reader waits, holding the value, for its second input from a
 * "peer" that never answers (a silent ROUTER of the test's own), so it holds it for sure
 * while the last reader runs. */
Test(protocol, output_from_input_copied_when_shared) {
  void *ctx = zmq_ctx_new(), *silent = zmq_socket(ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt(silent, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(silent, "tcp://127.0.0.1:*"), 0);
  char ep[256];
  size_t len = sizeof ep;
  cr_assert_eq(zmq_getsockopt(silent, ZMQ_LAST_ENDPOINT, ep, &len), 0);
  st_t *s = calloc(1, sizeof *s);
  const char *peers[] = {ep};
  start_peers(s, NULL, peers, 1);
  make_value(s, 1, 20, 41);
  lt_input_t cin[2] = {ref(20), {.kind = LT_INPUT_REF, .id = oid(22), .holder = ep}};
  lt_oid_t cout = oid(21);
  lt_instr_t c = instr(2, K_CONCAT, cin, 2, &cout, 1, LT_INSTR_RETURN, NULL);
  execute(s, &c, 1, NULL, 0);
  heartbeat(s, 30);
  cr_assert_eq(s->load.parked, 1, "the other reader holds 20 and waits for 22 (%s)",
               s->done[2].msg);
  cr_assert_eq(run_inplace(s, 3, 20, 23, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS), 42,
               "a value another task holds is copied");
  cr_assert_not(s->done[2].got, "the other reader still waits, holding the value");
  stop(s);
  zmq_close(silent);
  zmq_ctx_term(ctx);
  free(s);
}

Test(protocol, ref_chain_parks_and_fetch) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8];
  th_put_i64(v, 5);
  lt_bytes_t pay = {v, 8};
  lt_input_t ina = inl(0), inb = ref(10), inc2 = ref(11);
  lt_oid_t x = oid(10), y = oid(11), z = oid(12);
  /* A sleeps long enough that the report below, also on a slow (sanitizer) build, sees it
   * still running. */
  lt_instr_t ins[3] = {instr(1, K_SLEEP, &ina, 1, &x, 1, 0, "2000"),
                       instr(2, K_INC, &inb, 1, &y, 1, LT_INSTR_KEEP | LT_INSTR_RETURN, NULL),
                       instr(3, K_INC, &inc2, 1, &z, 1, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 3, &pay, 1);
  heartbeat(s, 9);
  cr_assert_eq(s->load.parked, 2, "B and C wait for their inputs");
  cr_assert_eq(s->load.active + s->load.queued, 1);
  cr_assert_eq(s->load.values_held, 2, "X and Y are expected");
  /* A fetch of the pending X is answered once X is set. */
  simple(s, LT_MSG_FETCH, x, 0);
  WAIT_FOR(s, s->done[3].got && s->value[10].got);
  cr_assert_eq(s->done[1].status, LT_OK);
  cr_assert_eq(s->done[1].nout, 1);
  cr_assert_eq(s->done[1].frame[0], -1, "not returned");
  cr_assert_eq(s->done[1].size[0], 8);
  cr_assert_eq(s->done[2].v[0], 6);
  cr_assert_eq(s->done[3].v[0], 7);
  cr_assert_eq(s->value[10].status, LT_OK);
  cr_assert_eq(s->value[10].v[0], 5);
  cr_assert_eq(s->load.parked, 0);
  cr_assert_eq(s->load.values_held, 2, "X and Y (kept)");
  simple(s, LT_MSG_FETCH, y, 0);
  WAIT_FOR(s, s->value[11].got);
  cr_assert_eq(s->value[11].v[0], 6);
  simple(s, LT_MSG_RELEASE, x, 0);
  memset(&s->value[10], 0, sizeof s->value[10]);
  simple(s, LT_MSG_FETCH, x, 0);
  WAIT_FOR(s, s->value[10].got);
  cr_assert_eq(s->value[10].status, LT_ENOENT);
  cr_assert_eq(s->value[10].frame[0], -1);
  cr_assert_neq(s->value[10].msg[0], '\0');
  cr_assert_eq(s->load.values_held, 1);
  stop(s);
  free(s);
}

Test(protocol, release_inputs_after_use) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8];
  th_put_i64(v, 1);
  lt_bytes_t pay = {v, 8};
  lt_input_t ina = inl(0), inb = ref(20);
  lt_oid_t x = oid(20), y = oid(21);
  lt_instr_t ins[2] = {
      instr(1, K_INC, &ina, 1, &x, 1, 0, NULL),
      instr(2, K_INC, &inb, 1, &y, 1, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS, NULL)};
  execute(s, ins, 2, &pay, 1);
  WAIT_FOR(s, s->done[2].got);
  cr_assert_eq(s->done[2].v[0], 3);
  simple(s, LT_MSG_FETCH, x, 0);
  WAIT_FOR(s, s->value[20].got);
  cr_assert_eq(s->value[20].status, LT_ENOENT, "X was released after its last use");
  cr_assert_eq(s->load.values_held, 0);
  stop(s);
  free(s);
}

Test(protocol, failures_propagate) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t ina = inl(0), inb = ref(30);
  lt_oid_t x = oid(30), y = oid(31);
  lt_instr_t ins[2] = {instr(1, K_FAIL, &ina, 1, &x, 1, 0, NULL),
                       instr(2, K_INC, &inb, 1, &y, 1, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 2, &pay, 1);
  WAIT_FOR(s, s->done[1].got && s->done[2].got);
  cr_assert_eq(s->done[1].status, LT_EKERNEL);
  cr_assert_str_eq(s->done[1].msg, "testk:fail: fail: asked to fail");
  cr_assert_eq(s->done[1].nout, 0);
  cr_assert_eq(s->done[2].status, LT_EKERNEL);
  cr_assert_not_null(strstr(s->done[2].msg, "asked to fail"), "%s", s->done[2].msg);
  simple(s, LT_MSG_FETCH, x, 0);
  WAIT_FOR(s, s->value[30].got);
  cr_assert_eq(s->value[30].status, LT_EKERNEL);
  cr_assert_str_eq(s->value[30].msg, "testk:fail: fail: asked to fail");
  stop(s);
  free(s);
}

/* The ops: a split returns its parts, a dc step answers (and divides when false), fused
 * seq stages run back to back; arity is checked. */
Test(protocol, ops_and_arity) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8], neg[8];
  th_put_i64(v, 9);
  th_put_i64(neg, -4);
  lt_bytes_t pay[2] = {{v, 8}, {neg, 8}};
  lt_input_t in0 = inl(0), in1 = inl(1), inpart = ref(201);
  lt_oid_t o[8] = {oid(40), oid(50), oid(60), oid(70), oid(80), oid(90), oid(200), oid(300)};
  lt_stage_t chain[2] = {{K_DBL, {NULL, 0}}, {K_INC, {NULL, 0}}};
  lt_stage_t divide = {K_TWO, {NULL, 0}};
  lt_instr_t ins[] = {
      op_instr(1, LT_OP_SPLIT, K_TWO, NULL, 0, &in0, &o[0], LT_INSTR_RETURN),
      op_instr(2, LT_OP_SEQ, K_TWO, NULL, 0, &in0, &o[1], LT_INSTR_RETURN),
      op_instr(3, LT_OP_SPLIT, K_NONE, NULL, 0, &in0, &o[2], LT_INSTR_RETURN),
      op_instr(4, LT_OP_SEQ, K_INC, chain, 2, &in0, &o[3], LT_INSTR_RETURN),
      op_instr(5, LT_OP_DCSTEP, K_POS, &divide, 1, &in0, &o[4], LT_INSTR_RETURN),
      op_instr(6, LT_OP_DCSTEP, K_POS, &divide, 1, &in1, &o[5], LT_INSTR_RETURN),
      op_instr(7, LT_OP_SPLIT, K_TWO, NULL, 0, &in0, &o[6], 0), /* parts kept: 200, 201 */
  };
  execute(s, ins, 7, pay, 2);
  WAIT_FOR(s, s->ndone == 7);
  cr_assert_eq(s->done[1].status, LT_OK, "%s", s->done[1].msg);
  cr_assert_eq(s->done[1].nout, 2);
  cr_assert(s->done[1].frame[0] >= 0 && s->done[1].frame[1] >= 0);
  cr_assert_eq(s->done[1].v[0], 9);
  cr_assert_eq(s->done[1].v[1], 9);
  cr_assert_eq(s->done[1].answer, -1);
  cr_assert_eq(s->done[2].status, LT_EKERNEL);
  cr_assert_not_null(strstr(s->done[2].msg, "testk:two"), "%s", s->done[2].msg);
  cr_assert_not_null(strstr(s->done[2].msg, "made 2 outputs"), "%s", s->done[2].msg);
  cr_assert_eq(s->done[3].status, LT_OK);
  cr_assert_eq(s->done[3].nout, 0);
  cr_assert_eq(s->done[4].status, LT_OK, "%s", s->done[4].msg);
  cr_assert_eq(s->done[4].v[0], (9 + 1) * 2 + 1, "inc, dbl, inc fused: %lld",
               (long long)s->done[4].v[0]);
  cr_assert_eq(s->done[5].status, LT_OK, "%s", s->done[5].msg);
  cr_assert_eq(s->done[5].answer, 1, "9 > 0: base case");
  cr_assert_eq(s->done[5].nout, 0);
  cr_assert_eq(s->done[6].status, LT_OK, "%s", s->done[6].msg);
  cr_assert_eq(s->done[6].answer, 0, "-4: divided");
  cr_assert_eq(s->done[6].nout, 2);
  cr_assert_eq(s->done[6].v[1], -4);
  cr_assert_eq(s->done[7].status, LT_OK);
  cr_assert_eq(s->done[7].nout, 2);
  cr_assert_eq(s->done[7].frame[0], -1);
  cr_assert_eq(s->done[7].size[1], 8);
  /* Part i of a kept split is {client, seq + i}. */
  simple(s, LT_MSG_FETCH, oid(201), 0);
  WAIT_FOR(s, s->value[201].got);
  cr_assert_eq(s->value[201].status, LT_OK);
  cr_assert_eq(s->value[201].v[0], 9);
  lt_instr_t use = op_instr(8, LT_OP_SEQ, K_INC, NULL, 0, &inpart, &o[7], LT_INSTR_RETURN);
  execute(s, &use, 1, NULL, 0);
  WAIT_FOR(s, s->done[8].got);
  cr_assert_eq(s->done[8].v[0], 10);
  stop(s);
  free(s);
}

Test(protocol, bad_instructions) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {9};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0);
  lt_input_t far = {.kind = LT_INPUT_REF, .id = oid(1), .holder = "ipc:///tmp/holder"};
  lt_input_t missing = ref(999);
  lt_oid_t o2[2] = {oid(40), oid(41)}, o1 = oid(43), same = oid(50);
  lt_stage_t bad_more = {99, {NULL, 0}};
  lt_stage_t more = {K_TWO, {NULL, 0}};
  lt_instr_t ins[] = {
      instr(1, K_INC, &in0, 1, o2, 2, LT_INSTR_RETURN, NULL),                /* two output ids */
      instr(2, K_INC, &in0, 1, NULL, 0, LT_INSTR_RETURN, NULL),              /* no output id */
      instr(3, K_INC, &in0, 1, &o1, 1, LT_INSTR_RETURN, NULL),               /* ok */
      instr(4, 99, &in0, 1, &o1, 1, LT_INSTR_RETURN, NULL),                  /* kernel index */
      instr(5, K_BAD, &in0, 1, &o1, 1, LT_INSTR_RETURN, NULL),               /* unresolved */
      instr(6, K_INC, &far, 1, &o1, 1, LT_INSTR_RETURN, NULL),               /* not tcp:// */
      instr(7, K_INC, &missing, 1, &o1, 1, LT_INSTR_RETURN, NULL),           /* unknown ref */
      op_instr(8, LT_OP_SPLIT, K_TWO, &more, 1, &in0, &o1, LT_INSTR_RETURN), /* stages */
      op_instr(9, LT_OP_DCSTEP, K_POS, NULL, 0, &in0, &o1, LT_INSTR_RETURN), /* no divide */
      op_instr(10, LT_OP_DCSTEP, K_POS, &bad_more, 1, &in0, &o1, LT_INSTR_RETURN),
      op_instr(11, LT_OP_SEQ, K_INC, &bad_more, 1, &in0, &o1, LT_INSTR_RETURN),
      instr(12, K_INC, &in0, 1, &same, 1, 0, NULL), /* 12 and 13 both set id 50 */
      instr(13, K_ECHO, &in0, 1, &same, 1, 0, NULL),
  };
  execute(s, ins, 13, &pay, 1);
  WAIT_FOR(s, s->ndone == 13);
  cr_assert_eq(s->done[1].status, LT_EPROTO);
  cr_assert_eq(s->done[1].start_us, 0, "refused: it never ran");
  cr_assert_gt(s->done[3].start_us, 0, "it ran");
  cr_assert_eq(s->done[2].status, LT_EPROTO);
  cr_assert_eq(s->done[3].status, LT_OK);
  cr_assert_eq(s->done[3].answer, -1);
  cr_assert_eq(s->done[4].status, LT_ENOKERNEL);
  cr_assert_not_null(strstr(s->done[4].msg, "kernel index 99 not in program"), "%s",
                     s->done[4].msg);
  cr_assert_eq(s->done[5].status, LT_ENOMODULE);
  cr_assert_not_null(strstr(s->done[5].msg, "nosuchmod"), "%s", s->done[5].msg);
  cr_assert_eq(s->done[6].status, LT_EINVAL);
  cr_assert_not_null(strstr(s->done[6].msg, "not a tcp:// endpoint"), "%s", s->done[6].msg);
  cr_assert_eq(s->done[7].status, LT_ENOENT);
  cr_assert_eq(s->done[8].status, LT_EPROTO);
  cr_assert_eq(s->done[9].status, LT_EPROTO);
  cr_assert_eq(s->done[10].status, LT_ENOKERNEL);
  cr_assert_eq(s->done[11].status, LT_ENOKERNEL);
  /* Single assignment: whichever finishes second finds id 50 set. */
  cr_assert_eq(s->done[12].status + s->done[13].status, LT_EEXIST, "%d %d", s->done[12].status,
               s->done[13].status);
  cr_assert_not_null(strstr(s->done[s->done[12].status ? 12 : 13].msg, "already set"));
  stop(s);
  free(s);
}

/* Refused instructions of one EXECUTE come back in one done. */
Test(protocol, completions_are_batched) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  lt_instr_t ins[50];
  lt_oid_t out = oid(1);
  for (int i = 0; i < 50; i++)
    ins[i] = instr((uint64_t)i + 1, 1000, NULL, 0, &out, 1, 0, NULL);
  execute(s, ins, 50, NULL, 0);
  WAIT_FOR(s, s->ndone == 50);
  cr_assert_eq(s->ndone_msgs, 1);
  stop(s);
  free(s);
}

/* Every heartbeat answer counts the dones sent in the session before it: as many as
 * arrived, since a session's messages arrive in order (a client that got fewer lost some). */
Test(protocol, heartbeat_answers_count_the_dones_sent) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  heartbeat(s, 1);
  WAIT_FOR(s, s->last_hb == 1);
  cr_assert_eq(s->hb_dones, 0);
  for (int i = 0; i < 3; i++) {
    lt_oid_t out = oid((uint64_t)i + 1);
    lt_instr_t ins = instr((uint64_t)i + 1, 1000, NULL, 0, &out, 1, 0, NULL);
    execute(s, &ins, 1, NULL, 0);
    WAIT_FOR(s, s->ndone == i + 1);
  }
  heartbeat(s, 2);
  WAIT_FOR(s, s->last_hb == 2);
  cr_assert_eq(s->ndone_msgs, 3);
  cr_assert_eq(s->hb_dones, 3);
  stop(s);
  free(s);
}

Test(protocol, duplicate_seq_in_flight) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0);
  lt_oid_t a = oid(50), b = oid(51);
  lt_instr_t ins[2] = {instr(1, K_SLEEP, &in0, 1, &a, 1, LT_INSTR_RETURN, "200"),
                       instr(1, K_ECHO, &in0, 1, &b, 1, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 2, &pay, 1);
  WAIT_FOR(s, s->done[1].got);
  cr_assert_eq(s->done[1].status, LT_EEXIST, "the duplicate is refused first");
  memset(&s->done[1], 0, sizeof s->done[1]);
  WAIT_FOR(s, s->done[1].got);
  cr_assert_eq(s->done[1].status, LT_OK, "the original completes");
  stop(s);
  free(s);
}

Test(protocol, cancel_queued_and_parked) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0), inp = ref(60);
  lt_oid_t o[6] = {oid(60), oid(61), oid(62), oid(63), oid(64), oid(65)};
  lt_instr_t ins[6];
  for (int i = 0; i < 5; i++)
    ins[i] =
        instr((uint64_t)i + 1, K_SLEEP, &in0, 1, &o[i], 1, i == 0 ? 0 : LT_INSTR_RETURN, "300");
  ins[5] = instr(6, K_INC, &inp, 1, &o[5], 1, LT_INSTR_RETURN, NULL); /* parked on seq 1 */
  execute(s, ins, 6, &pay, 1);
  wait_active(s, 2);
  cr_assert_eq(s->load.active + s->load.queued, 5);
  cr_assert_leq(s->load.active, 2);
  cr_assert_eq(s->load.parked, 1);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_CANCEL;
  uint64_t seqs[] = {1, 3, 4, 6, 999};
  m.u.cancel.nseqs = 5;
  m.u.cancel.seqs = seqs;
  cr_assert_eq(th_send(&s->c, &m, NULL, 0), LT_OK);
  WAIT_FOR(s, s->ndone == 6);
  cr_assert_eq(s->done[1].status, LT_OK, "running: not canceled");
  cr_assert_eq(s->done[2].status, LT_OK);
  cr_assert_eq(s->done[3].status, LT_ECANCELED);
  cr_assert_eq(s->done[4].status, LT_ECANCELED);
  cr_assert_eq(s->done[5].status, LT_OK);
  cr_assert_eq(s->done[6].status, LT_ECANCELED);
  heartbeat(s, 2);
  cr_assert_eq(s->load.parked, 0);
  cr_assert_eq(s->load.queued, 0);
  cr_assert_eq(s->load.active, 0);
  stop(s);
  free(s);
}

/* The client runs a canceled instruction again (here or elsewhere) under the same output id
 * and releases only that run's output, so the canceled one must leave no entry behind: not
 * counted in values_held, and no "duplicate output id" when it comes back here. */
Test(protocol, canceled_output_is_not_held) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0);
  lt_oid_t o[3] = {oid(70), oid(71), oid(72)};
  lt_instr_t ins[3];
  for (int i = 0; i < 2; i++)
    ins[i] = instr((uint64_t)i + 1, K_SLEEP, &in0, 1, &o[i], 1, LT_INSTR_RETURN, "300");
  ins[2] = instr(3, K_INC, &in0, 1, &o[2], 1, 0, NULL); /* kept, queued behind both */
  execute(s, ins, 3, &pay, 1);
  wait_active(s, 2);
  simple(s, LT_MSG_CANCEL, oid(0), 3);
  WAIT_FOR(s, s->done[3].got);
  cr_assert_eq(s->done[3].status, LT_ECANCELED);
  heartbeat(s, 2);
  cr_assert_eq(s->load.values_held, 0, "the canceled output is dropped");
  memset(&s->done[3], 0, sizeof s->done[3]);
  execute(s, &ins[2], 1, &pay, 1);
  WAIT_FOR(s, s->done[3].got);
  cr_assert_eq(s->done[3].status, LT_OK, "%s", s->done[3].msg);
  WAIT_FOR(s, s->ndone == 4);
  heartbeat(s, 3);
  cr_assert_eq(s->load.values_held, 1, "the run that completed holds its output");
  stop(s);
  free(s);
}

/* A failed task releases its references: a successor parked on a released value fails with
 * ECANCELED, and its own output, released in the same message, must not come back as a
 * failed entry that nobody drops (the client treats ECANCELED as "run it again" and
 * releases nothing of it). The producer's late output is released by the client when its
 * stale completion arrives. */
Test(protocol, successor_of_a_released_value_leaves_nothing_held) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0), inx = ref(80);
  lt_oid_t x = oid(80), y = oid(81);
  lt_instr_t ins[2] = {instr(1, K_SLEEP, &in0, 1, &x, 1, 0, "300"),
                       instr(2, K_INC, &inx, 1, &y, 1, 0, NULL)}; /* parked on x */
  execute(s, ins, 2, &pay, 1);
  wait_active(s, 1);
  lt_oid_t ids[2] = {y, x};
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_RELEASE;
  m.u.release.nids = 2;
  m.u.release.ids = ids;
  cr_assert_eq(th_send(&s->c, &m, NULL, 0), LT_OK);
  WAIT_FOR(s, s->done[2].got);
  cr_assert_eq(s->done[2].status, LT_ECANCELED, "%s", s->done[2].msg);
  WAIT_FOR(s, s->done[1].got);
  cr_assert_eq(s->done[1].status, LT_OK, "%s", s->done[1].msg);
  heartbeat(s, 2);
  cr_assert_eq(s->load.values_held, 1, "only the producer's late output");
  simple(s, LT_MSG_RELEASE, x, 0);
  heartbeat(s, 3);
  cr_assert_eq(s->load.values_held, 0);
  stop(s);
  free(s);
}

Test(protocol, messages_need_a_session) {
  th_server_t srv;
  cr_assert_eq(th_server_start_default(&srv, NULL), 0);
  st_t *s = calloc(1, sizeof *s);
  cr_assert_eq(th_client_open(&s->c, srv.endpoint), 0);
  simple(s, LT_MSG_HEARTBEAT, oid(0), 5);
  WAIT_FOR(s, s->nerror == 1);
  cr_assert_eq(s->last_error, LT_ESTATE);
  cr_assert_not_null(strstr(s->last_errmsg, "hello"));
  cr_assert_eq(th_hello(&s->c, 1, LT_PROTO_VERSION + 41), 0);
  WAIT_FOR(s, s->nerror == 2);
  cr_assert_eq(s->last_error, LT_EVERSION);
  /* A server-side message type from a client is refused. */
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_WELCOME;
  m.u.welcome.server_id = "me";
  cr_assert_eq(th_send(&s->c, &m, NULL, 0), 0);
  WAIT_FOR(s, s->nerror == 3);
  cr_assert_eq(s->last_error, LT_EPROTO);
  th_client_close(&s->c);
  free(s);
  cr_assert_eq(th_server_stop(&srv, SIGTERM, 15000), 0);
}

Test(protocol, bye_releases_values) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0);
  lt_oid_t x = oid(70);
  lt_instr_t i = instr(1, K_INC, &in0, 1, &x, 1, 0, NULL);
  execute(s, &i, 1, &pay, 1);
  WAIT_FOR(s, s->done[1].got);
  cr_assert_eq(s->load.values_held, 1);
  simple(s, LT_MSG_BYE, oid(0), 0);
  simple(s, LT_MSG_HEARTBEAT, oid(0), 3);
  WAIT_FOR(s, s->nerror == 1);
  cr_assert_eq(s->last_error, LT_ESTATE);
  cr_assert_eq(s->load.values_held, 0);
  stop(s);
  free(s);
}

Test(protocol, idle_session_dropped) {
  st_t *s = calloc(1, sizeof *s);
  const char *extra[] = {"--idle-timeout", "300", NULL};
  start(s, extra);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0);
  lt_oid_t x = oid(80);
  lt_instr_t i = instr(1, K_INC, &in0, 1, &x, 1, 0, NULL);
  execute(s, &i, 1, &pay, 1);
  WAIT_FOR(s, s->done[1].got);
  cr_assert_eq(s->load.values_held, 1);
  usleep(900 * 1000);
  simple(s, LT_MSG_HEARTBEAT, oid(0), 3);
  WAIT_FOR(s, s->nerror == 1);
  cr_assert_eq(s->last_error, LT_ESTATE, "the silent session was dropped");
  cr_assert_eq(s->load.values_held, 0, "with its values");
  stop(s);
  free(s);
}

/* SIGTERM: running kernels finish and are reported, queued and parked ones are answered
 * with LT_ESHUTDOWN, as are new instructions and parked fetches; then exit 0. */
Test(protocol, shutdown_drains) {
  st_t *s = calloc(1, sizeof *s);
  start(s, NULL);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in0 = inl(0), inp = ref(90);
  lt_oid_t o[5] = {oid(90), oid(91), oid(92), oid(93), oid(94)};
  lt_instr_t ins[5];
  for (int i = 0; i < 4; i++)
    ins[i] =
        instr((uint64_t)i + 1, K_SLEEP, &in0, 1, &o[i], 1, i == 0 ? 0 : LT_INSTR_RETURN, "800");
  ins[4] = instr(5, K_INC, &inp, 1, &o[4], 1, LT_INSTR_RETURN, NULL);
  execute(s, ins, 5, &pay, 1);
  wait_active(s, 2);
  cr_assert_eq(s->load.active + s->load.queued, 4);
  cr_assert_eq(s->load.parked, 1);
  simple(s, LT_MSG_FETCH, oid(90), 0); /* pending: parked */
  heartbeat(s, 2);
  kill(s->srv.pid, SIGTERM);
  WAIT_FOR(s, s->done[3].got && s->done[4].got && s->done[5].got && s->value[90].got);
  cr_assert_eq(s->done[3].status, LT_ESHUTDOWN);
  cr_assert_eq(s->done[4].status, LT_ESHUTDOWN);
  cr_assert_eq(s->done[5].status, LT_ESHUTDOWN);
  cr_assert_eq(s->value[90].status, LT_ESHUTDOWN);
  lt_input_t in1 = inl(0);
  lt_oid_t late = oid(95);
  lt_instr_t l = instr(6, K_INC, &in1, 1, &late, 1, LT_INSTR_RETURN, NULL);
  execute(s, &l, 1, &pay, 1);
  WAIT_FOR(s, s->done[6].got && s->done[1].got && s->done[2].got);
  cr_assert_eq(s->done[6].status, LT_ESHUTDOWN);
  cr_assert_eq(s->done[1].status, LT_OK, "%s", s->done[1].msg);
  cr_assert_eq(s->done[2].status, LT_OK, "%s", s->done[2].msg);
  th_client_close(&s->c);
  /* Already signaled: just reap. */
  int64_t t0 = th_now_ms();
  cr_assert_eq(th_server_stop(&s->srv, 0, 5000), 0);
  cr_assert_lt(th_now_ms() - t0, 4000);
  free(s);
}

Test(protocol, bad_modules_dir_exits_2) {
  const char *argv[] = {LT_TEST_SERVER, "--listen",         "tcp://127.0.0.1:0",
                        "--modules",    "/nonexistent/dir", NULL};
  char out[4096], err[8192];
  cr_assert_eq(th_run(argv, 10000, out, sizeof out, err, sizeof err), 2);
  cr_assert_not_null(strstr(err, "/nonexistent/dir"), "%s", err);
  cr_assert_not_null(strstr(err, "usage:"));
  cr_assert_null(strstr(out, "READY"));
}

Test(protocol, bad_endpoint_exits_2) {
  const char *argv[] = {LT_TEST_SERVER, "--listen", "bogus://x", NULL};
  char out[4096], err[8192];
  cr_assert_eq(th_run(argv, 10000, out, sizeof out, err, sizeof err), 2, "%s", err);
  cr_assert_not_null(strstr(err, "bogus://x"), "%s", err);
}

/* ---------------------------------------------------------------------------------------
 * Packing: one instruction of k members (lt_instr_t.pack), one task, one completion entry. */

/* pack_of makes a packed instruction of kernel `kernel` (then `more`) whose k members read
 * n inputs each from in[] and write out[] (its seq is member 0's output seq). */
static lt_instr_t pack_of(uint32_t kernel, lt_stage_t *more, uint32_t nmore, lt_input_t *in,
                          uint32_t n, lt_oid_t *out, uint32_t k, uint32_t flags,
                          const char *param) {
  lt_instr_t i = instr(out[0].seq, kernel, in, n * k, out, k, flags, param);
  i.more = more;
  i.nmore = nmore;
  i.pack = k;
  return i;
}

/* Inline int64 inputs of a pack: payload i holds v[i], input i reads it. */
typedef struct i64s {
  unsigned char buf[8][8];
  lt_bytes_t pay[8];
  lt_input_t in[8];
} i64s_t;

/* pack_start starts a server (with the flags `extra`, NULL-terminated, or none) and a
 * session, as start, and fills *p with the k values v. */
static st_t *pack_start(i64s_t *p, const int64_t *v, uint32_t k, const char *const *extra) {
  st_t *s = calloc(1, sizeof *s);
  start(s, extra);
  for (uint32_t i = 0; i < k; i++) {
    th_put_i64(p->buf[i], v[i]);
    p->pay[i] = (lt_bytes_t){p->buf[i], 8};
    p->in[i] = inl(i);
  }
  return s;
}

Test(protocol, pack_runs_its_members_in_order_as_one_task) {
  int64_t v[5] = {1, 2, -3, 40, 5};
  i64s_t x;
  st_t *s = pack_start(&x, v, 5, NULL);
  heartbeat(s, 1);
  uint64_t before = s->load.completed;
  lt_oid_t out[5] = {oid(200), oid(230), oid(210), oid(260), oid(201)};
  lt_stage_t dbl = {K_DBL, {NULL, 0}};
  lt_instr_t p = pack_of(K_INC, &dbl, 1, x.in, 1, out, 5, LT_INSTR_RETURN, NULL);
  execute(s, &p, 1, x.pay, 5);
  WAIT_FOR(s, s->ndone == 5);
  cr_assert_eq(s->ndone_msgs, 1);
  cr_assert_eq(s->done[200].pack, 5, "the members come as one entry");
  for (int i = 0; i < 5; i++) {
    const rec_t *d = &s->done[out[i].seq];
    cr_assert_eq(d->status, LT_OK, "member %d: %s", i, d->msg);
    cr_assert_eq(d->nout, 1);
    cr_assert_eq(d->v[0], (v[i] + 1) * 2, "member %d", i);
    cr_assert_eq(d->worker, s->done[200].worker, "one worker");
    if (i > 0) cr_assert_eq(d->pack, 0);
    if (i > 0) cr_assert_geq(d->start_us, s->done[out[i - 1].seq].start_us, "member order");
  }
  heartbeat(s, 2);
  cr_assert_eq(s->load.completed - before, 5, "completed counts tasks");
  cr_assert_eq(s->load.values_held, 0, "returned, not kept");

  /* Three sleeping members are one executor job: one worker of two busy, none queued. */
  lt_oid_t out2[3] = {oid(300), oid(301), oid(302)};
  lt_instr_t q = pack_of(K_SLEEP, NULL, 0, x.in, 1, out2, 3, LT_INSTR_RETURN, "150");
  execute(s, &q, 1, x.pay, 3);
  wait_active(s, 1);
  cr_assert_eq(s->load.queued, 0);
  WAIT_FOR(s, s->done[300].got && s->done[301].got && s->done[302].got);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(s->done[300 + i].v[0], v[i]);
  stop(s);
  free(s);
}

Test(protocol, pack_member_failure_fails_that_member_alone) {
  int64_t v[3] = {5, -3, 7};
  i64s_t x;
  st_t *s = pack_start(&x, v, 3, NULL);
  lt_oid_t out[3] = {oid(400), oid(401), oid(402)}, alone = oid(410);
  lt_instr_t ins[2] = {pack_of(K_NEG, NULL, 0, x.in, 1, out, 3, LT_INSTR_RETURN, NULL),
                       instr(410, K_NEG, &x.in[1], 1, &alone, 1, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 2, x.pay, 3);
  WAIT_FOR(s, s->ndone == 4);
  cr_assert_eq(s->done[400].pack, 3);
  cr_assert_eq(s->done[400].status, LT_OK, "%s", s->done[400].msg);
  cr_assert_eq(s->done[400].v[0], 5);
  cr_assert_eq(s->done[402].status, LT_OK, "%s", s->done[402].msg);
  cr_assert_eq(s->done[402].v[0], 7);
  cr_assert_eq(s->done[401].status, LT_EKERNEL);
  cr_assert_eq(s->done[401].nout, 0);
  cr_assert_eq(s->done[410].status, LT_EKERNEL);
  cr_assert_str_eq(s->done[401].msg, s->done[410].msg, "as the same task unpacked");
  cr_assert_not_null(strstr(s->done[401].msg, "negative input -3"), "%s", s->done[401].msg);
  stop(s);
  free(s);
}

Test(protocol, pack_reads_kept_outputs_by_ref_and_releases_them) {
  int64_t v[3] = {10, 20, 30};
  i64s_t x;
  st_t *s = pack_start(&x, v, 3, NULL);
  /* A pack that keeps its outputs, and one reading them crosswise while they are pending. */
  lt_oid_t made[3] = {oid(500), oid(501), oid(502)}, out[3] = {oid(510), oid(511), oid(512)};
  lt_input_t refs[3] = {ref(502), ref(500), ref(501)};
  lt_instr_t ins[2] = {
      pack_of(K_SLEEP, NULL, 0, x.in, 1, made, 3, 0, "100"),
      pack_of(K_INC, NULL, 0, refs, 1, out, 3, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS, NULL)};
  execute(s, ins, 2, x.pay, 3);
  wait_active(s, 1);
  cr_assert_eq(s->load.parked, 1, "the reader waits for its inputs, as one task");
  WAIT_FOR(s, s->ndone == 6);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(s->done[500 + i].status, LT_OK, "%s", s->done[500 + i].msg);
    cr_assert_eq(s->done[500 + i].frame[0], -1, "kept, not returned");
    cr_assert_eq(s->done[500 + i].size[0], 8);
  }
  cr_assert_eq(s->done[500].pack, 3);
  cr_assert_eq(s->done[510].pack, 3);
  cr_assert_eq(s->done[510].v[0], 31);
  cr_assert_eq(s->done[511].v[0], 11);
  cr_assert_eq(s->done[512].v[0], 21);
  heartbeat(s, 1);
  cr_assert_eq(s->load.values_held, 0, "each member released its input");
  stop(s);
  free(s);
}

Test(protocol, pack_member_past_the_deadline) {
  int64_t ms[4] = {20, 500, 20, 20};
  i64s_t x;
  st_t *s = pack_start(&x, ms, 4, NULL);
  lt_oid_t out[4] = {oid(600), oid(601), oid(602), oid(603)};
  lt_instr_t p = pack_of(K_BUSY, NULL, 0, x.in, 1, out, 4, LT_INSTR_RETURN, NULL);
  execute_within(s, &p, 1, x.pay, 4, 300);
  WAIT_FOR(s, s->ndone == 4);
  cr_assert_eq(s->done[600].pack, 4, "one entry");
  cr_assert_eq(s->done[600].status, LT_OK, "before it: its result, %s", s->done[600].msg);
  cr_assert_eq(s->done[600].v[0], 20);
  cr_assert_eq(s->done[601].status, LT_ETIMEDOUT, "%s", s->done[601].msg);
  cr_assert_not_null(strstr(s->done[601].msg, "testk:busy: ran longer than 300 ms"), "%s",
                     s->done[601].msg);
  for (int i = 2; i < 4; i++) {
    cr_assert_eq(s->done[600 + i].status, LT_ECANCELED, "after it: never ran, %s",
                 s->done[600 + i].msg);
    cr_assert_eq(s->done[600 + i].start_us, 0);
  }
  stop(s);
  free(s);
}

/* Under LT_INSTR_RELEASE_INPUTS a pack past its deadline drops the inputs of the members
 * that ran (the one that overran included: the client sees it finished), and keeps those of
 * the members after it, which the client places again; the orphaned kernel, returning later,
 * drops nothing more. The retry then reads them and drops them. */
Test(protocol, pack_past_the_deadline_keeps_the_inputs_of_members_not_run) {
  int64_t ms[4] = {20, 500, 20, 20};
  i64s_t x;
  st_t *s = pack_start(&x, ms, 4, NULL);
  lt_oid_t made[4] = {oid(700), oid(701), oid(702), oid(703)};
  lt_instr_t keep = pack_of(K_ECHO, NULL, 0, x.in, 1, made, 4, 0, NULL);
  execute(s, &keep, 1, x.pay, 4);
  WAIT_FOR(s, s->ndone == 4);
  lt_input_t refs[4] = {ref(700), ref(701), ref(702), ref(703)};
  lt_oid_t out[4] = {oid(710), oid(711), oid(712), oid(713)};
  lt_instr_t p =
      pack_of(K_BUSY, NULL, 0, refs, 1, out, 4, LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS, NULL);
  execute_within(s, &p, 1, NULL, 0, 300);
  WAIT_FOR(s, s->ndone == 8);
  cr_assert_eq(s->done[710].status, LT_OK, "%s", s->done[710].msg);
  cr_assert_eq(s->done[711].status, LT_ETIMEDOUT, "%s", s->done[711].msg);
  cr_assert_eq(s->done[712].status, LT_ECANCELED, "%s", s->done[712].msg);
  cr_assert_eq(s->done[713].status, LT_ECANCELED, "%s", s->done[713].msg);
  heartbeat(s, 1);
  cr_assert_eq(s->load.values_held, 2, "the inputs of the members not run are kept");
  usleep(400 * 1000); /* the orphaned member returns */
  heartbeat(s, 2);
  cr_assert_eq(s->load.values_held, 2, "the orphan drops nothing");
  lt_oid_t again[2] = {oid(720), oid(721)};
  lt_instr_t retry = pack_of(K_BUSY, NULL, 0, &refs[2], 1, again, 2,
                             LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS, NULL);
  execute(s, &retry, 1, NULL, 0);
  WAIT_FOR(s, s->done[720].got && s->done[721].got);
  cr_assert_eq(s->done[720].status, LT_OK, "%s", s->done[720].msg);
  cr_assert_eq(s->done[720].v[0], 20);
  cr_assert_eq(s->done[721].v[0], 20);
  heartbeat(s, 3);
  cr_assert_eq(s->load.values_held, 0);
  stop(s);
  free(s);
}

Test(protocol, pack_canceled_whole_by_its_seq) {
  int64_t v[3] = {1, 2, 3};
  i64s_t x;
  st_t *s = pack_start(&x, v, 3, NULL);
  lt_oid_t busy[2] = {oid(1), oid(2)}, out[3] = {oid(700), oid(701), oid(702)};
  lt_instr_t ins[3] = {instr(1, K_SLEEP, &x.in[0], 1, &busy[0], 1, LT_INSTR_RETURN, "400"),
                       instr(2, K_SLEEP, &x.in[0], 1, &busy[1], 1, LT_INSTR_RETURN, "400"),
                       pack_of(K_INC, NULL, 0, x.in, 1, out, 3, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 3, x.pay, 3);
  wait_active(s, 2);
  /* A member's own seq names nothing on the server. */
  simple(s, LT_MSG_CANCEL, oid(0), 701);
  heartbeat(s, 3);
  cr_assert(!s->done[700].got && !s->done[701].got && !s->done[702].got);
  simple(s, LT_MSG_CANCEL, oid(0), 700);
  WAIT_FOR(s, s->done[700].got && s->done[701].got && s->done[702].got);
  cr_assert_eq(s->done[700].pack, 3);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(s->done[700 + i].status, LT_ECANCELED, "%s", s->done[700 + i].msg);
  WAIT_FOR(s, s->done[1].got && s->done[2].got);
  /* Canceled outputs are not held: the same pack runs again under the same ids. */
  for (int i = 0; i < 3; i++)
    s->done[700 + i].got = false;
  execute(s, &ins[2], 1, x.pay, 3);
  WAIT_FOR(s, s->done[700].got && s->done[701].got && s->done[702].got);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(s->done[700 + i].status, LT_OK, "%s", s->done[700 + i].msg);
    cr_assert_eq(s->done[700 + i].v[0], v[i] + 1);
  }
  stop(s);
  free(s);
}

Test(protocol, pack_refused_answers_every_member) {
  int64_t v[2] = {1, 2};
  i64s_t x;
  st_t *s = pack_start(&x, v, 2, NULL);
  lt_oid_t out[2] = {{CLIENT + 1, 800}, {CLIENT + 1, 801}}; /* another session's ids */
  lt_instr_t p = pack_of(K_INC, NULL, 0, x.in, 1, out, 2, LT_INSTR_RETURN, NULL);
  execute(s, &p, 1, x.pay, 2);
  WAIT_FOR(s, s->done[800].got && s->done[801].got);
  cr_assert_eq(s->done[800].pack, 2);
  cr_assert_eq(s->done[800].status, LT_EAUTH, "%s", s->done[800].msg);
  cr_assert_eq(s->done[801].status, LT_EAUTH, "%s", s->done[801].msg);
  stop(s);
  free(s);
}

/* A pack counts as its k tasks against --max-queued: a pack of 3 and one of 2 are over a
 * quota of 4 (counted once each, packing would multiply the quota by up to LT_MAX_PACK). */
Test(protocol, pack_counts_its_members_against_the_queue_quota) {
  const char *extra[] = {"--max-queued", "4", NULL};
  int64_t v[3] = {1, 2, 3};
  i64s_t x;
  st_t *s = pack_start(&x, v, 3, extra);
  lt_oid_t first[3] = {oid(900), oid(901), oid(902)}, second[2] = {oid(910), oid(911)};
  lt_instr_t p1 = pack_of(K_SLEEP, NULL, 0, x.in, 1, first, 3, LT_INSTR_RETURN, "300");
  lt_instr_t p2 = pack_of(K_INC, NULL, 0, x.in, 1, second, 2, LT_INSTR_RETURN, NULL);
  execute(s, &p1, 1, x.pay, 3);
  wait_active(s, 1);
  execute(s, &p2, 1, x.pay, 2);
  WAIT_FOR(s, s->done[910].got && s->done[911].got && s->done[902].got);
  cr_assert_eq(s->done[910].status, LT_EQUOTA, "%s", s->done[910].msg);
  cr_assert_eq(s->done[911].status, LT_EQUOTA, "%s", s->done[911].msg);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(s->done[900 + i].status, LT_OK, "%s", s->done[900 + i].msg);
  stop(s);
  free(s);
}

Test(protocol, pack_member_input_failure_fails_that_member_alone) {
  int64_t v[1] = {1};
  i64s_t x;
  st_t *s = pack_start(&x, v, 1, NULL);
  lt_oid_t bad = oid(900), good = oid(901), out[4] = {oid(910), oid(911), oid(912), oid(913)};
  lt_oid_t alone[2] = {oid(920), oid(921)}, none[2] = {oid(930), oid(931)};
  /* Member 1 reads a value its producer failed (pending when the pack arrives), member 3 one
   * that does not exist; the same reads unpacked say what each member must say. */
  lt_input_t refs[4] = {ref(901), ref(900), ref(901), ref(999)}, missing[2] = {ref(999), ref(998)};
  lt_instr_t ins[6] = {instr(900, K_FAIL, x.in, 1, &bad, 1, 0, NULL),
                       instr(901, K_INC, x.in, 1, &good, 1, 0, NULL),
                       pack_of(K_INC, NULL, 0, refs, 1, out, 4, LT_INSTR_RETURN, NULL),
                       instr(920, K_INC, &refs[1], 1, &alone[0], 1, LT_INSTR_RETURN, NULL),
                       instr(921, K_INC, &refs[3], 1, &alone[1], 1, LT_INSTR_RETURN, NULL),
                       pack_of(K_INC, NULL, 0, missing, 1, none, 2, LT_INSTR_RETURN, NULL)};
  execute(s, ins, 6, x.pay, 1);
  WAIT_FOR(s, s->ndone == 10);
  cr_assert_eq(s->done[910].pack, 4);
  cr_assert_eq(s->done[910].status, LT_OK, "%s", s->done[910].msg);
  cr_assert_eq(s->done[910].v[0], 3);
  cr_assert_eq(s->done[912].status, LT_OK, "%s", s->done[912].msg);
  cr_assert_eq(s->done[912].v[0], 3);
  cr_assert_eq(s->done[911].status, LT_EKERNEL, "%s", s->done[911].msg);
  cr_assert_eq(s->done[911].status, s->done[920].status);
  cr_assert_str_eq(s->done[911].msg, s->done[920].msg);
  cr_assert_eq(s->done[913].status, LT_ENOENT, "%s", s->done[913].msg);
  cr_assert_str_eq(s->done[913].msg, s->done[921].msg);
  cr_assert_eq(s->done[911].start_us, 0, "never ran");
  /* Every member failed by its input: one entry, each its own failure. */
  cr_assert_eq(s->done[930].pack, 2);
  cr_assert_eq(s->done[930].status, LT_ENOENT);
  cr_assert_str_eq(s->done[930].msg, s->done[921].msg);
  cr_assert_eq(s->done[931].status, LT_ENOENT);
  cr_assert_str_neq(s->done[931].msg, s->done[930].msg, "names its own input");
  stop(s);
  free(s);
}
