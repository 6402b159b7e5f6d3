/* test_fuzz.c: a real lithium-server must survive whatever the network sends. Over a raw
 * DEALER: random bytes (deterministic seed), truncated headers, envelopes declaring huge
 * sizes and counts, too many frames, messages out of order, a wrong version, bad indices,
 * an unknown module; a client that vanishes mid-execute; an oversized frame. After each
 * barrage the server must still answer a proper hello/program/execute correctly, and on
 * SIGTERM exit 0. Also: bad flags exit 2 with the usage, --help/--version exit 0. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lithium/error.h>
#include "server/srv_helper.h"

#define CLIENT 0xfeedface01ULL

static uint64_t rng_state;

static uint64_t rng(void) {
  /* xorshift64*: deterministic across runs. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dULL;
}

/* replies counts the messages received until `timeout_ms` passes without one; every one
 * must decode and carry the load report. Error codes are tallied in *codes (may be NULL). */
static int replies(th_client_t *c, int want, int timeout_ms, int *nerr) {
  int n = 0;
  int64_t until = th_now_ms() + 20000;
  while (n < want && th_now_ms() < until) {
    th_rx_t r;
    int rc = th_recv(c, &r, timeout_ms);
    if (rc == LT_ETIMEDOUT) break;
    cr_assert_eq(rc, LT_OK, "the server sent something undecodable: %s", lt_strerror(rc));
    cr_assert(r.m.has_load);
    if (r.m.type == LT_MSG_ERROR && nerr != NULL) (*nerr)++;
    th_rx_clear(&r);
    n++;
  }
  return n;
}

/* expect_error receives one message and checks it is an ERROR with `code`. */
static void expect_error(th_client_t *c, int code, const char *what) {
  th_rx_t r;
  cr_assert_eq(th_recv(c, &r, 5000), LT_OK, "no answer to %s", what);
  cr_assert_eq(r.m.type, LT_MSG_ERROR, "%s: got %s", what, lt__msg_type_name(r.m.type));
  if (code != 0)
    cr_assert_eq(r.m.u.error.code, code, "%s: code %d (%s)", what, r.m.u.error.code,
                 r.m.u.error.message);
  else
    cr_assert_lt(r.m.u.error.code, 0);
  th_rx_clear(&r);
}

static void send_execute(th_client_t *c, lt_instr_t *ins, uint32_t n, const lt_bytes_t *pay,
                         uint32_t np) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = n;
  m.u.execute.instrs = ins;
  cr_assert_eq(th_send(c, &m, pay, np), LT_OK);
}

/* proper_run does hello/program(testk:inc)/execute of `n` instructions with inline int64
 * inputs and RETURN, and checks every result is input + 1. */
