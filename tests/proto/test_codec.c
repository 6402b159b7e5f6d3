/* tests/proto/test_codec.c: the header codec (proto/codec.h) and lt_strerror. Round trips
 * of every body with every field set, hostile input (truncation, random and mutated bytes,
 * hand-built wire bytes that break one rule each) and the limits. Hand-built headers use a
 * tiny protobuf writer below, independent of the generated code. */
#include <criterion/criterion.h>

#include <lithium/error.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "wire.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* leak_check runs after every test, in the test's own process: Criterion ends that process
 * without LeakSanitizer's exit-time check, so the tests ask for it here. An assertion in a
 * fini hook does not fail the test, so a leak crashes it instead (LSan prints the report). */
static void leak_check(void) {
#if defined(__SANITIZE_ADDRESS__)
  if (__lsan_do_recoverable_leak_check() != 0) abort();
#endif
}

TestSuite(codec, .fini = leak_check);
TestSuite(error, .fini = leak_check);

/* ---------------------------------------------------------------------------------------
 * Helpers. */

/* A protobuf writer for hand-built headers. */
typedef struct pb {
  uint8_t b[8192];
  size_t n;
} pb;

static void pb_varint(pb *w, uint64_t v) {
  while (v >= 0x80) {
    cr_assert_lt(w->n, sizeof w->b);
    w->b[w->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  cr_assert_lt(w->n, sizeof w->b);
  w->b[w->n++] = (uint8_t)v;
}

static void pb_uint(pb *w, uint32_t fno, uint64_t v) {
  pb_varint(w, (uint64_t)fno << 3);
  pb_varint(w, v);
}

static void pb_bytes(pb *w, uint32_t fno, const void *data, size_t len) {
  pb_varint(w, ((uint64_t)fno << 3) | 2);
  pb_varint(w, len);
  cr_assert_leq(w->n + len, sizeof w->b);
  memcpy(w->b + w->n, data, len);
  w->n += len;
}

static void pb_sub(pb *w, uint32_t fno, const pb *inner) {
  pb_bytes(w, fno, inner->b, inner->n);
}

static void pb_oid(pb *w, uint32_t fno, uint64_t client, uint64_t seq) {
  pb o = {.n = 0};
  pb_varint(&o, (1u << 3) | 1);
  memcpy(o.b + o.n, &client, 8);
  o.n += 8;
  pb_varint(&o, (2u << 3) | 1);
  memcpy(o.b + o.n, &seq, 8);
  o.n += 8;
  pb_sub(w, fno, &o);
}

/* Envelope field numbers (lithium.proto): body = type + 1. */
static uint32_t body_fno(lt_msg_type_t t) {
  return (uint32_t)t + 1;
}

/* A deterministic generator (xorshift64*), so failures reproduce. */
static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static lt_codec_limits_t limits(void) {
  lt_codec_limits_t l;
  lt__codec_limits_default(&l);
  return l;
}

/* decode_hdr decodes header `h` with payloads `pay` (may be NULL). */
static int decode_hdr(lt_msg_t *m, const void *h, size_t hlen, const lt_bytes_t *pay, size_t npay,
                      const lt_codec_limits_t *lim) {
  lt_bytes_t fr[64];
  cr_assert_leq(npay + 1, 64);
  fr[0].data = h;
  fr[0].len = hlen;
  for (size_t i = 0; i < npay; i++)
    fr[i + 1] = pay[i];
  int rc = lt__msg_decode(m, fr, npay + 1, lim);
  /* msg->frames borrows fr: tests that keep the message use decode with their own array. */
  if (rc == 0) m->frames = npay ? (lt_bytes_t *)pay : NULL;
  return rc;
}

static bool str_eq(const char *a, const char *b) {
  return strcmp(a ? a : "", b ? b : "") == 0;
}

/* feq compares as the wire does: NaN equals NaN (a mutated header can carry one). */
static bool feq(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

static bool oid_eq(lt_oid_t a, lt_oid_t b) {
  return a.client == b.client && a.seq == b.seq;
}

static bool bytes_eq(lt_bytes_t a, lt_bytes_t b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

/* msg_equal compares two messages field by field; *why names the first difference. */
static bool msg_equal(const lt_msg_t *a, const lt_msg_t *b, const char **why) {
#define DIFF(cond, what)                                                                           \
  do {                                                                                             \
    if (cond) {                                                                                    \
      *why = what;                                                                                 \
      return false;                                                                                \
    }                                                                                              \
  } while (0)
  DIFF(a->type != b->type, "type");
  DIFF(a->has_load != b->has_load, "has_load");
  if (a->has_load) {
    const lt_load_t *x = &a->load, *y = &b->load;
    DIFF(x->active != y->active || x->queued != y->queued || x->parked != y->parked ||
             x->completed != y->completed || !feq(x->cpu, y->cpu) ||
             x->values_held != y->values_held || x->threads != y->threads,
         "load");
    DIFF(x->peer_in != y->peer_in || x->peer_out != y->peer_out, "load.peer");
    DIFF(x->shm_in != y->shm_in || x->shm_out != y->shm_out ||
             x->shm_values_in != y->shm_values_in || x->shm_values_out != y->shm_values_out ||
             x->shm_fallbacks != y->shm_fallbacks || x->shm_us != y->shm_us,
         "load.shm");
    DIFF(x->incarnation != y->incarnation || x->stopping != y->stopping, "load.incarnation");
  }
  DIFF(a->nframes != b->nframes, "nframes");
  for (uint32_t i = 0; i < a->nframes; i++)
    DIFF(!bytes_eq(a->frames[i], b->frames[i]), "frame");
  switch (a->type) {
  case LT_MSG_HELLO:
    DIFF(a->u.hello.version != b->u.hello.version, "hello.version");
    DIFF(a->u.hello.client_id != b->u.hello.client_id, "hello.client_id");
    DIFF(!str_eq(a->u.hello.name, b->u.hello.name), "hello.name");
    DIFF(a->u.hello.nmodules != b->u.hello.nmodules, "hello.nmodules");
    for (uint32_t i = 0; i < a->u.hello.nmodules; i++)
      DIFF(!str_eq(a->u.hello.modules[i], b->u.hello.modules[i]), "hello.modules");
    break;
  case LT_MSG_WELCOME:
    DIFF(a->u.welcome.version != b->u.welcome.version, "welcome.version");
    DIFF(!str_eq(a->u.welcome.server_id, b->u.welcome.server_id), "welcome.server_id");
    DIFF(a->u.welcome.cores != b->u.welcome.cores, "welcome.cores");
    DIFF(a->u.welcome.threads != b->u.welcome.threads, "welcome.threads");
    DIFF(!feq(a->u.welcome.speed, b->u.welcome.speed), "welcome.speed");
    DIFF(a->u.welcome.now_us != b->u.welcome.now_us, "welcome.now_us");
    DIFF(a->u.welcome.max_frame != b->u.welcome.max_frame, "welcome.max_frame");
    DIFF(a->u.welcome.incarnation != b->u.welcome.incarnation, "welcome.incarnation");
    DIFF(a->u.welcome.ncrashed != b->u.welcome.ncrashed, "welcome.ncrashed");
    for (uint32_t i = 0; i < a->u.welcome.ncrashed; i++)
      DIFF(a->u.welcome.crashed[i] != b->u.welcome.crashed[i], "welcome.crashed");
    DIFF(a->u.welcome.crash_signal != b->u.welcome.crash_signal ||
             a->u.welcome.crashed_incarnation != b->u.welcome.crashed_incarnation ||
             a->u.welcome.crash_culprit != b->u.welcome.crash_culprit,
         "welcome.crash");
    DIFF(a->u.welcome.accept_modules != b->u.welcome.accept_modules, "welcome.accept_modules");
    DIFF(!str_eq(a->u.welcome.same_host, b->u.welcome.same_host), "welcome.same_host");
    DIFF(a->u.welcome.nmodules != b->u.welcome.nmodules, "welcome.nmodules");
    for (uint32_t i = 0; i < a->u.welcome.nmodules; i++)
      DIFF(!str_eq(a->u.welcome.modules[i].name, b->u.welcome.modules[i].name) ||
               !str_eq(a->u.welcome.modules[i].sha256, b->u.welcome.modules[i].sha256),
           "welcome.modules");
    break;
  case LT_MSG_PROGRAM:
    DIFF(a->u.program.nkernels != b->u.program.nkernels, "program.nkernels");
    for (uint32_t i = 0; i < a->u.program.nkernels; i++)
      DIFF(!str_eq(a->u.program.kernels[i], b->u.program.kernels[i]), "program.kernels");
    break;
  case LT_MSG_EXECUTE:
    DIFF(a->u.execute.ninstrs != b->u.execute.ninstrs, "execute.ninstrs");
    DIFF(a->u.execute.max_active != b->u.execute.max_active, "execute.max_active");
    DIFF(a->u.execute.timeout_ms != b->u.execute.timeout_ms, "execute.timeout_ms");
    for (uint32_t i = 0; i < a->u.execute.ninstrs; i++) {
      const lt_instr_t *x = &a->u.execute.instrs[i], *y = &b->u.execute.instrs[i];
      DIFF(x->seq != y->seq || x->kernel != y->kernel || x->flags != y->flags, "instr");
      DIFF(x->op != y->op, "instr.op");
      DIFF(x->pack != y->pack, "instr.pack");
      DIFF(!bytes_eq(x->param, y->param), "instr.param");
      DIFF(x->nmore != y->nmore, "instr.nmore");
      for (uint32_t j = 0; j < x->nmore; j++)
        DIFF(x->more[j].kernel != y->more[j].kernel ||
                 !bytes_eq(x->more[j].param, y->more[j].param),
             "instr.more");
      DIFF(x->ninputs != y->ninputs || x->noutputs != y->noutputs, "instr counts");
      for (uint32_t j = 0; j < x->ninputs; j++) {
        const lt_input_t *p = &x->inputs[j], *q = &y->inputs[j];
        DIFF(p->kind != q->kind || p->size != q->size, "input");
        if (p->kind == LT_INPUT_INLINE)
          DIFF(p->frame != q->frame, "input.frame");
        else
          DIFF(!oid_eq(p->id, q->id) || !str_eq(p->holder, q->holder), "input.ref");
      }
      for (uint32_t j = 0; j < x->noutputs; j++)
        DIFF(!oid_eq(x->outputs[j], y->outputs[j]), "instr.outputs");
    }
    break;
  case LT_MSG_DONE:
    DIFF(a->u.done.ncompl != b->u.done.ncompl, "done.ncompl");
    DIFF(a->u.done.batch != b->u.done.batch, "done.batch");
    for (uint32_t i = 0; i < a->u.done.ncompl; i++) {
      const lt_completion_t *x = &a->u.done.compl [i], *y = &b->u.done.compl [i];
      DIFF(x->seq != y->seq || x->status != y->status || x->service_us != y->service_us,
           "completion");
      DIFF(!str_eq(x->errmsg, y->errmsg), "completion.errmsg");
      DIFF(x->answer != y->answer, "completion.answer");
      DIFF(x->pack != y->pack || x->cpu_us != y->cpu_us, "completion.pack/cpu_us");
      DIFF(x->worker != y->worker || x->start_us != y->start_us, "completion.worker/start_us");
      DIFF(x->noutputs != y->noutputs, "completion.noutputs");
      for (uint32_t j = 0; j < x->noutputs; j++)
        DIFF(x->outputs[j].size != y->outputs[j].size || x->outputs[j].frame != y->outputs[j].frame,
             "completion.outputs");
    }
    break;
  case LT_MSG_FETCH:
    DIFF(!oid_eq(a->u.fetch.id, b->u.fetch.id), "fetch.id");
    DIFF(a->u.fetch.release != b->u.fetch.release, "fetch.release");
    DIFF(a->u.fetch.secret != b->u.fetch.secret, "fetch.secret");
    DIFF(a->u.fetch.max_frame != b->u.fetch.max_frame, "fetch.max_frame");
    DIFF(a->u.fetch.shm != b->u.fetch.shm, "fetch.shm");
    break;
  case LT_MSG_VALUE:
    DIFF(!oid_eq(a->u.value.id, b->u.value.id), "value.id");
    DIFF(a->u.value.status != b->u.value.status, "value.status");
    DIFF(!str_eq(a->u.value.errmsg, b->u.value.errmsg), "value.errmsg");
    DIFF(a->u.value.frame != b->u.value.frame, "value.frame");
    break;
  case LT_MSG_RELEASE:
    DIFF(a->u.release.nids != b->u.release.nids, "release.nids");
    for (uint32_t i = 0; i < a->u.release.nids; i++)
      DIFF(!oid_eq(a->u.release.ids[i], b->u.release.ids[i]), "release.ids");
    break;
  case LT_MSG_CANCEL:
    DIFF(a->u.cancel.nseqs != b->u.cancel.nseqs, "cancel.nseqs");
    for (uint32_t i = 0; i < a->u.cancel.nseqs; i++)
      DIFF(a->u.cancel.seqs[i] != b->u.cancel.seqs[i], "cancel.seqs");
    break;
  case LT_MSG_HEARTBEAT:
    DIFF(a->u.heartbeat.seq != b->u.heartbeat.seq, "heartbeat.seq");
    DIFF(a->u.heartbeat.now_us != b->u.heartbeat.now_us, "heartbeat.now_us");
    DIFF(a->u.heartbeat.draining != b->u.heartbeat.draining, "heartbeat.draining");
    DIFF(a->u.heartbeat.dones != b->u.heartbeat.dones, "heartbeat.dones");
    break;
  case LT_MSG_BYE:
    break;
  case LT_MSG_ERROR:
    DIFF(a->u.error.code != b->u.error.code, "error.code");
    DIFF(!str_eq(a->u.error.message, b->u.error.message), "error.message");
    break;
  case LT_MSG_LOST:
    DIFF(a->u.lost.nholders != b->u.lost.nholders, "lost.nholders");
    for (uint32_t i = 0; i < a->u.lost.nholders; i++)
      DIFF(!str_eq(a->u.lost.holders[i], b->u.lost.holders[i]), "lost.holders");
    break;
  case LT_MSG_STATUS:
    break;
  case LT_MSG_STATUS_REPLY: {
    const __typeof__(a->u.status_reply) *x = &a->u.status_reply, *y = &b->u.status_reply;
    DIFF(!str_eq(x->server_id, y->server_id) || !str_eq(x->version, y->version) ||
             !str_eq(x->endpoint, y->endpoint),
         "status_reply strings");
    DIFF(x->protocol != y->protocol || x->uptime_ms != y->uptime_ms || x->cores != y->cores ||
             !feq(x->speed, y->speed) || x->sessions != y->sessions ||
             x->value_bytes != y->value_bytes || x->draining != y->draining,
         "status_reply numbers");
    DIFF(x->nmodules != y->nmodules, "status_reply.nmodules");
    for (uint32_t i = 0; i < x->nmodules; i++)
      DIFF(!str_eq(x->modules[i].name, y->modules[i].name) ||
               !str_eq(x->modules[i].sha256, y->modules[i].sha256),
           "status_reply.modules");
    break;
  }
  case LT_MSG_MODULE:
    DIFF(!str_eq(a->u.module.name, b->u.module.name), "module.name");
    DIFF(!str_eq(a->u.module.sha256, b->u.module.sha256), "module.sha256");
    DIFF(a->u.module.size != b->u.module.size || a->u.module.frame != b->u.module.frame,
         "module.size/frame");
    break;
  default:
    DIFF(true, "unexpected type");
  }
  return true;
#undef DIFF
}

/* check_decoded asserts the invariants every successfully decoded message keeps. */
static void check_decoded(const lt_msg_t *m) {
  cr_assert(m->type > LT_MSG_NONE && m->type <= LT_MSG_LAST);
  cr_assert(m->priv != NULL);
  switch (m->type) {
  case LT_MSG_EXECUTE:
    for (uint32_t i = 0; i < m->u.execute.ninstrs; i++) {
      const lt_instr_t *in = &m->u.execute.instrs[i];
      cr_assert_leq(in->op, LT_OP_LAST);
      cr_assert((in->nmore == 0) == (in->more == NULL));
      for (uint32_t j = 0; j < in->nmore; j++)
        cr_assert(in->more[j].param.len == 0 || in->more[j].param.data != NULL);
      for (uint32_t j = 0; j < in->ninputs; j++) {
        cr_assert(in->inputs[j].holder != NULL);
        if (in->inputs[j].kind == LT_INPUT_INLINE)
          cr_assert_lt(in->inputs[j].frame, m->nframes);
        else
          cr_assert_eq(in->inputs[j].kind, LT_INPUT_REF);
      }
    }
    break;
  case LT_MSG_DONE:
    for (uint32_t i = 0; i < m->u.done.ncompl; i++) {
      cr_assert(m->u.done.compl [i].errmsg != NULL);
      cr_assert(m->u.done.compl [i].answer >= -1 && m->u.done.compl [i].answer <= 1);
      for (uint32_t j = 0; j < m->u.done.compl [i].noutputs; j++) {
        int32_t f = m->u.done.compl [i].outputs[j].frame;
        cr_assert(f == -1 || (f >= 0 && (uint32_t)f < m->nframes));
      }
    }
    break;
  case LT_MSG_VALUE:
    cr_assert(m->u.value.errmsg != NULL);
    cr_assert(m->u.value.frame == -1 ||
              (m->u.value.frame >= 0 && (uint32_t)m->u.value.frame < m->nframes));
    break;
  case LT_MSG_HELLO:
    cr_assert(m->u.hello.name != NULL);
    break;
  case LT_MSG_WELCOME:
    cr_assert(m->u.welcome.server_id != NULL);
    break;
  case LT_MSG_ERROR:
    cr_assert(m->u.error.message != NULL);
    break;
  case LT_MSG_PROGRAM:
    for (uint32_t i = 0; i < m->u.program.nkernels; i++)
      cr_assert(m->u.program.kernels[i] != NULL);
    break;
  default:
    break;
  }
}

/* ---------------------------------------------------------------------------------------
 * Sample messages with every field set. */

static const char param_bytes[] = {0, 1, 2, '\xff', '\0', 'x', '\x80', 0};
static char frame_a[] = "first payload";
static char frame_b[3] = {0, '\xfe', 0};
static char frame_c[] = "";
static lt_bytes_t sample_frames[3];
static const char *kernels[] = {"filters:blur", "filters:oil", "m\xc3\xa4p:\xe2\x82\xac", ""};
static lt_input_t inputs0[3];
static lt_input_t inputs1[1];
static lt_oid_t outs0[2] = {{1, 2}, {UINT64_MAX, 0}};
static lt_oid_t outs1[1] = {{0x0123456789abcdefull, 42}};
static lt_stage_t stages0[3] = {{5, {"\0\1", 2}}, {0, {NULL, 0}}, {UINT32_MAX, {"zz", 2}}};
static lt_stage_t stages2[1] = {{2, {"divide", 6}}};
static lt_instr_t instrs[3];
static uint64_t crashed_seqs[] = {65536, 1ull << 40};
static const char *lost_holders[] = {"tcp://127.0.0.1:5555", "tcp://[::1]:7"};
static lt_module_info_t status_modules[] = {
    {"testk", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, {"m", ""}};
static const char *hello_modules[] = {"filters", "m\xc3\xa4p", ""};
static lt_module_info_t welcome_modules[] = {
    {"filters", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
    {"missing", ""}};
#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
static lt_output_info_t oinfo0[3] = {{100, 0}, {1ull << 40, -1}, {0, 2}};
static lt_completion_t compls[3];
static lt_oid_t rel_ids[3] = {{1, 1}, {2, 2}, {UINT64_MAX, UINT64_MAX}};
static uint64_t cancel_seqs[4] = {0, 1, 1ull << 63, UINT64_MAX};

/* sample fills *m with a message of type t, every field set to something non-zero. */
static void sample(lt_msg_t *m, lt_msg_type_t t) {
  memset(m, 0, sizeof *m);
  m->type = t;
  sample_frames[0] = (lt_bytes_t){frame_a, sizeof frame_a - 1};
  sample_frames[1] = (lt_bytes_t){frame_b, sizeof frame_b};
  sample_frames[2] = (lt_bytes_t){frame_c, 0};
  m->has_load = true;
  m->load = (lt_load_t){3,     7,
                        11,    1ull << 35,
                        1.75f, 123456789012ull,
                        8,     1ull << 41,
                        99,    0x8badf00ddeadbeefull,
                        true,  5,
                        6,     7,
                        8,     9,
                        10};
  m->nframes = 3;
  m->frames = sample_frames;
  switch (t) {
  case LT_MSG_HELLO:
    m->has_load = false; /* client -> server messages carry no load report */
    m->u.hello.version = LT_PROTO_VERSION;
    m->u.hello.client_id = 0xfeedfacecafebeefull;
    m->u.hello.name = "client \xe6\x97\xa5\xe6\x9c\xac";
    m->u.hello.nmodules = 3;
    m->u.hello.modules = hello_modules;
    break;
  case LT_MSG_WELCOME:
    m->u.welcome.version = LT_PROTO_VERSION;
    m->u.welcome.server_id = "tcp://127.0.0.1:40001";
    m->u.welcome.cores = 64;
    m->u.welcome.threads = 128;
    m->u.welcome.speed = 3.14159265358979;
    m->u.welcome.now_us = 1ull << 52;
    m->u.welcome.max_frame = 1ull << 33;
    m->u.welcome.incarnation = 0xfedcba9876543210ull;
    m->u.welcome.ncrashed = 2;
    m->u.welcome.crashed = crashed_seqs;
    m->u.welcome.crash_signal = 6;
    m->u.welcome.crashed_incarnation = 0x0123456789abcdefull;
    m->u.welcome.crash_culprit = 1ull << 40;
    m->u.welcome.nmodules = 2;
    m->u.welcome.modules = welcome_modules;
    m->u.welcome.accept_modules = true;
    m->u.welcome.same_host = "0b1c:net:[4026531840] lithium-shm-1-ab";
    break;
  case LT_MSG_PROGRAM:
    m->u.program.nkernels = 4;
    m->u.program.kernels = kernels;
    break;
  case LT_MSG_EXECUTE:
    inputs0[0] = (lt_input_t){LT_INPUT_INLINE, 2, {0, 0}, "", 17};
    inputs0[1] = (lt_input_t){LT_INPUT_REF, 0, {99, 100}, "tcp://10.0.0.1:5555", 1ull << 33};
    inputs0[2] = (lt_input_t){LT_INPUT_REF, 0, {5, 6}, "", 0};
    inputs1[0] = (lt_input_t){LT_INPUT_INLINE, 0, {0, 0}, "", 0};
    instrs[0] = (lt_instr_t){.seq = 1ull << 50,
                             .op = LT_OP_SEQ,
                             .kernel = 3,
                             .param = {param_bytes, sizeof param_bytes},
                             .nmore = 3,
                             .more = stages0,
                             .ninputs = 3,
                             .inputs = inputs0,
                             .noutputs = 2,
                             .outputs = outs0,
                             .flags = LT_INSTR_RETURN | LT_INSTR_RELEASE_INPUTS | LT_INSTR_KEEP};
    instrs[1] = (lt_instr_t){.seq = 2,
                             .op = LT_OP_SPLIT,
                             .kernel = 0,
                             .ninputs = 1,
                             .inputs = inputs1,
                             .noutputs = 1,
                             .outputs = outs1,
                             .flags = LT_INSTR_KEEP};
    instrs[2] = (lt_instr_t){
        .seq = 3, .op = LT_OP_DCSTEP, .kernel = 1, .param = {"p", 1}, .nmore = 1, .more = stages2};
    m->u.execute.ninstrs = 3;
    m->u.execute.instrs = instrs;
    m->u.execute.max_active = 4000000000u;
    m->u.execute.timeout_ms = 30000;
    break;
  case LT_MSG_DONE:
    compls[0] = (lt_completion_t){.seq = 77,
                                  .status = LT_OK,
                                  .errmsg = "",
                                  .noutputs = 3,
                                  .outputs = oinfo0,
                                  .service_us = 123456,
                                  .answer = 0,
                                  .worker = LT_MAX_WORKERS - 1,
                                  .start_us = UINT64_MAX};
    compls[1] = (lt_completion_t){.seq = 78,
                                  .status = LT_EKERNEL,
                                  .errmsg = "kernel failed: \xc3\xa9",
                                  .service_us = 1,
                                  .answer = 1,
                                  .worker = 3,
                                  .start_us = 987654321};
    compls[2] = (lt_completion_t){.seq = 79, .status = LT_OK, .errmsg = "", .answer = -1};
    m->u.done.ncompl = 3;
    m->u.done.compl = compls;
    m->u.done.batch = 0x1234567890ull;
    break;
  case LT_MSG_FETCH:
    m->u.fetch.id = (lt_oid_t){0xa5a5a5a5a5a5a5a5ull, 9};
    m->u.fetch.release = true;
    m->u.fetch.secret = 0x5ec2e7ull;
    m->u.fetch.max_frame = 4096;
    m->u.fetch.shm = true;
    break;
  case LT_MSG_VALUE:
    m->u.value.id = (lt_oid_t){12, 13};
    m->u.value.status = LT_ENOENT;
    m->u.value.errmsg = "no such object";
    m->u.value.frame = 1;
    break;
  case LT_MSG_RELEASE:
    m->u.release.nids = 3;
    m->u.release.ids = rel_ids;
    break;
  case LT_MSG_CANCEL:
    m->u.cancel.nseqs = 4;
    m->u.cancel.seqs = cancel_seqs;
    break;
  case LT_MSG_HEARTBEAT:
    m->u.heartbeat.seq = 1234567;
    m->u.heartbeat.now_us = 7654321;
    m->u.heartbeat.draining = true;
    m->u.heartbeat.dones = 0x9876543210ull;
    break;
  case LT_MSG_BYE:
    break;
  case LT_MSG_ERROR:
    m->u.error.code = LT_EVERSION;
    m->u.error.message = "protocol version mismatch";
    break;
  case LT_MSG_LOST:
    m->has_load = false;
    m->u.lost.nholders = 2;
    m->u.lost.holders = lost_holders;
    break;
  case LT_MSG_STATUS:
    m->has_load = false;
    break;
  case LT_MSG_STATUS_REPLY:
    m->u.status_reply.server_id = "node-7 \xc3\xa9";
    m->u.status_reply.version = "0.1.0";
    m->u.status_reply.protocol = LT_PROTO_VERSION;
    m->u.status_reply.endpoint = "tcp://10.0.0.7:5555";
    m->u.status_reply.uptime_ms = UINT64_MAX;
    m->u.status_reply.cores = 64;
    m->u.status_reply.speed = 1.25;
    m->u.status_reply.sessions = 3;
    m->u.status_reply.value_bytes = (uint64_t)1 << 40;
    m->u.status_reply.draining = 2;
    m->u.status_reply.nmodules = 2;
    m->u.status_reply.modules = status_modules;
    break;
  case LT_MSG_MODULE:
    m->has_load = false;
    m->u.module.name = "filters";
    m->u.module.sha256 = SHA_EMPTY;
    m->u.module.size = sizeof frame_b;
    m->u.module.frame = 1;
    break;
  default:
    cr_assert_fail("no sample for %d", (int)t);
  }
}

static void encode_ok(const lt_msg_t *m, void **hdr, size_t *len) {
  int rc = lt__msg_encode(m, hdr, len);
  cr_assert_eq(rc, 0, "encode %s: %s", lt__msg_type_name(m->type), lt_strerror(rc));
  cr_assert(*hdr != NULL);
  cr_assert_gt(*len, 0);
}

/* roundtrip encodes *in, decodes it with the same payloads and compares. */
static void roundtrip(const lt_msg_t *in, const lt_codec_limits_t *lim) {
  void *hdr;
  size_t len;
  encode_ok(in, &hdr, &len);
  lt_bytes_t fr[8];
  cr_assert_leq(in->nframes + 1, 8);
  fr[0] = (lt_bytes_t){hdr, len};
  for (uint32_t i = 0; i < in->nframes; i++)
    fr[i + 1] = in->frames[i];
  lt_msg_t out;
  int rc = lt__msg_decode(&out, fr, in->nframes + 1, lim);
  cr_assert_eq(rc, 0, "decode %s: %s", lt__msg_type_name(in->type), lt_strerror(rc));
  const char *why = "";
  cr_assert(msg_equal(in, &out, &why), "%s: %s differs", lt__msg_type_name(in->type), why);
  if (in->nframes > 0)
    cr_assert_eq(out.frames, &fr[1], "payload frames must be borrowed, not copied");
  check_decoded(&out);
  lt__msg_clear(&out);
  cr_assert_eq(out.type, LT_MSG_NONE);
  cr_assert_null(out.priv);
  free(hdr);
}

/* ---------------------------------------------------------------------------------------
 * Round trips. */

Test(codec, roundtrip_every_body) {
  for (int t = LT_MSG_HELLO; t <= LT_MSG_LAST; t++) {
    lt_msg_t m;
    sample(&m, (lt_msg_type_t)t);
    roundtrip(&m, NULL);
    /* The same body without payloads and without a load report. */
    m.has_load = !m.has_load;
    if (t != LT_MSG_EXECUTE && t != LT_MSG_DONE && t != LT_MSG_VALUE && t != LT_MSG_MODULE) {
      m.nframes = 0;
      m.frames = NULL;
    }
    roundtrip(&m, NULL);
  }
}

Test(codec, roundtrip_zero_and_extreme_values) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_HEARTBEAT; /* all defaults: an empty body is still a body */
  roundtrip(&m, NULL);
  m.type = LT_MSG_BYE;
  roundtrip(&m, NULL);
  m.type = LT_MSG_VALUE; /* frame -1 (no value), negative status, NULL errmsg -> "" */
  m.u.value.frame = -1;
  m.u.value.status = INT32_MIN;
  roundtrip(&m, NULL);
  m.type = LT_MSG_WELCOME;
  m.u.welcome.speed = -0.0;
  m.u.welcome.version = UINT32_MAX;
  m.has_load = true;
  m.load.cpu = INFINITY;
  m.load.completed = UINT64_MAX;
  roundtrip(&m, NULL);
  m.type = LT_MSG_ERROR;
  m.u.error.code = INT32_MAX;
  m.u.error.message = NULL;
  m.has_load = false;
  roundtrip(&m, NULL);
}

Test(codec, decoded_strings_are_never_null) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_HELLO; /* name NULL: encoded as "" */
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, NULL, 0, NULL), 0);
  cr_assert_str_eq(out.u.hello.name, "");
  lt__msg_clear(&out);
  free(hdr);

  /* A REF input with no holder on the wire decodes as "" (the receiving server). */
  pb in = {.n = 0}, ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0};
  pb_uint(&in, 1, LT_INPUT_REF);
  pb_oid(&in, 3, 1, 2);
  pb_sub(&ins, 4, &in);
  pb_sub(&ex, 1, &ins);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_str_eq(out.u.execute.instrs[0].inputs[0].holder, "");
  cr_assert_eq(out.u.execute.instrs[0].inputs[0].id.seq, 2);
  lt__msg_clear(&out);
}

Test(codec, roundtrip_large_batches) {
  /* Enough instructions to need several arena chunks and own-chunk arrays. */
  enum { N = 3000 };
  lt_instr_t *ins = calloc(N, sizeof *ins);
  lt_input_t *inp = calloc(N * 3, sizeof *inp);
  lt_oid_t *outs = calloc(N * 2, sizeof *outs);
  lt_stage_t *st = calloc(N * 2, sizeof *st);
  char holder[] = "tcp://127.0.0.1:1234";
  static const uint8_t pbytes[17] = {0, 1, 2, 3, 255, 254, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0};
  for (uint32_t i = 0; i < N; i++) {
    for (uint32_t j = 0; j < 3; j++) {
      lt_input_t *x = &inp[i * 3 + j];
      x->kind = (i + j) % 2 ? LT_INPUT_REF : LT_INPUT_INLINE;
      x->frame = 0;
      x->id = (lt_oid_t){i, j};
      x->holder = (i + j) % 2 ? holder : "";
      x->size = i * j;
    }
    outs[i * 2] = (lt_oid_t){i, 1000000 + i};
    outs[i * 2 + 1] = (lt_oid_t){i, 2000000 + i};
    st[i * 2] = (lt_stage_t){i, {pbytes, i % 5}};
    st[i * 2 + 1] = (lt_stage_t){i + 1, {pbytes + 1, 3}};
    ins[i] = (lt_instr_t){.seq = i,
                          .op = i % 3,
                          .kernel = i % 7,
                          .param = {pbytes, i % 17},
                          .nmore = i % 3,
                          .more = i % 3 ? &st[i * 2] : NULL,
                          .ninputs = 3,
                          .inputs = &inp[i * 3],
                          .noutputs = 2,
                          .outputs = &outs[i * 2],
                          .flags = i % 8};
  }
  lt_bytes_t pay = {"x", 1};
  lt_msg_t m = {.type = LT_MSG_EXECUTE, .nframes = 1, .frames = &pay};
  m.u.execute.ninstrs = N;
  m.u.execute.instrs = ins;
  roundtrip(&m, NULL);

  lt_completion_t *c = calloc(N, sizeof *c);
  lt_output_info_t *oi = calloc(N, sizeof *oi);
  for (uint32_t i = 0; i < N; i++) {
    oi[i] = (lt_output_info_t){i, i % 2 ? -1 : 0};
    c[i] = (lt_completion_t){.seq = i,
                             .status = -(int32_t)(i % 20),
                             .errmsg = i % 3 ? "" : "e",
                             .noutputs = 1,
                             .outputs = &oi[i],
                             .service_us = i,
                             .answer = (int32_t)(i % 3) - 1};
  }
  lt_msg_t d = {.type = LT_MSG_DONE, .nframes = 1, .frames = &pay, .has_load = true};
  d.u.done.ncompl = N;
  d.u.done.compl = c;
  roundtrip(&d, NULL);

  lt_msg_t r = {.type = LT_MSG_RELEASE};
  r.u.release.nids = N * 2;
  r.u.release.ids = outs;
  roundtrip(&r, NULL);
  free(ins);
  free(inp);
  free(outs);
  free(st);
  free(c);
  free(oi);
}

/* ---------------------------------------------------------------------------------------
 * Hostile input. */

static bool acceptable(int rc) {
  return rc == 0 || rc == LT_EPROTO || rc == LT_ETOOBIG;
}

Test(codec, every_truncated_prefix_fails_or_differs) {
  for (int t = LT_MSG_HELLO; t <= LT_MSG_LAST; t++) {
    lt_msg_t m;
    sample(&m, (lt_msg_type_t)t);
    void *hdr;
    size_t len;
    encode_ok(&m, &hdr, &len);
    for (size_t cut = 0; cut < len; cut++) {
      /* A copy of exactly `cut` bytes, so ASan catches any read past the prefix. */
      uint8_t *p = malloc(cut ? cut : 1);
      memcpy(p, hdr, cut);
      lt_msg_t out;
      int rc = decode_hdr(&out, p, cut, m.frames, m.nframes, NULL);
      cr_assert(acceptable(rc), "%s cut %zu: %d", lt__msg_type_name(m.type), cut, rc);
      if (rc == 0) {
        const char *why = "";
        check_decoded(&out);
        cr_assert(!msg_equal(&m, &out, &why), "%s cut at %zu decodes as the whole",
                  lt__msg_type_name(m.type), cut);
        lt__msg_clear(&out);
      } else {
        cr_assert_eq(out.type, LT_MSG_NONE);
        cr_assert_null(out.priv);
      }
      free(p);
    }
    free(hdr);
  }
}

/* What the fuzzers got through the decoder, so that they are known to reach the newer
 * fields: instructions with a non-SEQ op, with stages, with an empty stage parameter, and
 * completions with an answer. */
static struct { int op, more, empty_param, answer, pack; } seen;

static void tally(const lt_msg_t *m) {
  if (m->type == LT_MSG_EXECUTE) {
    for (uint32_t i = 0; i < m->u.execute.ninstrs; i++) {
      const lt_instr_t *in = &m->u.execute.instrs[i];
      seen.op += in->op != LT_OP_SEQ;
      seen.more += in->nmore > 0;
      seen.pack += in->pack > 1;
      for (uint32_t j = 0; j < in->nmore; j++)
        seen.empty_param += in->more[j].param.len == 0;
    }
  } else if (m->type == LT_MSG_DONE) {
    for (uint32_t i = 0; i < m->u.done.ncompl; i++) {
      seen.answer += m->u.done.compl [i].answer != -1;
      seen.pack += m->u.done.compl [i].pack > 1;
    }
  }
}

/* fuzz_one decodes p[0..n) and, when it is accepted, checks that it re-encodes and decodes
 * to the same message. */
static int fuzz_one(const uint8_t *p, size_t n, const lt_bytes_t *pay, size_t npay,
                    const lt_codec_limits_t *lim) {
  lt_msg_t out;
  int rc = decode_hdr(&out, p, n, pay, npay, lim);
  cr_assert(acceptable(rc), "rc %d", rc);
  if (rc != 0) return rc;
  check_decoded(&out);
  tally(&out);
  void *h2;
  size_t l2;
  rc = lt__msg_encode(&out, &h2, &l2);
  cr_assert_eq(rc, 0, "a decoded message must re-encode: %s", lt_strerror(rc));
  lt_msg_t again;
  cr_assert_eq(decode_hdr(&again, h2, l2, pay, npay, lim), 0);
  const char *why = "";
  cr_assert(msg_equal(&out, &again, &why), "re-decoded %s differs: %s", lt__msg_type_name(out.type),
            why);
  lt__msg_clear(&again);
  lt__msg_clear(&out);
  free(h2);
  return 0;
}

Test(codec, random_garbage) {
  rng_state = 0x9e3779b97f4a7c15ull;
  lt_codec_limits_t lim = limits();
  lim.max_string = 64;
  lim.max_items = 50;
  lt_bytes_t pay[2] = {{"a", 1}, {"bc", 2}};
  int outcome[8] = {0};
  for (int i = 0; i < 20000; i++) {
    size_t n = rnd() % 200;
    uint8_t *p = malloc(n ? n : 1);
    for (size_t k = 0; k < n; k++)
      p[k] = (uint8_t)rnd();
    /* Half of them start like a real envelope, to get past the first tag. */
    if (n > 2 && (i & 1)) {
      p[0] = (uint8_t)((1 + rnd() % 13) << 3 | 2);
      p[1] = (uint8_t)(rnd() % (n - 1));
    }
    outcome[-fuzz_one(p, n, pay, rnd() % 3, &lim)]++;
    free(p);
  }
  cr_log_info("random: ok %d, eproto %d, etoobig %d", outcome[0], outcome[-LT_EPROTO],
              outcome[-LT_ETOOBIG]);
  cr_assert_gt(outcome[-LT_EPROTO], 10000);
}

/* gen_fields appends random but well-framed fields to *w (at most `cap` bytes): field
 * numbers 1..8 (every field of every message), every wire type, nested messages up to depth
 * 4, strings of any bytes, runs of one field. */
static void gen_fields(pb *w, int depth, size_t cap) {
  int nf = (int)(rnd() % 7);
  for (int f = 0; f < nf; f++) {
    uint32_t fno = 1 + (uint32_t)(rnd() % 8);
    int reps = rnd() % 6 == 0 ? 1 + (int)(rnd() % 80) : 1;
    unsigned kind = (unsigned)(rnd() % 5);
    for (int r = 0; r < reps; r++) {
      if (w->n + 160 > cap) return;
      uint64_t v = rnd();
      switch (kind) {
      case 0:
        pb_uint(w, fno, rnd() % 4 == 0 ? v : v % 4);
        break;
      case 1:
        pb_varint(w, ((uint64_t)fno << 3) | 1);
        memcpy(w->b + w->n, &v, 8);
        w->n += 8;
        break;
      case 2: {
        pb inner = {.n = 0};
        if (depth < 4) gen_fields(&inner, depth + 1, cap);
        if (w->n + inner.n + 16 > cap) return;
        pb_sub(w, fno, &inner);
        break;
      }
      case 3: {
        char str[100];
        size_t len = rnd() % 3 == 0 ? rnd() % 100 : rnd() % 8;
        bool binary = rnd() % 4 == 0;
        for (size_t k = 0; k < len; k++)
          str[k] = binary ? (char)rnd() : (char)('a' + rnd() % 26);
        pb_bytes(w, fno, str, len);
        break;
      }
      default:
        pb_varint(w, ((uint64_t)fno << 3) | 5);
        memcpy(w->b + w->n, &v, 4);
        w->n += 4;
        break;
      }
    }
  }
}

/* The bodies with nested repeated fields (Execute, Done) are too deep for gen_fields to get
 * right by chance, so gen_schema follows their schema: the wire kind of every field number
 * and the message kind of sub-messages. */
enum { K_VARINT = 0, K_I64, K_STR, K_BYTES, K_I32, K_SUB };
enum { S_OID, S_INPUT, S_STAGE, S_INSTR, S_EXECUTE, S_OUTINFO, S_COMPL, S_DONE };
typedef struct gschema {
  uint32_t nf;      /* highest field number */
  uint8_t kind[18]; /* by field number */
  uint8_t sub[18];  /* K_SUB: schema of the sub-message */
} gschema;
static const gschema schemas[] = {
    [S_OID] = {2, {0, K_I64, K_I64}, {0}},
    [S_INPUT] = {5, {0, K_VARINT, K_VARINT, K_SUB, K_STR, K_VARINT}, {0, 0, 0, S_OID}},
    [S_STAGE] = {2, {0, K_VARINT, K_BYTES}, {0}},
    [S_INSTR] = {12,
                 {0, K_VARINT, K_VARINT, K_BYTES, K_SUB, K_SUB, K_VARINT, K_VARINT, K_SUB, K_VARINT,
                  K_VARINT, K_VARINT, K_I64},
                 {0, 0, 0, 0, S_INPUT, S_OID, 0, 0, S_STAGE}},
    [S_EXECUTE] = {1, {0, K_SUB}, {0, S_INSTR}},
    [S_OUTINFO] = {2, {0, K_VARINT, K_VARINT}, {0}},
    [S_COMPL] = {17,
                 {0, K_VARINT, K_VARINT, K_STR, K_SUB, K_VARINT, K_VARINT, K_VARINT, K_VARINT,
                  K_VARINT, K_I64, K_VARINT, K_STR, K_VARINT, K_VARINT, K_VARINT, K_VARINT,
                  K_VARINT},
                 {0, 0, 0, 0, S_OUTINFO}},
    [S_DONE] = {1, {0, K_SUB}, {0, S_COMPL}},
};

/* gen_schema appends random fields of message kind `s` to *w (at most `cap` bytes): mostly
 * the right wire kind, small varints (so that op, answer, kind and frame indices are often
 * in range), empty and binary bytes, runs of repeated fields past max_items, now and then
 * an unknown field or a wrong wire type. */
static void gen_schema(pb *w, int s, size_t cap) {
  const gschema *g = &schemas[s];
  int nf = (int)(rnd() % 6);
  for (int f = 0; f < nf; f++) {
    /* Mostly one of the first 9 fields, so the older ones keep their share. */
    uint32_t span = g->nf > 9 && rnd() % 8 != 0 ? 9 : g->nf + 1;
    uint32_t fno = 1 + (uint32_t)(rnd() % span); /* g->nf + 1 is unknown */
    unsigned kind = fno <= g->nf ? g->kind[fno] : K_VARINT;
    int sub = kind == K_SUB ? g->sub[fno] : S_OID;
    if (rnd() % 40 == 0) kind = (unsigned)(rnd() % 6); /* the wrong wire type, maybe */
    int reps = kind == K_SUB && rnd() % 8 == 0 ? 1 + (int)(rnd() % 60) : 1 + (int)(rnd() % 2);
    for (int r = 0; r < reps; r++) {
      if (w->n + 160 > cap) return;
      uint64_t v = rnd();
      switch (kind) {
      case K_VARINT:
        pb_uint(w, fno, rnd() % 4 == 0 ? v : v % 4);
        break;
      case K_I64:
        pb_varint(w, ((uint64_t)fno << 3) | 1);
        memcpy(w->b + w->n, &v, 8);
        w->n += 8;
        break;
      case K_I32:
        pb_varint(w, ((uint64_t)fno << 3) | 5);
        memcpy(w->b + w->n, &v, 4);
        w->n += 4;
        break;
      case K_STR:
      case K_BYTES: {
        char str[16];
        size_t len = rnd() % 4 == 0 ? 0 : rnd() % sizeof str;
        bool binary = kind == K_BYTES || rnd() % 8 == 0;
        for (size_t k = 0; k < len; k++)
          str[k] = binary ? (char)rnd() : (char)('a' + rnd() % 26);
        pb_bytes(w, fno, str, len);
        break;
      }
      default: {
        pb inner = {.n = 0};
        gen_schema(&inner, sub, cap - w->n - 16);
        if (w->n + inner.n + 16 > cap) return;
        pb_sub(w, fno, &inner);
        break;
      }
      }
    }
  }
}

Test(codec, random_structured) {
  rng_state = 0xdeadbeef12345678ull;
  lt_codec_limits_t lim = limits();
  lim.max_string = 64;
  lim.max_items = 50;
  lt_bytes_t pay[3] = {{"a", 1}, {"bc", 2}, {"", 0}};
  int outcome[8] = {0};
  pb *env = malloc(sizeof *env);
  for (int i = 0; i < 20000; i++) {
    env->n = 0;
    if (rnd() % 2) {
      pb load = {.n = 0};
      gen_fields(&load, 3, 1000);
      pb_sub(env, 1, &load);
    }
    pb body = {.n = 0};
    uint32_t fno;
    if (rnd() % 3 == 0) {
      bool ex = rnd() % 2;
      gen_schema(&body, ex ? S_EXECUTE : S_DONE, 6000);
      fno = body_fno(ex ? LT_MSG_EXECUTE : LT_MSG_DONE);
    } else {
      gen_fields(&body, 1, 6000);
      fno = rnd() % 8 == 0 ? 1 + (uint32_t)(rnd() % 20) : 2 + (uint32_t)(rnd() % 12);
    }
    pb_sub(env, fno, &body);
    if (rnd() % 10 == 0) env->b[rnd() % env->n] ^= (uint8_t)(1u << (rnd() % 8));
    uint8_t *p = malloc(env->n); /* exact size, for ASan */
    memcpy(p, env->b, env->n);
    outcome[-fuzz_one(p, env->n, pay, rnd() % 4, &lim)]++;
    free(p);
  }
  free(env);
  cr_log_info("structured: ok %d, eproto %d, etoobig %d; op %d, more %d, empty %d, answer %d, "
              "pack %d",
              outcome[0], outcome[-LT_EPROTO], outcome[-LT_ETOOBIG], seen.op, seen.more,
              seen.empty_param, seen.answer, seen.pack);
  cr_assert_gt(seen.op, 50);
  cr_assert_gt(seen.more, 50);
  cr_assert_gt(seen.empty_param, 50);
  cr_assert_gt(seen.answer, 50);
  cr_assert_gt(outcome[0], 1000);
  cr_assert_gt(outcome[-LT_EPROTO], 1000);
  cr_assert_gt(outcome[-LT_ETOOBIG], 100);
}

Test(codec, mutated_valid_headers) {
  rng_state = 12345;
  int outcome[8] = {0};
  for (int t = LT_MSG_HELLO; t <= LT_MSG_LAST; t++) {
    lt_msg_t m;
    sample(&m, (lt_msg_type_t)t);
    void *hdr;
    size_t len;
    encode_ok(&m, &hdr, &len);
    for (int i = 0; i < 2000; i++) {
      uint8_t *p = malloc(len);
      memcpy(p, hdr, len);
      int flips = 1 + (int)(rnd() % 4);
      for (int f = 0; f < flips; f++) {
        size_t at = rnd() % len;
        if (rnd() % 2)
          p[at] ^= (uint8_t)(1u << (rnd() % 8));
        else
          p[at] = (uint8_t)rnd();
      }
      outcome[-fuzz_one(p, len, m.frames, m.nframes, NULL)]++;
      free(p);
    }
    free(hdr);
  }
  cr_log_info("mutated: ok %d, eproto %d, etoobig %d; op %d, more %d, empty %d, answer %d",
              outcome[0], outcome[-LT_EPROTO], outcome[-LT_ETOOBIG], seen.op, seen.more,
              seen.empty_param, seen.answer);
  cr_assert_gt(seen.op, 50);
  cr_assert_gt(seen.more, 50);
  cr_assert_gt(seen.empty_param, 50);
  cr_assert_gt(seen.answer, 50);
  cr_assert_gt(outcome[0], 1000);
  cr_assert_gt(outcome[-LT_EPROTO], 1000);
}

Test(codec, empty_envelope) {
  lt_msg_t out;
  uint8_t dummy = 0;
  cr_assert_eq(decode_hdr(&out, &dummy, 0, NULL, 0, NULL), LT_EPROTO);
  cr_assert_eq(decode_hdr(&out, NULL, 0, NULL, 0, NULL), LT_EPROTO);
  /* A load report but no body. */
  pb load = {.n = 0}, env = {.n = 0};
  pb_uint(&load, 1, 5);
  pb_sub(&env, 1, &load);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  /* Only a body this version does not know (field 50). */
  pb unk = {.n = 0};
  pb_sub(&unk, 50, &load);
  cr_assert_eq(decode_hdr(&out, unk.b, unk.n, NULL, 0, NULL), LT_EPROTO);
  /* No frames at all. */
  cr_assert_eq(lt__msg_decode(&out, NULL, 0, NULL), LT_EPROTO);
  cr_assert_eq(out.type, LT_MSG_NONE);
}

Test(codec, unknown_fields_are_skipped) {
  pb hb = {.n = 0}, env = {.n = 0};
  pb_uint(&hb, 1, 99);
  pb_uint(&hb, 7, 1); /* a field from a newer version */
  pb_sub(&env, body_fno(LT_MSG_HEARTBEAT), &hb);
  pb_bytes(&env, 40, "zz", 2);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_eq(out.type, LT_MSG_HEARTBEAT);
  cr_assert_eq(out.u.heartbeat.seq, 99);
  cr_assert_not(out.has_load);
  lt__msg_clear(&out);
}

Test(codec, oversized_header) {
  lt_msg_t m;
  sample(&m, LT_MSG_WELCOME);
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  lt_codec_limits_t lim = limits();
  lim.max_header = len;
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, m.frames, m.nframes, &lim), 0);
  lt__msg_clear(&out);
  lim.max_header = len - 1;
  cr_assert_eq(decode_hdr(&out, hdr, len, m.frames, m.nframes, &lim), LT_ETOOBIG);
  cr_assert_null(out.priv);
  free(hdr);
  /* The check comes before parsing: garbage over the limit is "too big", not "garbage". */
  uint8_t junk[64];
  memset(junk, 0xff, sizeof junk);
  lim.max_header = 63;
  cr_assert_eq(decode_hdr(&out, junk, sizeof junk, NULL, 0, &lim), LT_ETOOBIG);
}