static void proper_run(th_client_t *c, uint64_t client, int n) {
  cr_assert_eq(th_hello_ok(c, client), 0, "no welcome");
  const char *k[] = {"testk:inc"};
  cr_assert_eq(th_program(c, k, 1), 0);
  lt_instr_t *ins = calloc((size_t)n, sizeof *ins);
  lt_input_t *in = calloc((size_t)n, sizeof *in);
  lt_oid_t *out = calloc((size_t)n, sizeof *out);
  lt_bytes_t *pay = calloc((size_t)n, sizeof *pay);
  unsigned char(*val)[8] = calloc((size_t)n, 8);
  for (int i = 0; i < n; i++) {
    th_put_i64(val[i], (int64_t)(rng() >> 1) - (INT64_MAX / 2));
    pay[i] = (lt_bytes_t){val[i], 8};
    in[i] = (lt_input_t){.kind = LT_INPUT_INLINE, .frame = (uint32_t)i, .holder = ""};
    out[i] = (lt_oid_t){client, 1000 + (uint64_t)i};
    ins[i] = (lt_instr_t){.seq = (uint64_t)i,
                          .kernel = 0,
                          .ninputs = 1,
                          .inputs = &in[i],
                          .noutputs = 1,
                          .outputs = &out[i],
                          .flags = LT_INSTR_RETURN};
  }
  send_execute(c, ins, (uint32_t)n, pay, (uint32_t)n);
  bool *seen = calloc((size_t)n, sizeof *seen);
  int got = 0;
  int64_t until = th_now_ms() + 20000;
  while (got < n) {
    cr_assert_lt(th_now_ms(), until, "only %d of %d completions", got, n);
    th_rx_t r;
    if (th_recv(c, &r, 1000) != LT_OK) continue;
    cr_assert_eq(r.m.type, LT_MSG_DONE, "got %s", lt__msg_type_name(r.m.type));
    for (uint32_t j = 0; j < r.m.u.done.ncompl; j++) {
      const lt_completion_t *cp = &r.m.u.done.compl [j];
      cr_assert_lt(cp->seq, (uint64_t)n);
      cr_assert(!seen[cp->seq]);
      seen[cp->seq] = true;
      cr_assert_eq(cp->status, LT_OK, "%s", cp->errmsg);
      cr_assert_eq(cp->noutputs, 1);
      cr_assert_geq(cp->outputs[0].frame, 0);
      const lt_bytes_t *f = &r.m.frames[cp->outputs[0].frame];
      cr_assert_eq(f->len, 8);
      cr_assert_eq(th_get_i64(f->data), (int64_t)((uint64_t)th_get_i64(val[cp->seq]) + 1));
      got++;
    }
    th_rx_clear(&r);
  }
  free(seen);
  free(ins);
  free(in);
  free(out);
  free(pay);
  free(val);
}

static size_t put_varint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (unsigned char)v;
  return n;
}

/* random_barrage sends N random messages. Without a session (`strict`) each must get
 * exactly one answer; with one, a random message may happen to be a valid request that
 * needs no answer (an empty RELEASE), so only most are counted. */
static void random_barrage(th_client_t *c, bool strict) {
  enum { N = 400 };
  for (int i = 0; i < N; i++) {
    lt_bytes_t fr[4];
    unsigned char buf[4][300];
    size_t nf = 1 + rng() % 4;
    for (size_t f = 0; f < nf; f++) {
      size_t len = rng() % 300;
      /* Some start like an Envelope body field, to get past the first byte. */
      for (size_t b = 0; b < len; b++)
        buf[f][b] = (unsigned char)rng();
      if (f == 0 && len > 0 && (i & 1)) buf[f][0] = (unsigned char)(((2 + rng() % 12) << 3) | 2);
      fr[f] = (lt_bytes_t){buf[f], len};
    }
    cr_assert_eq(th_send_raw(c, fr, nf), 0);
  }
  int nerr = 0;
  int n = replies(c, N, 3000, &nerr);
  if (strict) cr_assert_eq(n, N, "every message is answered once (got %d of %d)", n, N);
  cr_assert_geq(n, N - 10, "answers: %d of %d", n, N);
  cr_assert_geq(nerr, N - 10, "garbage is refused with errors (%d)", nerr);
}

/* truncated_headers sends a valid EXECUTE header cut at every length. Without a session
 * (`strict`) each cut is refused with an error; with one, a cut at a field boundary is a
 * valid shorter EXECUTE whose instructions are answered, so answers are only drained. */
static void truncated_headers(th_client_t *c, bool strict) {
  /* A valid EXECUTE header, cut at every length. */
  lt_input_t in = {.kind = LT_INPUT_REF, .id = {CLIENT, 7}, .holder = ""};
  lt_oid_t out[3] = {{CLIENT, 1}, {CLIENT, 2}, {CLIENT, 3}};
  lt_instr_t ins[2] = {
      {.seq = 1,
       .kernel = 0,
       .param = {"abcdef", 6},
       .ninputs = 1,
       .inputs = &in,
       .noutputs = 3,
       .outputs = out,
       .flags = 3},
      {.seq = 2, .kernel = 5, .ninputs = 1, .inputs = &in, .noutputs = 1, .outputs = out}};
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = 2;
  m.u.execute.instrs = ins;
  void *hdr;
  size_t len;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_OK);
  for (size_t cut = 0; cut < len; cut++) {
    lt_bytes_t f = {hdr, cut};
    cr_assert_eq(th_send_raw(c, &f, 1), 0);
  }
  int nerr = 0;
  int n = replies(c, strict ? (int)len : 1 << 20, strict ? 3000 : 500, &nerr);
  if (strict) {
    cr_assert_eq(n, (int)len);
    cr_assert_eq(nerr, (int)len, "undecodable, or \"hello first\"");
  }
  free(hdr);
}