Test(codec, too_many_and_oversize_frames) {
  lt_msg_t m;
  sample(&m, LT_MSG_HEARTBEAT);
  m.nframes = 0;
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  lt_bytes_t pay[5] = {{"a", 1}, {"bb", 2}, {"ccc", 3}, {"dddd", 4}, {"", 0}};
  lt_codec_limits_t lim = limits();
  lim.max_frames = 4;
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, pay, 4, &lim), 0);
  cr_assert_eq(out.nframes, 4);
  lt__msg_clear(&out);
  cr_assert_eq(decode_hdr(&out, hdr, len, pay, 5, &lim), LT_ETOOBIG);
  lim = limits();
  lim.max_frame = 3;
  cr_assert_eq(decode_hdr(&out, hdr, len, pay, 3, &lim), 0);
  lt__msg_clear(&out);
  cr_assert_eq(decode_hdr(&out, hdr, len, pay, 4, &lim), LT_ETOOBIG);
  cr_assert_eq(out.type, LT_MSG_NONE);
  free(hdr);
}

Test(codec, bad_frame_index) {
  /* Each sample refers to payload 2 (execute, done) or 1 (value): with fewer payloads the
   * same header is refused. */
  lt_msg_type_t types[] = {LT_MSG_EXECUTE, LT_MSG_DONE, LT_MSG_VALUE};
  for (size_t i = 0; i < 3; i++) {
    lt_msg_t m;
    sample(&m, types[i]);
    void *hdr;
    size_t len;
    encode_ok(&m, &hdr, &len);
    lt_msg_t out;
    uint32_t need = types[i] == LT_MSG_VALUE ? 2 : 3;
    cr_assert_eq(decode_hdr(&out, hdr, len, m.frames, need, NULL), 0);
    lt__msg_clear(&out);
    cr_assert_eq(decode_hdr(&out, hdr, len, m.frames, need - 1, NULL), LT_EPROTO, "%s",
                 lt__msg_type_name(types[i]));
    cr_assert_eq(decode_hdr(&out, hdr, len, NULL, 0, NULL), LT_EPROTO);
    free(hdr);
  }
  /* Value.frame and OutputInfo.frame below -1 (sint32 zigzag: -2 -> 3). */
  pb v = {.n = 0}, env = {.n = 0};
  pb_oid(&v, 1, 1, 1);
  pb_uint(&v, 4, 3);
  pb_sub(&env, body_fno(LT_MSG_VALUE), &v);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  pb oi = {.n = 0}, c = {.n = 0}, d = {.n = 0};
  env.n = 0;
  pb_uint(&oi, 2, 3);
  pb_sub(&c, 4, &oi);
  pb_sub(&d, 1, &c);
  pb_sub(&env, body_fno(LT_MSG_DONE), &d);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  /* A huge inline index. */
  pb in = {.n = 0}, ins = {.n = 0}, ex = {.n = 0};
  env.n = 0;
  pb_uint(&in, 1, LT_INPUT_INLINE);
  pb_uint(&in, 2, UINT32_MAX);
  pb_sub(&ins, 4, &in);
  pb_sub(&ex, 1, &ins);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  lt_bytes_t pay = {"x", 1};
  cr_assert_eq(decode_hdr(&out, env.b, env.n, &pay, 1, NULL), LT_EPROTO);
}

Test(codec, bad_input_kind_and_missing_oids) {
  lt_msg_t out;
  for (uint64_t kind = 0; kind < 4; kind++) {
    pb in = {.n = 0}, ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0};
    pb_uint(&in, 1, kind);
    pb_oid(&in, 3, 7, 8);
    pb_sub(&ins, 4, &in);
    pb_sub(&ex, 1, &ins);
    pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
    lt_bytes_t pay = {"x", 1};
    int rc = decode_hdr(&out, env.b, env.n, &pay, 1, NULL);
    if (kind <= 1) {
      cr_assert_eq(rc, 0);
      cr_assert_eq(out.u.execute.instrs[0].inputs[0].kind, (lt_input_kind_t)kind);
      lt__msg_clear(&out);
    } else {
      cr_assert_eq(rc, LT_EPROTO, "kind %d", (int)kind);
    }
  }
  /* REF without an oid; fetch and value without an id. */
  pb in = {.n = 0}, ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0}, empty = {.n = 0};
  pb_uint(&in, 1, LT_INPUT_REF);
  pb_sub(&ins, 4, &in);
  pb_sub(&ex, 1, &ins);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  env.n = 0;
  pb_sub(&env, body_fno(LT_MSG_FETCH), &empty);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  env.n = 0;
  pb_sub(&env, body_fno(LT_MSG_VALUE), &empty);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
}