static void huge_declarations(th_client_t *c) {
  unsigned char b[64];
  size_t n;
  struct {
    const char *what;
    size_t len;
    unsigned char bytes[64];
  } cases[8];
  int nc = 0;
  /* execute (field 5) declaring a 2^62-byte body. */
  n = 0;
  b[n++] = (5 << 3) | 2;
  n += put_varint(b + n, (uint64_t)1 << 62);
  cases[nc].what = "huge body";
  memcpy(cases[nc].bytes, b, n);
  cases[nc++].len = n;
  /* execute { instrs (field 1) declaring 2^31 bytes } inside a small execute. */
  n = 0;
  b[n++] = (5 << 3) | 2;
  b[n++] = 6;
  b[n++] = (1 << 3) | 2;
  n += put_varint(b + n, (uint64_t)1 << 31);
  cases[nc].what = "huge instr";
  memcpy(cases[nc].bytes, b, n);
  cases[nc++].len = n;
  /* cancel { seqs packed, 2^40 bytes } */
  n = 0;
  b[n++] = (10 << 3) | 2;
  b[n++] = 7;
  b[n++] = (1 << 3) | 2;
  n += put_varint(b + n, (uint64_t)1 << 40);
  cases[nc].what = "huge packed count";
  memcpy(cases[nc].bytes, b, n);
  cases[nc++].len = n;
  /* hello { name: string of 0xffffffff bytes } */
  n = 0;
  b[n++] = (2 << 3) | 2;
  b[n++] = 6;
  b[n++] = (3 << 3) | 2;
  n += put_varint(b + n, 0xffffffffu);
  cases[nc].what = "huge string";
  memcpy(cases[nc].bytes, b, n);
  cases[nc++].len = n;
  /* A varint that never ends. */
  memset(b, 0xff, 20);
  b[0] = (11 << 3) | 0;
  cases[nc].what = "endless varint";
  memcpy(cases[nc].bytes, b, 20);
  cases[nc++].len = 20;
  /* Groups and wire types protobuf 3 does not have. */
  b[0] = (5 << 3) | 3;
  b[1] = (5 << 3) | 4;
  cases[nc].what = "group";
  memcpy(cases[nc].bytes, b, 2);
  cases[nc++].len = 2;
  b[0] = (6 << 3) | 7;
  cases[nc].what = "wire type 7";
  memcpy(cases[nc].bytes, b, 1);
  cases[nc++].len = 1;
  for (int i = 0; i < nc; i++) {
    lt_bytes_t f = {cases[i].bytes, cases[i].len};
    cr_assert_eq(th_send_raw(c, &f, 1), 0);
    expect_error(c, 0, cases[i].what);
  }
}

static void too_many_frames(th_client_t *c) {
  enum { NF = 5000 };
  lt_bytes_t *fr = calloc(NF, sizeof *fr);
  for (int i = 0; i < NF; i++)
    fr[i] = (lt_bytes_t){"x", 1};
  cr_assert_eq(th_send_raw(c, fr, NF), 0);
  free(fr);
  expect_error(c, LT_ETOOBIG, "5000 frames");
}