/* count_over checks that `t` with n items decodes under max_items n and fails under n-1. */
static void count_over(const lt_msg_t *m, uint32_t n) {
  void *hdr;
  size_t len;
  encode_ok(m, &hdr, &len);
  lt_codec_limits_t lim = limits();
  lim.max_items = n;
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, m->frames, m->nframes, &lim), 0, "%s at limit",
               lt__msg_type_name(m->type));
  lt__msg_clear(&out);
  lim.max_items = n - 1;
  cr_assert_eq(decode_hdr(&out, hdr, len, m->frames, m->nframes, &lim), LT_ETOOBIG, "%s over limit",
               lt__msg_type_name(m->type));
  cr_assert_null(out.priv);
  free(hdr);
}

Test(codec, count_over_max_items) {
  lt_msg_t m;
  sample(&m, LT_MSG_PROGRAM); /* 4 kernels */
  count_over(&m, 4);
  sample(&m, LT_MSG_RELEASE); /* 3 ids */
  count_over(&m, 3);
  sample(&m, LT_MSG_CANCEL); /* 4 seqs, packed */
  count_over(&m, 4);
  sample(&m, LT_MSG_EXECUTE); /* 3 instrs, the first with 3 inputs, 2 outputs, 3 stages */
  count_over(&m, 3);
  sample(&m, LT_MSG_DONE); /* 3 completions, the first with 3 outputs */
  count_over(&m, 3);

  /* Inner counts alone: one instruction with 5 outputs, one completion with 5 outputs. */
  lt_oid_t ids[5] = {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}};
  lt_instr_t in = {.seq = 1, .noutputs = 5, .outputs = ids};
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &in;
  count_over(&m, 5);
  lt_output_info_t oi[5] = {{1, -1}, {2, -1}, {3, -1}, {4, -1}, {5, -1}};
  lt_completion_t c = {.seq = 1, .errmsg = "", .noutputs = 5, .outputs = oi};
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_DONE;
  m.u.done.ncompl = 1;
  m.u.done.compl = &c;
  count_over(&m, 5);

  /* Unpacked repeated seqs count too. */
  pb cn = {.n = 0}, env = {.n = 0};
  for (int i = 0; i < 6; i++)
    pb_uint(&cn, 1, (uint64_t)i + 1);
  pb_sub(&env, body_fno(LT_MSG_CANCEL), &cn);
  lt_codec_limits_t lim = limits();
  lim.max_items = 6;
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, &lim), 0);
  cr_assert_eq(out.u.cancel.nseqs, 6);
  cr_assert_eq(out.u.cancel.seqs[5], 6);
  lt__msg_clear(&out);
  lim.max_items = 5;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, &lim), LT_ETOOBIG);

  /* The same body twice in one envelope: the counts add up. */
  pb rel = {.n = 0};
  env.n = 0;
  pb_oid(&rel, 1, 1, 1);
  pb_oid(&rel, 1, 1, 2);
  pb_sub(&env, body_fno(LT_MSG_RELEASE), &rel);
  pb_sub(&env, body_fno(LT_MSG_RELEASE), &rel);
  lim.max_items = 3;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, &lim), LT_ETOOBIG);
}

/* ---------------------------------------------------------------------------------------
 * Instruction ops, further stages and condition answers. */

Test(codec, roundtrip_every_op_stages_answer) {
  /* Stage 1 has an empty parameter, so an empty Stage message travels too. */
  lt_stage_t st[3] = {{1, {"a", 1}}, {0, {NULL, 0}}, {7, {"\0x\0", 3}}};
  lt_oid_t out0 = {9, 1000};
  lt_input_t in = {LT_INPUT_INLINE, 0, {0, 0}, "", 1};
  lt_bytes_t pay = {"x", 1};
  lt_instr_t all[(LT_OP_LAST + 1) * 4 * 2];
  uint32_t n = 0;
  for (uint32_t op = LT_OP_SEQ; op <= LT_OP_LAST; op++)
    for (uint32_t nmore = 0; nmore <= 3; nmore++)
      for (int own = 0; own < 2; own++) {
        lt_instr_t *x = &all[n++];
        *x = (lt_instr_t){.seq = n,
                          .op = op,
                          .kernel = op + nmore,
                          .param = own ? (lt_bytes_t){"pp", 2} : (lt_bytes_t){NULL, 0},
                          .nmore = nmore,
                          .more = nmore ? st : NULL,
                          .ninputs = 1,
                          .inputs = &in,
                          .noutputs = 1,
                          .outputs = &out0};
        lt_msg_t m = {.type = LT_MSG_EXECUTE, .nframes = 1, .frames = &pay};
        m.u.execute.ninstrs = 1;
        m.u.execute.instrs = x;
        roundtrip(&m, NULL);
      }
  lt_msg_t m = {.type = LT_MSG_EXECUTE, .nframes = 1, .frames = &pay};
  m.u.execute.ninstrs = n;
  m.u.execute.instrs = all;
  roundtrip(&m, NULL);

  /* The decoded values themselves, not only their equality. */
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, &pay, 1, NULL), 0);
  const lt_instr_t *d = &out.u.execute.instrs[LT_OP_DCSTEP * 8 + 7]; /* 3 stages, own param */
  cr_assert_eq(d->op, LT_OP_DCSTEP);
  cr_assert_eq(d->nmore, 3);
  cr_assert_eq(d->more[0].kernel, 1);
  cr_assert_eq(d->more[1].kernel, 0);
  cr_assert_eq(d->more[1].param.len, 0);
  cr_assert_eq(d->more[2].kernel, 7);
  cr_assert_eq(d->more[2].param.len, 3);
  cr_assert_eq(memcmp(d->more[2].param.data, "\0x\0", 3), 0);
  cr_assert(d->more[2].param.data != st[2].param.data, "stage params live in the decoder");
  const lt_instr_t *z = &out.u.execute.instrs[0]; /* SEQ, no stages, no param */
  cr_assert_eq(z->op, LT_OP_SEQ);
  cr_assert_eq(z->nmore, 0);
  cr_assert_null(z->more);
  lt__msg_clear(&out);
  free(hdr);

  /* Every answer, with and without outputs, with success and failure. */
  lt_output_info_t oi[2] = {{10, 0}, {20, -1}};
  lt_completion_t cs[3 * 2 * 2];
  n = 0;
  for (int32_t answer = -1; answer <= 1; answer++)
    for (uint32_t nout = 0; nout <= 2; nout += 2)
      for (int fail = 0; fail < 2; fail++) {
        lt_completion_t *c = &cs[n++];
        *c = (lt_completion_t){.seq = n,
                               .status = fail ? LT_EKERNEL : LT_OK,
                               .errmsg = fail ? "no" : "",
                               .noutputs = nout,
                               .outputs = nout ? oi : NULL,
                               .service_us = n,
                               .answer = answer};
        lt_msg_t dm = {.type = LT_MSG_DONE, .nframes = 1, .frames = &pay, .has_load = true};
        dm.u.done.ncompl = 1;
        dm.u.done.compl = c;
        roundtrip(&dm, NULL);
      }
  lt_msg_t dm = {.type = LT_MSG_DONE, .nframes = 1, .frames = &pay};
  dm.u.done.ncompl = n;
  dm.u.done.compl = cs;
  roundtrip(&dm, NULL);
}

Test(codec, op_more_answer_wire_format) {
  /* Checked against the hand-built writer, independent of the generated code: Instr.op is
   * field 7, Instr.more field 8 with Stage {kernel 1, param 2}; Completion.answer field 6
   * with 0 = none (omitted), 1 = false, 2 = true. */
  lt_stage_t st[2] = {{4, {"ab", 2}}, {0, {NULL, 0}}};
  lt_instr_t in = {.seq = 1, .op = LT_OP_DCSTEP, .nmore = 2, .more = st};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &in;
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  pb s0 = {.n = 0}, s1 = {.n = 0}, ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0};
  pb_uint(&s0, 1, 4);
  pb_bytes(&s0, 2, "ab", 2);
  pb_uint(&ins, 1, 1);
  pb_uint(&ins, 7, LT_OP_DCSTEP);
  pb_sub(&ins, 8, &s0);
  pb_sub(&ins, 8, &s1);
  pb_sub(&ex, 1, &ins);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);

  for (int32_t answer = -1; answer <= 1; answer++) {
    lt_completion_t c = {.seq = 5, .errmsg = "", .answer = answer};
    lt_msg_t d = {.type = LT_MSG_DONE};
    d.u.done.ncompl = 1;
    d.u.done.compl = &c;
    encode_ok(&d, &hdr, &len);
    pb cp = {.n = 0}, dn = {.n = 0};
    env.n = 0;
    pb_uint(&cp, 1, 5);
    if (answer != -1) pb_uint(&cp, 6, (uint64_t)(answer + 1));
    pb_sub(&dn, 1, &cp);
    pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
    cr_assert_eq(len, env.n, "answer %d", answer);
    cr_assert_eq(memcmp(hdr, env.b, len), 0, "answer %d", answer);
    free(hdr);
  }
}

/* A MODULE names a module and its SHA-256 (64 lowercase hex digits) and carries its bytes
 * as the payload frame it names, of the size it announces, or none (frame -1). Welcome and
 * status entries carry a SHA-256 or "". Anything else is refused both ways. */
Test(codec, module_and_sha256_checked) {
  static char bytes[] = "\x7f"
                        "ELF...";
  lt_bytes_t pay = {bytes, sizeof bytes};
  lt_msg_t m = {.type = LT_MSG_MODULE, .nframes = 1, .frames = &pay};
  m.u.module.name = "img";
  m.u.module.sha256 = SHA_EMPTY;
  m.u.module.size = sizeof bytes;
  m.u.module.frame = 0;
  roundtrip(&m, NULL);
  /* Without its bytes: over the server's frame limit. */
  lt_msg_t none = m;
  none.nframes = 0;
  none.frames = NULL;
  none.u.module.frame = -1;
  none.u.module.size = (uint64_t)1 << 40;
  roundtrip(&none, NULL);
  void *hdr;
  size_t len;
  const char *bad_sha[] = {"", "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
                           "e3b0c4", SHA_EMPTY "0",
                           "g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
  for (size_t i = 0; i < sizeof bad_sha / sizeof bad_sha[0]; i++) {
    lt_msg_t x = m;
    x.u.module.sha256 = bad_sha[i];
    cr_assert_eq(lt__msg_encode(&x, &hdr, &len), LT_EINVAL, "%s", bad_sha[i]);
    /* The same on the wire is refused by the decoder. */
    pb b = {.n = 0}, env = {.n = 0};
    pb_bytes(&b, 1, "img", 3);
    pb_bytes(&b, 2, bad_sha[i], strlen(bad_sha[i]));
    pb_uint(&b, 3, sizeof bytes);
    pb_sub(&env, body_fno(LT_MSG_MODULE), &b);
    lt_msg_t out;
    cr_assert_eq(decode_hdr(&out, env.b, env.n, &pay, 1, NULL), LT_EPROTO, "%s", bad_sha[i]);
  }
  /* A size that is not the frame's, a frame that is not there, no name. */
  lt_msg_t x = m;
  x.u.module.size = 3;
  cr_assert_eq(lt__msg_encode(&x, &hdr, &len), LT_EINVAL);
  x = m;
  x.u.module.frame = 1;
  cr_assert_eq(lt__msg_encode(&x, &hdr, &len), LT_EINVAL);
  x = m;
  x.u.module.name = "";
  cr_assert_eq(lt__msg_encode(&x, &hdr, &len), LT_EINVAL);
  pb b = {.n = 0}, env = {.n = 0};
  pb_bytes(&b, 1, "img", 3);
  pb_bytes(&b, 2, SHA_EMPTY, 64);
  pb_uint(&b, 3, 5); /* the frame has 8 bytes */
  pb_sub(&env, body_fno(LT_MSG_MODULE), &b);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, &pay, 1, NULL), LT_EPROTO);
  /* Welcome entries: a SHA-256 or "", nothing else. */
  lt_msg_t w = {.type = LT_MSG_WELCOME};
  lt_module_info_t info[1] = {{"img", "not a hash"}};
  w.u.welcome.server_id = "s";
  w.u.welcome.nmodules = 1;
  w.u.welcome.modules = info;
  cr_assert_eq(lt__msg_encode(&w, &hdr, &len), LT_EINVAL);
  pb mi = {.n = 0}, wb = {.n = 0};
  env.n = 0;
  pb_bytes(&mi, 1, "img", 3);
  pb_bytes(&mi, 2, "abc", 3);
  pb_sub(&wb, 12, &mi);
  pb_sub(&env, body_fno(LT_MSG_WELCOME), &wb);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);
  info[0].sha256 = "";
  w.u.welcome.accept_modules = true;
  roundtrip(&w, NULL);
}

Test(codec, fetch_release_and_peer_bytes) {
  /* Fetch.release is field 2 (bool) and defaults to false; Load.peer_in and peer_out are
   * fields 8 and 9, omitted when zero. Checked against the hand-built writer. */
  for (int rel = 0; rel <= 1; rel++) {
    lt_msg_t m = {.type = LT_MSG_FETCH};
    m.u.fetch.id = (lt_oid_t){3, 4};
    m.u.fetch.release = rel;
    roundtrip(&m, NULL);
    void *hdr;
    size_t len;
    encode_ok(&m, &hdr, &len);
    pb f = {.n = 0}, env = {.n = 0};
    pb_oid(&f, 1, 3, 4);
    if (rel) pb_uint(&f, 2, 1);
    pb_sub(&env, body_fno(LT_MSG_FETCH), &f);
    cr_assert_eq(len, env.n, "release %d", rel);
    cr_assert_eq(memcmp(hdr, env.b, len), 0, "release %d", rel);
    free(hdr);
  }
  /* Any non-zero varint is true. */
  pb f = {.n = 0}, env = {.n = 0};
  pb_oid(&f, 1, 3, 4);
  pb_uint(&f, 2, 300);
  pb_sub(&env, body_fno(LT_MSG_FETCH), &f);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert(out.u.fetch.release);
  lt__msg_clear(&out);

  lt_msg_t h = {.type = LT_MSG_HEARTBEAT, .has_load = true};
  h.load.peer_in = 5;
  h.load.peer_out = UINT64_MAX;
  roundtrip(&h, NULL);
  void *hdr;
  size_t len;
  encode_ok(&h, &hdr, &len);
  pb load = {.n = 0}, hb = {.n = 0};
  env.n = 0;
  pb_uint(&load, 8, 5);
  pb_uint(&load, 9, UINT64_MAX);
  pb_sub(&env, 1, &load);
  pb_sub(&env, body_fno(LT_MSG_HEARTBEAT), &hb);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);
  /* An old peer's report (no fields 8 and 9) decodes as zero. */
  env.n = load.n = 0;
  pb_uint(&load, 6, 2);
  pb_sub(&env, 1, &load);
  pb_sub(&env, body_fno(LT_MSG_HEARTBEAT), &hb);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert(out.has_load);
  cr_assert_eq(out.load.values_held, 2);
  cr_assert_eq(out.load.peer_in, 0);
  cr_assert_eq(out.load.peer_out, 0);
  lt__msg_clear(&out);
}