/* The protocol-level refusals a client can provoke, in order. */
static void out_of_order(th_client_t *c) {
  lt_instr_t i = {.seq = 1, .kernel = 0};
  send_execute(c, &i, 1, NULL, 0);
  expect_error(c, LT_ESTATE, "execute before hello");
  cr_assert_eq(th_hello(c, CLIENT, 99), 0);
  expect_error(c, LT_EVERSION, "wrong version");

  cr_assert_eq(th_hello_ok(c, CLIENT), 0);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_FETCH;
  m.u.fetch.id = (lt_oid_t){CLIENT, 424242};
  cr_assert_eq(th_send(c, &m, NULL, 0), 0);
  th_rx_t r;
  cr_assert_eq(th_recv(c, &r, 5000), 0);
  cr_assert_eq(r.m.type, LT_MSG_VALUE);
  cr_assert_eq(r.m.u.value.status, LT_ENOENT);
  cr_assert_eq(r.m.u.value.frame, -1);
  cr_assert_neq(r.m.u.value.errmsg[0], '\0');
  th_rx_clear(&r);

  const char *k[] = {"testk:inc", "no_such_module:kern"};
  cr_assert_eq(th_program(c, k, 2), 0);
  unsigned char v[8] = {1};
  lt_bytes_t pay = {v, 8};
  lt_input_t in = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
  lt_oid_t o = {CLIENT, 1};
  lt_instr_t ins[2] = {{.seq = 10,
                        .kernel = 7,
                        .ninputs = 1,
                        .inputs = &in,
                        .noutputs = 1,
                        .outputs = &o,
                        .flags = LT_INSTR_RETURN},
                       {.seq = 11,
                        .kernel = 1,
                        .ninputs = 1,
                        .inputs = &in,
                        .noutputs = 1,
                        .outputs = &o,
                        .flags = LT_INSTR_RETURN}};
  send_execute(c, ins, 2, &pay, 1);
  cr_assert_eq(th_recv(c, &r, 5000), 0);
  cr_assert_eq(r.m.type, LT_MSG_DONE);
  cr_assert_eq(r.m.u.done.ncompl, 2);
  for (uint32_t j = 0; j < 2; j++) {
    const lt_completion_t *cp = &r.m.u.done.compl [j];
    if (cp->seq == 10) {
      cr_assert_eq(cp->status, LT_ENOKERNEL);
      cr_assert_not_null(strstr(cp->errmsg, "kernel index 7 not in program"), "%s", cp->errmsg);
    } else {
      cr_assert_eq(cp->seq, 11);
      cr_assert_eq(cp->status, LT_ENOMODULE);
      cr_assert_not_null(strstr(cp->errmsg, "no_such_module"), "%s", cp->errmsg);
    }
  }
  th_rx_clear(&r);

  /* An input naming payload frame 5 of a message that has one: the header is encoded as
   * if there were six frames, then sent with one. */
  lt_bytes_t six[6] = {{v, 8}, {v, 8}, {v, 8}, {v, 8}, {v, 8}, {v, 8}};
  lt_input_t bad = {.kind = LT_INPUT_INLINE, .frame = 5, .holder = ""};
  lt_instr_t bi = {.seq = 12,
                   .kernel = 0,
                   .ninputs = 1,
                   .inputs = &bad,
                   .noutputs = 1,
                   .outputs = &o,
                   .flags = LT_INSTR_RETURN};
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &bi;
  m.nframes = 6;
  m.frames = six;
  void *hdr;
  size_t len;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_OK);
  lt_bytes_t fr[2] = {{hdr, len}, {v, 8}};
  cr_assert_eq(th_send_raw(c, fr, 2), 0);
  free(hdr);
  expect_error(c, LT_EPROTO, "frame index out of range");
}