Test(codec, trace_fields_wire_format) {
  /* The trace fields, against the hand-built writer: Completion.worker 7 and start_us 8,
   * Welcome.now_us 6, Heartbeat.now_us 2; all omitted when zero, so an old peer's messages
   * decode with zeros. */
  lt_completion_t c = {.seq = 5, .errmsg = "", .answer = -1, .worker = 2, .start_us = 1ull << 40};
  lt_msg_t d = {.type = LT_MSG_DONE};
  d.u.done.ncompl = 1;
  d.u.done.compl = &c;
  roundtrip(&d, NULL);
  void *hdr;
  size_t len;
  encode_ok(&d, &hdr, &len);
  pb cp = {.n = 0}, dn = {.n = 0}, env = {.n = 0};
  pb_uint(&cp, 1, 5);
  pb_uint(&cp, 7, 2);
  pb_uint(&cp, 8, 1ull << 40);
  pb_sub(&dn, 1, &cp);
  pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);

  lt_msg_t w = {.type = LT_MSG_WELCOME};
  w.u.welcome.server_id = "";
  w.u.welcome.now_us = 123456789;
  encode_ok(&w, &hdr, &len);
  pb wb = {.n = 0};
  env.n = 0;
  pb_uint(&wb, 6, 123456789);
  pb_sub(&env, body_fno(LT_MSG_WELCOME), &wb);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);

  lt_msg_t h = {.type = LT_MSG_HEARTBEAT};
  h.u.heartbeat.seq = 9;
  h.u.heartbeat.now_us = UINT64_MAX;
  encode_ok(&h, &hdr, &len);
  pb hb = {.n = 0};
  env.n = 0;
  pb_uint(&hb, 1, 9);
  pb_uint(&hb, 2, UINT64_MAX);
  pb_sub(&env, body_fno(LT_MSG_HEARTBEAT), &hb);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);

  /* Old peers: no trace fields decode as zero. */
  lt_msg_t out;
  cp.n = dn.n = env.n = 0;
  pb_uint(&cp, 1, 5);
  pb_uint(&cp, 5, 77);
  pb_sub(&dn, 1, &cp);
  pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_eq(out.u.done.compl [0].service_us, 77);
  cr_assert_eq(out.u.done.compl [0].worker, 0);
  cr_assert_eq(out.u.done.compl [0].start_us, 0);
  lt__msg_clear(&out);
  hb.n = env.n = 0;
  pb_uint(&hb, 1, 9);
  pb_sub(&env, body_fno(LT_MSG_HEARTBEAT), &hb);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_eq(out.u.heartbeat.seq, 9);
  cr_assert_eq(out.u.heartbeat.now_us, 0);
  lt__msg_clear(&out);
}

Test(codec, crash_culprit_wire_format) {
  /* Welcome.crash_culprit is fixed64 field 14, omitted when zero: an old server's welcome
   * decodes with no culprit (0: charge every listed instruction). */
  lt_msg_t w = {.type = LT_MSG_WELCOME};
  w.u.welcome.server_id = "";
  w.u.welcome.crash_culprit = 0x8877665544332211ull;
  roundtrip(&w, NULL);
  void *hdr;
  size_t len;
  encode_ok(&w, &hdr, &len);
  pb wb = {.n = 0}, env = {.n = 0};
  pb_varint(&wb, (14u << 3) | 1u);
  for (int i = 0; i < 8; i++)
    wb.b[wb.n++] = (unsigned char)(0x11 * (i + 1));
  pb_sub(&env, body_fno(LT_MSG_WELCOME), &wb);
  cr_assert_eq(len, env.n);
  cr_assert_eq(memcmp(hdr, env.b, len), 0);
  free(hdr);
  w.u.welcome.crash_culprit = UINT64_MAX;
  roundtrip(&w, NULL);

  lt_msg_t out;
  wb.n = env.n = 0;
  pb_uint(&wb, 10, 6);
  pb_sub(&env, body_fno(LT_MSG_WELCOME), &wb);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_eq(out.u.welcome.crash_signal, 6);
  cr_assert_eq(out.u.welcome.crash_culprit, 0);
  lt__msg_clear(&out);
}

Test(codec, bad_worker_rejected) {
  /* A worker index at or past LT_MAX_WORKERS is refused both ways. */
  static const uint64_t workers[] = {0, LT_MAX_WORKERS - 1, LT_MAX_WORKERS, UINT32_MAX};
  for (size_t i = 0; i < sizeof workers / sizeof *workers; i++) {
    pb cp = {.n = 0}, dn = {.n = 0}, env = {.n = 0};
    pb_uint(&cp, 1, 1);
    pb_uint(&cp, 7, workers[i]);
    pb_sub(&dn, 1, &cp);
    pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
    lt_msg_t out;
    int rc = decode_hdr(&out, env.b, env.n, NULL, 0, NULL);
    if (workers[i] < LT_MAX_WORKERS) {
      cr_assert_eq(rc, 0, "worker %llu", (unsigned long long)workers[i]);
      cr_assert_eq(out.u.done.compl [0].worker, workers[i]);
      lt__msg_clear(&out);
    } else {
      cr_assert_eq(rc, LT_EPROTO, "worker %llu", (unsigned long long)workers[i]);
    }
    lt_completion_t c = {.seq = 1, .errmsg = "", .answer = -1, .worker = (uint32_t)workers[i]};
    lt_msg_t d = {.type = LT_MSG_DONE};
    d.u.done.ncompl = 1;
    d.u.done.compl = &c;
    void *hdr = NULL;
    size_t len = 0;
    rc = lt__msg_encode(&d, &hdr, &len);
    cr_assert_eq(rc, workers[i] < LT_MAX_WORKERS ? 0 : LT_EINVAL, "worker %llu",
                 (unsigned long long)workers[i]);
    free(hdr);
  }
}

Test(codec, bad_op_and_answer_rejected) {
  lt_msg_t out;
  static const uint64_t ops[] = {0, 1, 2, 3, 4, 255, 1u << 20, UINT32_MAX};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    pb ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0};
    pb_uint(&ins, 1, 7);
    pb_uint(&ins, 7, ops[i]);
    pb_sub(&ex, 1, &ins);
    pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
    int rc = decode_hdr(&out, env.b, env.n, NULL, 0, NULL);
    if (ops[i] <= LT_OP_LAST) {
      cr_assert_eq(rc, 0, "op %llu", (unsigned long long)ops[i]);
      cr_assert_eq(out.u.execute.instrs[0].op, ops[i]);
      cr_assert_eq(out.u.execute.instrs[0].seq, 7);
      lt__msg_clear(&out);
    } else {
      cr_assert_eq(rc, LT_EPROTO, "op %llu", (unsigned long long)ops[i]);
      cr_assert_null(out.priv);
    }
  }
  /* A bad op in the second instruction of a batch fails the whole message. */
  pb good = {.n = 0}, bad = {.n = 0}, ex = {.n = 0}, env = {.n = 0};
  pb_uint(&good, 7, LT_OP_SPLIT);
  pb_uint(&bad, 7, LT_OP_LAST + 1);
  pb_sub(&ex, 1, &good);
  pb_sub(&ex, 1, &bad);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), LT_EPROTO);

  static const uint64_t answers[] = {0, 1, 2, 3, 100, UINT32_MAX};
  for (size_t i = 0; i < sizeof answers / sizeof *answers; i++) {
    pb cp = {.n = 0}, dn = {.n = 0};
    env.n = 0;
    pb_uint(&cp, 1, 9);
    pb_uint(&cp, 6, answers[i]);
    pb_sub(&dn, 1, &cp);
    pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
    int rc = decode_hdr(&out, env.b, env.n, NULL, 0, NULL);
    if (answers[i] <= 2) {
      cr_assert_eq(rc, 0, "answer %llu", (unsigned long long)answers[i]);
      cr_assert_eq(out.u.done.compl [0].answer, (int32_t)answers[i] - 1);
      lt__msg_clear(&out);
    } else {
      cr_assert_eq(rc, LT_EPROTO, "answer %llu", (unsigned long long)answers[i]);
      cr_assert_null(out.priv);
    }
  }
  /* A completion without the field has no answer. */
  pb cp = {.n = 0}, dn = {.n = 0};
  env.n = 0;
  pb_uint(&cp, 1, 9);
  pb_sub(&dn, 1, &cp);
  pb_sub(&env, body_fno(LT_MSG_DONE), &dn);
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, NULL), 0);
  cr_assert_eq(out.u.done.compl [0].answer, -1);
  lt__msg_clear(&out);

  /* Encoding refuses what decoding would refuse. */
  void *hdr = (void *)1;
  size_t len = 1;
  lt_msg_t m;
  static const uint32_t bad_ops[] = {LT_OP_LAST + 1, LT_OP_LAST + 2, UINT32_MAX};
  for (size_t i = 0; i < 3; i++) {
    sample(&m, LT_MSG_EXECUTE);
    instrs[2].op = bad_ops[i];
    cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL, "op %u", bad_ops[i]);
    cr_assert_null(hdr);
  }
  static const int32_t bad_answers[] = {-2, 2, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < 4; i++) {
    sample(&m, LT_MSG_DONE);
    compls[1].answer = bad_answers[i];
    cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL, "answer %d", bad_answers[i]);
    cr_assert_null(hdr);
  }
  sample(&m, LT_MSG_EXECUTE);
  instrs[0].more = NULL; /* nmore without stages */
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_EXECUTE);
  stages0[2].param.data = NULL; /* a stage parameter length without data */
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  stages0[2].param.data = "zz";
  sample(&m, LT_MSG_EXECUTE);
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), 0);
  free(hdr);
}

Test(codec, stage_count_limits) {
  /* One instruction with 5 stages. */
  lt_stage_t st[6] = {{1, {"a", 1}},  {2, {NULL, 0}}, {3, {"c", 1}},
                      {4, {NULL, 0}}, {5, {"e", 1}},  {6, {NULL, 0}}};
  lt_instr_t in = {.seq = 1, .nmore = 5, .more = st};
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = &in;
  count_over(&m, 5);

  /* The pre-scan itself counts them, before protobuf-c allocates anything. */
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  cr_assert_eq(lt__wire_prescan(hdr, len, 5), 0);
  cr_assert_eq(lt__wire_prescan(hdr, len, 4), LT_ETOOBIG);
  free(hdr);

  /* Each repeated field of an instruction has the limit of its own: 4 inputs, 4 outputs and
   * 4 stages pass under 4; and the limit is per instruction, not per batch. */
  lt_input_t ip[4];
  lt_oid_t op[4];
  for (int i = 0; i < 4; i++) {
    ip[i] = (lt_input_t){LT_INPUT_REF, 0, {1, (uint64_t)i}, "", 0};
    op[i] = (lt_oid_t){2, (uint64_t)i};
  }
  lt_instr_t two[2];
  for (int i = 0; i < 2; i++)
    two[i] = (lt_instr_t){.seq = (uint64_t)i,
                          .nmore = 4,
                          .more = st,
                          .ninputs = 4,
                          .inputs = ip,
                          .noutputs = 4,
                          .outputs = op};
  m.u.execute.ninstrs = 2;
  m.u.execute.instrs = two;
  count_over(&m, 4);
  two[1].nmore = 5; /* now the stages are the largest count */
  count_over(&m, 5);

  /* Hand-built: `more` six times, empty stages (all defaults) included. */
  pb ins = {.n = 0}, ex = {.n = 0}, env = {.n = 0}, stage = {.n = 0}, empty = {.n = 0};
  pb_uint(&stage, 1, 3);
  for (int i = 0; i < 6; i++)
    pb_sub(&ins, 8, i % 2 ? &stage : &empty);
  pb_sub(&ex, 1, &ins);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  lt_codec_limits_t lim = limits();
  lim.max_items = 6;
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, &lim), 0);
  cr_assert_eq(out.u.execute.instrs[0].nmore, 6);
  cr_assert_eq(out.u.execute.instrs[0].more[0].kernel, 0);
  cr_assert_eq(out.u.execute.instrs[0].more[0].param.len, 0);
  cr_assert_eq(out.u.execute.instrs[0].more[5].kernel, 3);
  lt__msg_clear(&out);
  lim.max_items = 5;
  cr_assert_eq(decode_hdr(&out, env.b, env.n, NULL, 0, &lim), LT_ETOOBIG);
  cr_assert_eq(lt__wire_prescan(env.b, env.n, 5), LT_ETOOBIG);
}

Test(codec, string_limits_and_utf8) {
  lt_codec_limits_t lim = limits();
  char *s = malloc(lim.max_string + 2);
  memset(s, 'a', lim.max_string + 1);
  s[lim.max_string] = '\0';
  lt_msg_t m = {.type = LT_MSG_ERROR};
  m.u.error.message = s;
  void *hdr;
  size_t len;
  lt_msg_t out;
  encode_ok(&m, &hdr, &len);
  cr_assert_eq(decode_hdr(&out, hdr, len, NULL, 0, NULL), 0);
  cr_assert_eq(strlen(out.u.error.message), lim.max_string);
  lt__msg_clear(&out);
  free(hdr);
  s[lim.max_string] = 'a';
  s[lim.max_string + 1] = '\0';
  encode_ok(&m, &hdr, &len);
  cr_assert_eq(decode_hdr(&out, hdr, len, NULL, 0, NULL), LT_ETOOBIG);
  free(hdr);
  free(s);

  /* A long holder inside an instruction and a long kernel name. */
  lt_msg_t p;
  sample(&p, LT_MSG_EXECUTE);
  lim.max_string = 18; /* "tcp://10.0.0.1:5555" is 19 bytes */
  encode_ok(&p, &hdr, &len);
  cr_assert_eq(decode_hdr(&out, hdr, len, p.frames, p.nframes, &lim), LT_ETOOBIG);
  lim.max_string = 19;
  cr_assert_eq(decode_hdr(&out, hdr, len, p.frames, p.nframes, &lim), 0);
  lt__msg_clear(&out);
  free(hdr);

  /* Invalid UTF-8 on the wire, in every string field. */
  static const char *const bad[] = {
      "\xff",   "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",        "\xf4\x90\x80\x80",
      "ok\xc3", "\xe2\x82", "\x80",         "\xf8\x88\x80\x80\x80"};
  static const char *const good[] = {"",
                                     "plain",
                                     "\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\xf4\x8f\xbf\xbf",
                                     "\xed\x9f\xbf"};
  for (int g = 0; g < 2; g++) {
    const char *const *set = g ? good : bad;
    size_t n = g ? sizeof good / sizeof *good : sizeof bad / sizeof *bad;
    for (size_t i = 0; i < n; i++) {
      size_t sl = strlen(set[i]);
      /* Error.message, Hello.name, Welcome.server_id, Program.kernels, Value.errmsg,
       * Completion.errmsg, Input.holder. */
      pb bodies[7] = {{.n = 0}};
      lt_msg_type_t bt[7] = {LT_MSG_ERROR, LT_MSG_HELLO, LT_MSG_WELCOME, LT_MSG_PROGRAM,
                             LT_MSG_VALUE, LT_MSG_DONE,  LT_MSG_EXECUTE};
      pb_bytes(&bodies[0], 2, set[i], sl);
      pb_bytes(&bodies[1], 3, set[i], sl);
      pb_bytes(&bodies[2], 2, set[i], sl);
      pb_bytes(&bodies[3], 1, set[i], sl);
      pb_oid(&bodies[4], 1, 1, 1);
      pb_uint(&bodies[4], 4, 1); /* frame -1 */
      pb_bytes(&bodies[4], 3, set[i], sl);
      pb cpl = {.n = 0}, in = {.n = 0}, instr = {.n = 0};
      pb_bytes(&cpl, 3, set[i], sl);
      pb_sub(&bodies[5], 1, &cpl);
      pb_uint(&in, 1, LT_INPUT_REF);
      pb_oid(&in, 3, 1, 1);
      pb_bytes(&in, 4, set[i], sl);
      pb_sub(&instr, 4, &in);
      pb_sub(&bodies[6], 1, &instr);
      for (int b = 0; b < 7; b++) {
        pb env = {.n = 0};
        pb_sub(&env, body_fno(bt[b]), &bodies[b]);
        int rc = decode_hdr(&out, env.b, env.n, NULL, 0, NULL);
        cr_assert_eq(rc, g ? 0 : LT_EPROTO, "%s string %zu of set %d: %d", lt__msg_type_name(bt[b]),
                     i, g, rc);
        if (rc == 0) lt__msg_clear(&out);
      }
    }
  }
}

Test(codec, encode_rejects_inconsistent_messages) {
  void *hdr = (void *)1;
  size_t len = 1;
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL); /* LT_MSG_NONE */
  cr_assert_null(hdr);
  cr_assert_eq(len, 0);
  m.type = (lt_msg_type_t)99;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  cr_assert_eq(lt__msg_encode(NULL, &hdr, &len), LT_EINVAL);

  /* Frame indices against nframes. */
  sample(&m, LT_MSG_EXECUTE);
  m.nframes = 2; /* inputs0[0] refers to payload 2 */
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_DONE);
  m.nframes = 2; /* oinfo0[2] refers to payload 2 */
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_VALUE);
  m.nframes = 1;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  m.nframes = 3;
  m.u.value.frame = -2;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  m.u.value.frame = 0;
  m.frames = NULL; /* nframes without frames */
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);

  /* Bad input kind, counts without arrays, invalid UTF-8, NULL kernel name. */
  sample(&m, LT_MSG_EXECUTE);
  inputs0[1].kind = (lt_input_kind_t)7;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_EXECUTE);
  inputs0[1].holder = "\xff";
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_EXECUTE);
  instrs[1].outputs = NULL;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_EXECUTE);
  instrs[2].param.data = NULL;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_EXECUTE);
  m.u.execute.instrs = NULL;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_DONE);
  compls[1].errmsg = "bad \xc3";
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_RELEASE);
  m.u.release.ids = NULL;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_CANCEL);
  m.u.cancel.seqs = NULL;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  const char *ks[2] = {"a:b", NULL};
  sample(&m, LT_MSG_PROGRAM);
  m.u.program.nkernels = 2;
  m.u.program.kernels = ks;
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  sample(&m, LT_MSG_HELLO);
  m.u.hello.name = "\xed\xa0\x80";
  cr_assert_eq(lt__msg_encode(&m, &hdr, &len), LT_EINVAL);
  cr_assert_null(hdr);
}

Test(codec, decode_argument_errors) {
  lt_msg_t out;
  cr_assert_eq(lt__msg_decode(NULL, NULL, 0, NULL), LT_EINVAL);
  cr_assert_eq(lt__msg_decode(&out, NULL, 2, NULL), LT_EINVAL);
  lt_bytes_t fr = {NULL, 5};
  cr_assert_eq(lt__msg_decode(&out, &fr, 1, NULL), LT_EINVAL);
  lt__msg_clear(NULL);
  memset(&out, 0, sizeof out);
  lt__msg_clear(&out); /* a zeroed message */
}

/* ---------------------------------------------------------------------------------------
 * Names and limits. */

Test(codec, type_names) {
  cr_assert_str_eq(lt__msg_type_name(LT_MSG_EXECUTE), "execute");
  cr_assert_str_eq(lt__msg_type_name(LT_MSG_HEARTBEAT), "heartbeat");
  for (int a = LT_MSG_NONE; a <= LT_MSG_LAST; a++) {
    cr_assert_str_neq(lt__msg_type_name((lt_msg_type_t)a), "unknown");
    for (int b = a + 1; b <= LT_MSG_LAST; b++)
      cr_assert_str_neq(lt__msg_type_name((lt_msg_type_t)a), lt__msg_type_name((lt_msg_type_t)b));
  }
  cr_assert_str_eq(lt__msg_type_name((lt_msg_type_t)(LT_MSG_LAST + 1)), "unknown");
}

Test(codec, default_limits) {
  lt_codec_limits_t l = limits();
  cr_assert_eq(l.max_header, 4u << 20);
  cr_assert_eq(l.max_frames, 4096);
  cr_assert_eq(l.max_frame, (size_t)1 << 30);
  cr_assert_eq(l.max_items, 65536);
  cr_assert_eq(l.max_string, 4096);
}

Test(error, strerror_every_code) {
  struct {
    int code;
    const char *msg;
  } all[] = {
#define X_(name, val, msg) {LT_##name, msg},
      LT_ERRNO_MAP(X_)
#undef X_
  };
  size_t n = sizeof all / sizeof all[0];
  cr_assert_eq(n, 23);
  for (size_t i = 0; i < n; i++) {
    cr_assert_lt(all[i].code, 0);
    cr_assert_str_eq(lt_strerror(all[i].code), all[i].msg);
    for (size_t j = i + 1; j < n; j++)
      cr_assert_neq(all[i].code, all[j].code);
  }
  cr_assert_str_eq(lt_strerror(LT_EPROTO), "protocol error");
  cr_assert_str_eq(lt_strerror(LT_OK), "success");
  cr_assert_str_eq(lt_strerror(1), "unknown error");
  cr_assert_str_eq(lt_strerror(-24), "unknown error");
  cr_assert_str_eq(lt_strerror(INT32_MIN), "unknown error");
}

/* ---------------------------------------------------------------------------------------
 * Packing: one Instr entry carries k tasks of one chain, one Completion entry their k
 * outcomes. */

/* pb_packed writes n varints (zigzag-coded when `zz`, as sint32) as one packed field. */
static void pb_packed(pb *w, uint32_t fno, const int64_t *v, size_t n, bool zz) {
  pb run = {.n = 0};
  for (size_t i = 0; i < n; i++)
    pb_varint(&run, zz ? (uint32_t)(((uint32_t)v[i] << 1) ^ (uint32_t)(v[i] < 0 ? -1 : 0))
                       : (uint64_t)v[i]);
  pb_sub(w, fno, &run);
}

/* pb_fixed64s writes n fixed64 values as one packed field. */
static void pb_fixed64s(pb *w, uint32_t fno, const uint64_t *v, size_t n) {
  pb run = {.n = 0};
  for (size_t i = 0; i < n; i++) {
    memcpy(run.b + run.n, &v[i], 8);
    run.n += 8;
  }
  pb_sub(w, fno, &run);
}

/* An Execute of one Instr made by `fill` into its own writer, decoded with 4 payloads. */
static int decode_instr(const pb *instr, lt_msg_t *out, const lt_codec_limits_t *lim) {
  static const lt_bytes_t pay[4] = {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}};
  pb ex = {.n = 0}, env = {.n = 0};
  pb_sub(&ex, 1, instr);
  pb_sub(&env, body_fno(LT_MSG_EXECUTE), &ex);
  return decode_hdr(out, env.b, env.n, pay, 4, lim);
}

/* A packed instruction on the wire: op SEQ (0), pack k, one output id, k member seqs and
 * either k * n frame indices or k * n Input submessages. */
static void pb_pack_instr(pb *w, uint32_t k, const uint64_t *seqs, size_t nseqs,
                          const int64_t *frames, size_t nframes) {
  pb_uint(w, 1, 100);
  pb_uint(w, 10, k);
  pb_oid(w, 5, 7, 100);
  if (nseqs) pb_fixed64s(w, 12, seqs, nseqs);
  if (nframes) pb_packed(w, 11, frames, nframes, false);
}

Test(codec, pack_instr_wire_format) {
  /* 3 members of 2 inline inputs each, as bare frame indices. */
  uint64_t seqs[3] = {100, 101, 1ull << 60};
  int64_t frames[6] = {0, 1, 2, 3, 3, 0};
  pb in = {.n = 0};
  pb_pack_instr(&in, 3, seqs, 3, frames, 6);
  lt_msg_t m;
  cr_assert_eq(decode_instr(&in, &m, NULL), 0);
  const lt_instr_t *x = &m.u.execute.instrs[0];
  cr_assert_eq(x->pack, 3);
  cr_assert_eq(x->op, LT_OP_SEQ);
  cr_assert_eq(x->noutputs, 3);
  cr_assert_eq(x->ninputs, 6);
  for (uint32_t i = 0; i < 3; i++)
    cr_assert(oid_eq(x->outputs[i], (lt_oid_t){7, seqs[i]}), "member %u's output id", i);
  for (uint32_t j = 0; j < 6; j++) {
    cr_assert_eq(x->inputs[j].kind, LT_INPUT_INLINE);
    cr_assert_eq(x->inputs[j].frame, (uint32_t)frames[j]);
    cr_assert_str_eq(x->inputs[j].holder, "");
  }
  check_decoded(&m);
  lt__msg_clear(&m);

  /* Members without inputs, and members of REF inputs in Input submessages. */
  in.n = 0;
  pb_pack_instr(&in, 2, seqs, 2, NULL, 0);
  cr_assert_eq(decode_instr(&in, &m, NULL), 0);
  cr_assert_eq(m.u.execute.instrs[0].ninputs, 0);
  cr_assert_eq(m.u.execute.instrs[0].noutputs, 2);
  lt__msg_clear(&m);
  in.n = 0;
  pb_pack_instr(&in, 2, seqs, 2, NULL, 0);
  for (int i = 0; i < 2; i++) {
    pb inp = {.n = 0};
    pb_uint(&inp, 1, LT_INPUT_REF);
    pb_oid(&inp, 3, 7, 50 + (uint64_t)i);
    pb_sub(&in, 4, &inp);
  }
  cr_assert_eq(decode_instr(&in, &m, NULL), 0);
  cr_assert_eq(m.u.execute.instrs[0].inputs[1].kind, LT_INPUT_REF);
  cr_assert(oid_eq(m.u.execute.instrs[0].inputs[1].id, (lt_oid_t){7, 51}));
  lt__msg_clear(&m);

  /* pack 1 is one task, as pack 0. */
  in.n = 0;
  pb_uint(&in, 10, 1);
  pb_oid(&in, 5, 7, 100);
  cr_assert_eq(decode_instr(&in, &m, NULL), 0);
  cr_assert_eq(m.u.execute.instrs[0].pack, 1);
  lt__msg_clear(&m);
}

Test(codec, pack_instr_refused_when_malformed) {
  uint64_t seqs[4] = {1, 2, 3, 4};
  int64_t frames[4] = {0, 1, 2, 3}, far[2] = {0, 4};
  struct {
    const char *what;
    pb w;
  } bad[12];
  int n = 0;
#define BAD(what_) (bad[n].what = (what_), bad[n].w.n = 0, &bad[n++].w)
  pb *w = BAD("op SPLIT");
  pb_pack_instr(w, 2, seqs, 2, frames, 2);
  pb_uint(w, 7, LT_OP_SPLIT);
  w = BAD("more members than LT_MAX_PACK");
  pb_pack_instr(w, LT_MAX_PACK + 1, seqs, 2, NULL, 0);
  w = BAD("two output ids");
  pb_pack_instr(w, 2, seqs, 2, frames, 2);
  pb_oid(w, 5, 7, 101);
  w = BAD("fewer member seqs than members");
  pb_pack_instr(w, 3, seqs, 2, NULL, 0);
  w = BAD("more member seqs than members");
  pb_pack_instr(w, 2, seqs, 3, NULL, 0);
  w = BAD("inputs no multiple of the members");
  pb_pack_instr(w, 2, seqs, 2, frames, 3);
  w = BAD("a frame past the payloads");
  pb_pack_instr(w, 2, seqs, 2, far, 2);
  w = BAD("both inputs and pack_frames");
  pb_pack_instr(w, 2, seqs, 2, frames, 2);
  pb inp = {.n = 0};
  pb_uint(&inp, 2, 0);
  pb_sub(w, 4, &inp);
  pb_sub(w, 4, &inp);
  w = BAD("pack_frames without a pack");
  pb_oid(w, 5, 7, 100);
  pb_packed(w, 11, frames, 1, false);
  w = BAD("pack_outputs with pack 1");
  pb_uint(w, 10, 1);
  pb_oid(w, 5, 7, 100);
  pb_fixed64s(w, 12, seqs, 1);
  w = BAD("a pack without its output id");
  pb_uint(w, 10, 2);
  pb_fixed64s(w, 12, seqs, 2);
#undef BAD
  for (int i = 0; i < n; i++) {
    lt_msg_t m;
    cr_assert_eq(decode_instr(&bad[i].w, &m, NULL), LT_EPROTO, "%s", bad[i].what);
    cr_assert_null(m.priv);
  }
}

/* pack_msg makes an Execute of one packed instruction of k members with n inputs each. */
static lt_msg_t pack_msg(lt_instr_t *ins, uint32_t k, lt_input_t *in, uint32_t nin, lt_oid_t *out,
                         const lt_bytes_t *pay, uint32_t npay) {
  *ins = (lt_instr_t){.seq = out[0].seq,
                      .op = LT_OP_SEQ,
                      .kernel = 3,
                      .param = {"p", 1},
                      .ninputs = nin,
                      .inputs = in,
                      .noutputs = k,
                      .outputs = out,
                      .flags = LT_INSTR_RETURN,
                      .pack = k};
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_EXECUTE;
  m.u.execute.ninstrs = 1;
  m.u.execute.instrs = ins;
  m.nframes = npay;
  m.frames = (lt_bytes_t *)pay;
  return m;
}