Test(e2e_fuzz, server_survives_hostile_input) {
  rng_state = 0x9e3779b97f4a7c15ULL;
  th_server_t srv;
  const char *args[] = {
      "--listen", "tcp://127.0.0.1:0", "--modules", LT_TEST_MODULES, "--threads", "2", NULL};
  cr_assert_eq(th_server_start(&srv, args, 10000), 0, "no READY line");
  th_client_t c;
  cr_assert_eq(th_client_open(&c, srv.endpoint), 0);

  random_barrage(&c, true);
  truncated_headers(&c, true);
  huge_declarations(&c);
  too_many_frames(&c);
  out_of_order(&c);
  /* With a session open, garbage and cut headers again: nothing may break it. */
  truncated_headers(&c, false);
  random_barrage(&c, false);

  proper_run(&c, CLIENT, 100);

  /* A second client sends work and vanishes at once; the first is still served. */
  th_client_t gone;
  cr_assert_eq(th_client_open(&gone, srv.endpoint), 0);
  cr_assert_eq(th_hello_ok(&gone, CLIENT + 1), 0);
  const char *k[] = {"testk:sleep"};
  cr_assert_eq(th_program(&gone, k, 1), 0);
  unsigned char v[8] = {0};
  lt_bytes_t pay = {v, 8};
  lt_input_t in = {.kind = LT_INPUT_INLINE, .frame = 0, .holder = ""};
  lt_oid_t o = {CLIENT + 1, 1};
  lt_instr_t ins[4];
  for (int i = 0; i < 4; i++)
    ins[i] = (lt_instr_t){.seq = (uint64_t)i,
                          .kernel = 0,
                          .param = {"100", 3},
                          .ninputs = 1,
                          .inputs = &in,
                          .noutputs = 1,
                          .outputs = &o,
                          .flags = LT_INSTR_RETURN};
  send_execute(&gone, ins, 4, &pay, 1);
  th_client_close(&gone);
  proper_run(&c, CLIENT + 2, 100);

  th_client_close(&c);
  int64_t t0 = th_now_ms();
  cr_assert_eq(th_server_stop(&srv, SIGTERM, 15000), 0, "exit 0 on SIGTERM");
  cr_assert_lt(th_now_ms() - t0, 5000);
}

/* A frame above --max-frame costs its sender the connection (ZMQ_MAXMSGSIZE), nobody else. */
Test(e2e_fuzz, oversized_frame) {
  rng_state = 12345;
  th_server_t srv;
  const char *extra[] = {"--max-frame", "64k", NULL};
  cr_assert_eq(th_server_start_default(&srv, extra), 0);
  th_client_t big, c;
  cr_assert_eq(th_client_open(&big, srv.endpoint), 0);
  cr_assert_eq(th_client_open(&c, srv.endpoint), 0);
  cr_assert_eq(th_hello_ok(&c, CLIENT), 0);
  size_t len = 1 << 20;
  char *blob = calloc(1, len);
  lt_bytes_t f[2] = {{"\x5a\x00", 2}, {blob, len}};
  cr_assert_eq(th_send_raw(&big, f, 2), 0);
  free(blob);
  /* Disconnected, not answered (an answer would be "hello first"). */
  th_rx_t r;
  cr_assert_eq(th_recv(&big, &r, 1000), LT_ETIMEDOUT);
  th_client_close(&big);
  proper_run(&c, CLIENT + 5, 20);
  th_client_close(&c);
  cr_assert_eq(th_server_stop(&srv, SIGTERM, 15000), 0);
}

Test(e2e_fuzz, command_line) {
  char out[8192], err[8192];
  const char *bad[][4] = {{"--no-such-flag", NULL},
                          {"--threads", "0", NULL},
                          {"--max-frame", "lots", NULL},
                          {"--listen", NULL}};
  for (int i = 0; i < 4; i++) {
    const char *argv[6] = {LT_TEST_SERVER};
    for (int j = 0; bad[i][j] != NULL; j++)
      argv[j + 1] = bad[i][j];
    cr_assert_eq(th_run(argv, 10000, out, sizeof out, err, sizeof err), 2, "case %d", i);
    cr_assert_not_null(strstr(err, "usage: lithium-server"), "case %d: %s", i, err);
    cr_assert_eq(out[0], '\0', "case %d printed on stdout: %s", i, out);
  }
  const char *help[] = {LT_TEST_SERVER, "--help", NULL};
  cr_assert_eq(th_run(help, 10000, out, sizeof out, err, sizeof err), 0);
  cr_assert_not_null(strstr(out, "usage: lithium-server"));
  cr_assert_eq(err[0], '\0');
  const char *version[] = {LT_TEST_SERVER, "--version", NULL};
  cr_assert_eq(th_run(version, 10000, out, sizeof out, err, sizeof err), 0);
  cr_assert_not_null(strstr(out, "lithium-server"));
}