Test(codec, pack_instr_roundtrip_and_encode_checks) {
  lt_bytes_t pay[3] = {{"x", 1}, {"yy", 2}, {"", 0}};
  lt_oid_t out[4] = {{9, 40}, {9, 41}, {9, 7}, {9, 1ull << 62}};
  lt_input_t in[8];
  for (int j = 0; j < 8; j++)
    in[j] = (lt_input_t){.kind = LT_INPUT_INLINE, .frame = (uint32_t)j % 3, .holder = ""};
  lt_instr_t ins;
  /* All inline: bare frame indices, far smaller than 8 Input submessages. */
  lt_msg_t m = pack_msg(&ins, 4, in, 8, out, pay, 3);
  roundtrip(&m, NULL);
  void *h1, *h2;
  size_t l1, l2;
  encode_ok(&m, &h1, &l1);
  in[7].size = 5; /* a stated size travels in an Input submessage */
  encode_ok(&m, &h2, &l2);
  cr_assert_lt(l1 + 8 * 2, l2, "pack_frames %zu bytes, inputs %zu", l1, l2);
  roundtrip(&m, NULL);
  free(h1);
  free(h2);
  /* REF inputs of another server, and no inputs at all. */
  in[3] = (lt_input_t){.kind = LT_INPUT_REF, .id = {9, 3}, .holder = "tcp://h:1", .size = 8};
  roundtrip(&m, NULL);
  m = pack_msg(&ins, 2, NULL, 0, out, pay, 3);
  roundtrip(&m, NULL);

  /* The encoder refuses what the decoder would. */
  struct {
    const char *what;
    uint32_t k, nin, op;
    lt_oid_t out1;
    uint32_t frame0;
  } bad[] = {
      {"op SPLIT", 2, 2, LT_OP_SPLIT, {9, 41}, 0},
      {"outputs of two clients", 2, 2, LT_OP_SEQ, {8, 41}, 0},
      {"inputs no multiple of k", 2, 3, LT_OP_SEQ, {9, 41}, 0},
      {"a frame past the payloads", 2, 2, LT_OP_SEQ, {9, 41}, 3},
      {"more than LT_MAX_PACK", LT_MAX_PACK + 1, 0, LT_OP_SEQ, {9, 41}, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lt_oid_t o[2] = {out[0], bad[i].out1};
    lt_input_t x[3];
    for (int j = 0; j < 3; j++)
      x[j] = (lt_input_t){.kind = LT_INPUT_INLINE, .frame = j ? 0 : bad[i].frame0, .holder = ""};
    m = pack_msg(&ins, bad[i].k, x, bad[i].nin, o, pay, 3);
    ins.op = bad[i].op;
    ins.noutputs = 2;
    if (bad[i].k > LT_MAX_PACK) ins.noutputs = bad[i].k;
    void *h = NULL;
    size_t l;
    cr_assert_eq(lt__msg_encode(&m, &h, &l), LT_EINVAL, "%s", bad[i].what);
    cr_assert_null(h);
  }
  /* k output ids are needed. */
  m = pack_msg(&ins, 3, NULL, 0, out, pay, 3);
  ins.noutputs = 2;
  void *h = NULL;
  size_t l;
  cr_assert_eq(lt__msg_encode(&m, &h, &l), LT_EINVAL);
}

/* member makes the completion of pack member `seq`: one output at frame `frame` when it
 * succeeded, none when it failed. */
static lt_completion_t member(uint64_t seq, int status, const char *errmsg, lt_output_info_t *o,
                              uint32_t pack) {
  return (lt_completion_t){.seq = seq,
                           .status = status,
                           .errmsg = errmsg,
                           .noutputs = status == LT_OK ? 1 : 0,
                           .outputs = status == LT_OK ? o : NULL,
                           .service_us = seq * 3,
                           .answer = -1,
                           .worker = 5,
                           .start_us = seq * 1000,
                           .cpu_us = seq,
                           .pack = pack};
}

Test(codec, pack_done_roundtrip_and_encode_checks) {
  lt_bytes_t pay[2] = {{"12345678", 8}, {"z", 1}};
  lt_output_info_t o[6] = {{8, 0}, {1, 1}, {4, -1}, {8, 0}, {0, -1}, {2, 0}};
  lt_output_info_t single[2] = {{3, -1}, {4, 1}};
  lt_completion_t c[7];
  c[0] = member(10, LT_OK, "", &o[0], 3);
  c[1] = member(11, LT_EKERNEL, "testk:fail: asked to fail", NULL, 0);
  c[2] = member(12, LT_OK, "", &o[2], 0);
  c[3] = (lt_completion_t){
      .seq = 77, .errmsg = "", .noutputs = 2, .outputs = single, .answer = 1, .worker = 2};
  c[4] = member(20, LT_OK, "", &o[3], 2);
  c[5] = member(21, LT_OK, "", &o[4], 0);
  c[6] = member(30, LT_ETIMEDOUT, "ran longer", NULL, 0);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_DONE;
  m.u.done.ncompl = 7;
  m.u.done.compl = c;
  m.nframes = 2;
  m.frames = pay;
  roundtrip(&m, NULL);

  /* Decoded as the members, with the pack on the first. */
  void *hdr;
  size_t len;
  encode_ok(&m, &hdr, &len);
  lt_msg_t out;
  cr_assert_eq(decode_hdr(&out, hdr, len, pay, 2, NULL), 0);
  cr_assert_eq(out.u.done.ncompl, 7);
  cr_assert_eq(out.u.done.compl [0].pack, 3);
  cr_assert_eq(out.u.done.compl [1].pack, 0);
  cr_assert_eq(out.u.done.compl [1].noutputs, 0);
  cr_assert_str_eq(out.u.done.compl [1].errmsg, "testk:fail: asked to fail");
  cr_assert_str_eq(out.u.done.compl [2].errmsg, "");
  cr_assert_eq(out.u.done.compl [2].outputs[0].frame, -1);
  cr_assert_eq(out.u.done.compl [2].worker, 5);
  cr_assert_eq(out.u.done.compl [4].pack, 2);
  cr_assert_eq(out.u.done.compl [6].pack, 0);
  lt__msg_clear(&out);
  free(hdr);

  /* The members' shape is checked before anything is sent. */
  struct {
    const char *what;
    int at;
    lt_completion_t c;
  } bad[] = {
      {"a succeeded member without its output", 2, member(12, LT_OK, "", NULL, 0)},
      {"a failed member with an output", 1, member(11, LT_EKERNEL, "x", NULL, 0)},
      {"another worker", 2, member(12, LT_OK, "", &o[2], 0)},
      {"an answer", 2, member(12, LT_OK, "", &o[2], 0)},
      {"a pack past the batch", 6, member(30, LT_OK, "", &o[5], 2)},
      {"a frame past the payloads", 2, member(12, LT_OK, "", &single[0], 0)},
      {"a pack inside a pack", 2, member(12, LT_OK, "", &o[2], 2)},
  };
  bad[1].c.noutputs = 1;
  bad[1].c.outputs = &o[0];
  bad[2].c.worker = 6;
  bad[3].c.answer = 0;
  bad[4].c.pack = 2;
  lt_output_info_t past = {1, 2};
  bad[5].c.outputs = &past;
  bad[0].c.noutputs = 0;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lt_completion_t x[7];
    memcpy(x, c, sizeof x);
    x[bad[i].at] = bad[i].c;
    m.u.done.compl = x;
    void *h = NULL;
    size_t l;
    cr_assert_eq(lt__msg_encode(&m, &h, &l), LT_EINVAL, "%s", bad[i].what);
    cr_assert_null(h);
  }
}

/* A Done of one Completion made into `cw`, decoded with 2 payloads. */
static int decode_compl(const pb *cw, lt_msg_t *out, const lt_codec_limits_t *lim) {
  static const lt_bytes_t pay[2] = {{"a", 1}, {"b", 1}};
  pb done = {.n = 0}, env = {.n = 0};
  pb_sub(&done, 1, cw);
  pb_sub(&env, body_fno(LT_MSG_DONE), &done);
  return decode_hdr(out, env.b, env.n, pay, 2, lim);
}

/* pb_pack_compl writes a packed Completion of k members: seq, statuses, sizes, frames and
 * times of k entries each (counts as given, to break one). */
static void pb_pack_compl(pb *w, size_t nseq, size_t nst, size_t nframe, int64_t frame1) {
  uint64_t seqs[4] = {5, 6, 7, 8};
  int64_t st[4] = {0, LT_EKERNEL, 0, 0}, sz[4] = {1, 0, 1, 1}, fr[4] = {0, -1, frame1, -1};
  pb_uint(w, 1, 5);
  pb_fixed64s(w, 10, seqs, nseq);
  pb_packed(w, 11, st, nst, true);
  pb_packed(w, 13, sz, 3, false);
  pb_packed(w, 14, fr, nframe, true);
  for (uint32_t f = 15; f <= 17; f++)
    pb_packed(w, f, sz, 3, false);
}

Test(codec, pack_done_refused_when_malformed) {
  pb w = {.n = 0};
  lt_msg_t m;
  pb_pack_compl(&w, 3, 3, 3, 1);
  pb_bytes(&w, 12, "", 0);
  pb_bytes(&w, 12, "it failed", 9);
  pb_bytes(&w, 12, "", 0);
  cr_assert_eq(decode_compl(&w, &m, NULL), 0, "the well-formed one");
  cr_assert_eq(m.u.done.ncompl, 3);
  cr_assert_eq(m.u.done.compl [0].pack, 3);
  cr_assert_eq(m.u.done.compl [1].status, LT_EKERNEL);
  cr_assert_str_eq(m.u.done.compl [1].errmsg, "it failed");
  cr_assert_eq(m.u.done.compl [2].outputs[0].frame, 1);
  cr_assert_eq(m.u.done.compl [2].seq, 7);
  lt__msg_clear(&m);

  struct {
    const char *what;
    size_t nseq, nst, nframe;
    int64_t frame1;
    int extra; /* 1: one errmsg, 2: an output, 3: seq not member 0's, 4: an answer */
  } bad[] = {
      {"a status short", 3, 2, 3, 1, 0},
      {"a frame short", 3, 3, 2, 1, 0},
      {"a frame past the payloads", 3, 3, 3, 2, 0},
      {"a frame below -1", 3, 3, 3, -2, 0},
      {"one message for three", 3, 3, 3, 1, 1},
      {"an output beside", 3, 3, 3, 1, 2},
      {"seq not member 0's", 3, 3, 3, 1, 3},
      {"an answer", 3, 3, 3, 1, 4},
      {"a pack of one", 1, 1, 1, 1, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    w.n = 0;
    pb_pack_compl(&w, bad[i].nseq, bad[i].nst, bad[i].nframe, bad[i].frame1);
    if (bad[i].extra == 1) pb_bytes(&w, 12, "x", 1);
    if (bad[i].extra == 2) {
      pb o = {.n = 0};
      pb_uint(&o, 1, 3);
      pb_sub(&w, 4, &o);
    }
    if (bad[i].extra == 3) pb_uint(&w, 1, 6);
    if (bad[i].extra == 4) pb_uint(&w, 6, 1);
    cr_assert_eq(decode_compl(&w, &m, NULL), LT_EPROTO, "%s", bad[i].what);
    cr_assert_null(m.priv);
  }
  /* A pack's fields without pack_seq. */
  w.n = 0;
  int64_t one = 0;
  pb_uint(&w, 1, 5);
  pb_packed(&w, 11, &one, 1, true);
  cr_assert_eq(decode_compl(&w, &m, NULL), LT_EPROTO);
}

Test(codec, pack_counts_against_max_items) {
  /* One Instr of 4 members and 8 inputs: its pack_frames count. */
  lt_bytes_t pay[1] = {{"x", 1}};
  lt_oid_t out[4] = {{9, 1}, {9, 2}, {9, 3}, {9, 4}};
  lt_input_t in[8];
  for (int j = 0; j < 8; j++)
    in[j] = (lt_input_t){.kind = LT_INPUT_INLINE, .holder = ""};
  lt_instr_t ins;
  lt_msg_t m = pack_msg(&ins, 4, in, 8, out, pay, 1);
  count_over(&m, 8);
  /* Its pack_outputs (packed fixed64) count: 4 members, no inputs. */
  m = pack_msg(&ins, 4, NULL, 0, out, pay, 1);
  count_over(&m, 4);
  /* A Done: two packed entries of 3 members decode to 6 completions, which count. */
  lt_output_info_t o = {1, -1};
  lt_completion_t c[6];
  for (int i = 0; i < 6; i++)
    c[i] = member((uint64_t)i + 1, LT_OK, "", &o, i % 3 ? 0 : 3);
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_DONE;
  m.u.done.ncompl = 6;
  m.u.done.compl = c;
  count_over(&m, 6);
}

/* Mutations of valid packed messages: every accepted one re-encodes to the same message. */
Test(codec, pack_mutated_headers) {
  rng_state = 0x5eed0f9acc;
  lt_bytes_t pay[3] = {{"x", 1}, {"yy", 2}, {"", 0}};
  lt_oid_t out[3] = {{9, 40}, {9, 41}, {9, 42}};
  lt_input_t in[6];
  for (int j = 0; j < 6; j++)
    in[j] = (lt_input_t){.kind = LT_INPUT_INLINE, .frame = (uint32_t)j % 3, .holder = ""};
  in[4] = (lt_input_t){.kind = LT_INPUT_REF, .id = {9, 3}, .holder = ""};
  lt_instr_t ins;
  lt_msg_t msgs[3];
  msgs[0] = pack_msg(&ins, 3, in, 6, out, pay, 3);
  lt_instr_t ins2;
  msgs[1] = pack_msg(&ins2, 3, in, 3, out, pay, 3);
  lt_output_info_t o[3] = {{1, 0}, {2, 1}, {0, -1}};
  lt_completion_t c[4] = {member(40, LT_OK, "", &o[0], 3), member(41, LT_OK, "", &o[1], 0),
                          member(42, LT_EKERNEL, "bad", NULL, 0), member(43, LT_OK, "", &o[2], 0)};
  memset(&msgs[2], 0, sizeof msgs[2]);
  msgs[2].type = LT_MSG_DONE;
  msgs[2].u.done.ncompl = 4;
  msgs[2].u.done.compl = c;
  msgs[2].nframes = 3;
  msgs[2].frames = pay;
  int outcome[8] = {0};
  for (int t = 0; t < 3; t++) {
    void *hdr;
    size_t len;
    encode_ok(&msgs[t], &hdr, &len);
    for (int i = 0; i < 3000; i++) {
      uint8_t *p = malloc(len);
      memcpy(p, hdr, len);
      for (int f = 0; f < 1 + (int)(rnd() % 3); f++)
        p[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
      outcome[-fuzz_one(p, len, pay, 3, NULL)]++;
      free(p);
    }
    free(hdr);
  }
  cr_log_info("pack mutations: ok %d, eproto %d, etoobig %d", outcome[0], outcome[-LT_EPROTO],
              outcome[-LT_ETOOBIG]);
  cr_assert_gt(outcome[0], 300);
  cr_assert_gt(outcome[-LT_EPROTO], 300);
}
