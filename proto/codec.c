/* proto/codec.c: the header codec, lt_msg_t <-> the protobuf-c Envelope of lithium.proto.
 * Decoding checks the frame limits, pre-scans the wire bytes so that no repeated field can
 * exceed max_items before protobuf-c allocates anything for it (wire.c), unpacks into a
 * per-message arena and translates into lt_msg_t arrays in the same arena, so that
 * lt__msg_clear is one free. It touches no sockets and no global state: any thread. */
#include "codec.h"

#include <lithium/error.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "lithium.pb-c.h"
#include "wire.h"

typedef lt__arena_t arena;

/* The first arena region of a decode is sized from the header, up to this. */
#define DECODE_MAX_HINT ((size_t)256 * 1024)

/* protobuf-c allocates through the arena; its frees (scratch slabs, replaced oneof members)
 * are no-ops and that memory goes with the arena. */
static void *pc_alloc(void *data, size_t n) {
  return lt__arena_alloc(data, n);
}

static void pc_free(void *data, void *p) {
  (void)data;
  (void)p;
}

/* ---------------------------------------------------------------------------------------
 * Strings: bounded length, valid UTF-8. */

/* str_in checks a decoded string and stores it in *out ("" for NULL). */
static int str_in(const char *s, const lt_codec_limits_t *lim, const char **out) {
  if (s == NULL) {
    *out = "";
    return 0;
  }
  size_t n = strnlen(s, lim->max_string + 1);
  if (n > lim->max_string) return LT_ETOOBIG;
  if (!lt__utf8_valid(s, n)) return LT_EPROTO;
  *out = s;
  return 0;
}

/* str_out checks a string about to be encoded and returns it as protobuf-c wants it;
 * NULL for invalid UTF-8. */
static char *str_out(const char *s) {
  if (s == NULL) return (char *)"";
  if (!lt__utf8_valid(s, strlen(s))) return NULL;
  return (char *)s;
}

/* sha_valid tells whether `s` is a hex SHA-256 (LT_SHA256_HEX_LEN lowercase digits), or ""
 * where `optional`. */
static bool sha_valid(const char *s, bool optional) {
  if (s == NULL || s[0] == '\0') return optional;
  size_t i = 0;
  for (; s[i] != '\0' && i <= LT_SHA256_HEX_LEN; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return i == LT_SHA256_HEX_LEN;
}

/* ---------------------------------------------------------------------------------------
 * Decode: Envelope -> lt_msg_t. */

typedef struct dec {
  arena *a;
  const lt_codec_limits_t *lim;
  uint32_t npay;            /* payload frames */
  const lt_bytes_t *frames; /* the payloads (frames[0] is payload 0) */
} dec;

static int oid_in(const Lithium__Oid *o, lt_oid_t *out) {
  if (o == NULL) return LT_EPROTO;
  out->client = o->client;
  out->seq = o->seq;
  return 0;
}

/* frame_in checks an optional frame index: -1 (none) or a payload index. */
static int frame_in(const dec *d, int32_t frame) {
  if (frame < -1 || (frame >= 0 && (uint32_t)frame >= d->npay)) return LT_EPROTO;
  return 0;
}

static int count_in(const dec *d, size_t n) {
  return n > d->lim->max_items ? LT_ETOOBIG : 0;
}

/* arr allocates n elements of `size` bytes in the arena; NULL with *rc set on failure,
 * NULL with *rc == 0 for n == 0. */
static void *arr(dec *d, size_t n, size_t size, int *rc) {
  *rc = 0;
  if (n == 0) return NULL;
  void *p = lt__arena_alloc(d->a, n * size); /* n <= max_items (32 bits): no overflow */
  if (p == NULL) *rc = LT_ENOMEM;
  return p;
}

/* bytes_in returns a decoded bytes field (its data lives in the arena; NULL when empty). */
static lt_bytes_t bytes_in(ProtobufCBinaryData b) {
  return (lt_bytes_t){b.len > 0 ? b.data : NULL, b.len};
}

/* strs_in checks n decoded strings in place (the array of pointers is reused as it is) and
 * returns it as const, NULL for none. */
static int strs_in(dec *d, char **v, size_t n, const char ***out) {
  int rc = count_in(d, n);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const char *s;
    if ((rc = str_in(v[i], d->lim, &s)) == 0) v[i] = (char *)s;
  }
  *out = n && rc == 0 ? (const char **)v : NULL;
  return rc;
}

/* modinfo_in translates n ModuleInfo entries (hex SHA-256 or ""). */
static int modinfo_in(dec *d, Lithium__ModuleInfo **pm, size_t n, lt_module_info_t **out) {
  int rc = count_in(d, n);
  if (rc != 0) return rc;
  lt_module_info_t *v = arr(d, n, sizeof *v, &rc);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if ((rc = str_in(pm[i]->name, d->lim, &v[i].name)) == 0 &&
        (rc = str_in(pm[i]->sha256, d->lim, &v[i].sha256)) == 0 && !sha_valid(v[i].sha256, true))
      rc = LT_EPROTO;
  }
  *out = v;
  return rc;
}

/* input_in translates one Input submessage. */
static int input_in(dec *d, const Lithium__Input *p, lt_input_t *x) {
  int rc;
  memset(x, 0, sizeof *x);
  x->size = p->size;
  x->holder = "";
  if (p->kind == LT_INPUT_INLINE) {
    x->kind = LT_INPUT_INLINE;
    if (p->frame >= d->npay) return LT_EPROTO;
    x->frame = p->frame;
  } else if (p->kind == LT_INPUT_REF) {
    x->kind = LT_INPUT_REF;
    if ((rc = oid_in(p->oid, &x->id)) != 0) return rc;
    if ((rc = str_in(p->holder, d->lim, &x->holder)) != 0) return rc;
  } else {
    return LT_EPROTO;
  }
  return 0;
}

/* pack_shape_in checks the packing fields of an Instr: none for pack 0 or 1; for k > 1 an op
 * SEQ of at most LT_MAX_PACK members, one output id and k member seqs, and k * n inputs in
 * exactly one of `inputs` and `pack_frames` (or none), each frame a payload. */
static int pack_shape_in(const dec *d, const Lithium__Instr *pi) {
  if (pi->pack <= 1) return pi->n_pack_frames || pi->n_pack_outputs ? LT_EPROTO : 0;
  uint32_t k = pi->pack;
  if (pi->op != LT_OP_SEQ || k > LT_MAX_PACK || pi->n_outputs != 1 || pi->n_pack_outputs != k ||
      (pi->n_inputs > 0 && pi->n_pack_frames > 0) || (pi->n_inputs + pi->n_pack_frames) % k != 0)
    return LT_EPROTO;
  for (size_t j = 0; j < pi->n_pack_frames; j++)
    if (pi->pack_frames[j] >= d->npay) return LT_EPROTO;
  return 0;
}

static int instr_in(dec *d, const Lithium__Instr *pi, lt_instr_t *in) {
  int rc;
  if ((rc = count_in(d, pi->n_inputs)) != 0 || (rc = count_in(d, pi->n_outputs)) != 0 ||
      (rc = count_in(d, pi->n_more)) != 0 || (rc = count_in(d, pi->n_pack_frames)) != 0 ||
      (rc = count_in(d, pi->n_pack_outputs)) != 0)
    return rc;
  if (pi->op > LT_OP_LAST || (rc = pack_shape_in(d, pi)) != 0) return LT_EPROTO;
  in->seq = pi->seq;
  in->op = pi->op;
  in->kernel = pi->kernel;
  in->param = bytes_in(pi->param);
  in->flags = pi->flags;
  in->group = pi->group;
  in->pack = pi->pack;
  in->nmore = (uint32_t)pi->n_more;
  in->more = arr(d, pi->n_more, sizeof(lt_stage_t), &rc);
  if (rc != 0) return rc;
  for (size_t j = 0; j < pi->n_more; j++) {
    in->more[j].kernel = pi->more[j]->kernel;
    in->more[j].param = bytes_in(pi->more[j]->param);
  }
  /* A pack's inline inputs may come as bare frame indices (pack_frames). */
  size_t nin = pi->n_inputs + pi->n_pack_frames;
  in->ninputs = (uint32_t)nin;
  in->inputs = arr(d, nin, sizeof(lt_input_t), &rc);
  if (rc != 0) return rc;
  for (size_t j = 0; j < pi->n_inputs; j++)
    if ((rc = input_in(d, pi->inputs[j], &in->inputs[j])) != 0) return rc;
  for (size_t j = 0; j < pi->n_pack_frames; j++)
    in->inputs[j] =
        (lt_input_t){.kind = LT_INPUT_INLINE, .frame = pi->pack_frames[j], .holder = ""};
  /* Member i of a pack names its output {outputs[0].client, pack_outputs[i]}. */
  size_t nout = pi->pack > 1 ? pi->n_pack_outputs : pi->n_outputs;
  in->noutputs = (uint32_t)nout;
  in->outputs = arr(d, nout, sizeof(lt_oid_t), &rc);
  if (rc != 0) return rc;
  for (size_t j = 0; j < pi->n_outputs && j < nout; j++)
    if ((rc = oid_in(pi->outputs[j], &in->outputs[j])) != 0) return rc;
  for (size_t j = 0; pi->pack > 1 && j < nout; j++)
    in->outputs[j] = (lt_oid_t){in->outputs[0].client, pi->pack_outputs[j]};
  return 0;
}

/* compl_members returns how many completions a Completion entry holds: k for a pack (its
 * pack_seq), else 1. */
static size_t compl_members(const Lithium__Completion *pc) {
  return pc->n_pack_seq > 1 ? pc->n_pack_seq : 1;
}

static int compl_in(dec *d, const Lithium__Completion *pc, lt_completion_t *c) {
  int rc;
  if ((rc = count_in(d, pc->n_outputs)) != 0) return rc;
  if (pc->answer > 2 || pc->worker >= LT_MAX_WORKERS) return LT_EPROTO;
  c->answer = (int32_t)pc->answer - 1; /* 0 none -> -1, 1 false -> 0, 2 true -> 1 */
  c->pack = 0;
  c->seq = pc->seq;
  c->status = pc->status;
  c->service_us = pc->service_us;
  c->worker = pc->worker;
  c->start_us = pc->start_us;
  c->cpu_us = pc->cpu_us;
  if ((rc = str_in(pc->errmsg, d->lim, &c->errmsg)) != 0) return rc;
  c->noutputs = (uint32_t)pc->n_outputs;
  c->outputs = arr(d, pc->n_outputs, sizeof(lt_output_info_t), &rc);
  if (rc != 0) return rc;
  for (size_t j = 0; j < pc->n_outputs; j++) {
    const Lithium__OutputInfo *o = pc->outputs[j];
    if ((rc = frame_in(d, o->frame)) != 0) return rc;
    c->outputs[j].size = o->size;
    c->outputs[j].frame = o->frame;
  }
  return 0;
}

/* pack_compl_shape_in checks a Completion's packing fields: none at all, or a pack of k > 1
 * members (at most LT_MAX_PACK) with every pack_* array k long (pack_errmsg k or none), the
 * unused single fields empty, `seq` member 0's and every frame -1 or a payload. */
static int pack_compl_shape_in(const dec *d, const Lithium__Completion *pc) {
  size_t k = pc->n_pack_seq;
  if (k <= 1)
    return k || pc->n_pack_status || pc->n_pack_errmsg || pc->n_pack_size || pc->n_pack_frame ||
                   pc->n_pack_service_us || pc->n_pack_start_us || pc->n_pack_cpu_us
               ? LT_EPROTO
               : 0;
  if (k > LT_MAX_PACK || pc->n_pack_status != k ||
      (pc->n_pack_errmsg != 0 && pc->n_pack_errmsg != k) || pc->n_pack_size != k ||
      pc->n_pack_frame != k || pc->n_pack_service_us != k || pc->n_pack_start_us != k ||
      pc->n_pack_cpu_us != k || pc->n_outputs != 0 || pc->answer != 0 ||
      pc->worker >= LT_MAX_WORKERS || pc->seq != pc->pack_seq[0])
    return LT_EPROTO;
  for (size_t i = 0; i < k; i++)
    if (frame_in(d, pc->pack_frame[i]) != 0) return LT_EPROTO;
  return 0;
}

/* pack_compl_in translates a packed Completion into its k members c[0..k): member i has
 * seq pack_seq[i], its status and message, one output when it succeeded, its own times, the
 * shared worker and no answer; member 0 carries pack = k. */
static int pack_compl_in(dec *d, const Lithium__Completion *pc, lt_completion_t *c) {
  int rc;
  if ((rc = pack_compl_shape_in(d, pc)) != 0) return rc;
  size_t k = pc->n_pack_seq;
  for (size_t i = 0; i < k; i++) {
    lt_completion_t *m = &c[i];
    memset(m, 0, sizeof *m);
    m->pack = i == 0 ? (uint32_t)k : 0;
    m->seq = pc->pack_seq[i];
    m->status = pc->pack_status[i];
    m->errmsg = "";
    if (pc->n_pack_errmsg && (rc = str_in(pc->pack_errmsg[i], d->lim, &m->errmsg)) != 0) return rc;
    m->answer = -1;
    m->worker = pc->worker;
    m->service_us = pc->pack_service_us[i];
    m->start_us = pc->pack_start_us[i];
    m->cpu_us = pc->pack_cpu_us[i];
    if (m->status != LT_OK) continue;
    if ((m->outputs = arr(d, 1, sizeof(lt_output_info_t), &rc)) == NULL) return rc;
    m->noutputs = 1;
    m->outputs[0] = (lt_output_info_t){pc->pack_size[i], pc->pack_frame[i]};
  }
  return 0;
}

/* done_in translates the Done entries: a packed one becomes its k member completions, and
 * all of them together stay within max_items. */
static int done_in(dec *d, const Lithium__Done *p, lt_msg_t *m) {
  int rc;
  if ((rc = count_in(d, p->n_completions)) != 0) return rc;
  uint64_t total = 0;
  for (size_t i = 0; i < p->n_completions; i++)
    total += compl_members(p->completions[i]);
  if ((rc = count_in(d, total)) != 0) return rc;
  m->u.done.ncompl = (uint32_t)total;
  m->u.done.batch = p->batch;
  m->u.done.compl = arr(d, total, sizeof(lt_completion_t), &rc);
  size_t at = 0;
  for (size_t i = 0; rc == 0 && i < p->n_completions; i++) {
    const Lithium__Completion *pc = p->completions[i];
    if (pc->n_pack_seq > 1) {
      rc = pack_compl_in(d, pc, &m->u.done.compl [at]);
    } else if ((rc = pack_compl_shape_in(d, pc)) == 0) {
      rc = compl_in(d, pc, &m->u.done.compl [at]);
    }
    at += compl_members(pc);
  }
  return rc;
}

static int body_in(dec *d, const Lithium__Envelope *env, lt_msg_t *m) {
  int rc = 0;
  switch (env->body_case) {
  case LITHIUM__ENVELOPE__BODY_HELLO:
    m->type = LT_MSG_HELLO;
    m->u.hello.version = env->hello->version;
    m->u.hello.client_id = env->hello->client_id;
    m->u.hello.inline_max = env->hello->inline_max;
    m->u.hello.secret = env->hello->secret;
    m->u.hello.nmodules = (uint32_t)env->hello->n_modules;
    if ((rc = strs_in(d, env->hello->modules, env->hello->n_modules, &m->u.hello.modules)) != 0)
      return rc;
    return str_in(env->hello->name, d->lim, &m->u.hello.name);
  case LITHIUM__ENVELOPE__BODY_WELCOME:
    m->type = LT_MSG_WELCOME;
    m->u.welcome.version = env->welcome->version;
    m->u.welcome.cores = env->welcome->cores;
    m->u.welcome.threads = env->welcome->threads;
    m->u.welcome.speed = env->welcome->speed;
    m->u.welcome.cpus = env->welcome->cpus;
    m->u.welcome.now_us = env->welcome->now_us;
    m->u.welcome.max_frame = env->welcome->max_frame;
    m->u.welcome.incarnation = env->welcome->incarnation;
    if ((rc = count_in(d, env->welcome->n_crashed)) != 0) return rc;
    m->u.welcome.ncrashed = (uint32_t)env->welcome->n_crashed;
    m->u.welcome.crashed = env->welcome->n_crashed ? env->welcome->crashed : NULL;
    m->u.welcome.crash_signal = env->welcome->crash_signal;
    m->u.welcome.crashed_incarnation = env->welcome->crashed_incarnation;
    m->u.welcome.crash_culprit = env->welcome->crash_culprit;
    m->u.welcome.accept_modules = env->welcome->accept_modules != 0;
    m->u.welcome.nmodules = (uint32_t)env->welcome->n_modules;
    if ((rc = modinfo_in(d, env->welcome->modules, env->welcome->n_modules,
                         &m->u.welcome.modules)) != 0)
      return rc;
    if ((rc = str_in(env->welcome->same_host, d->lim, &m->u.welcome.same_host)) != 0) return rc;
    return str_in(env->welcome->server_id, d->lim, &m->u.welcome.server_id);
  case LITHIUM__ENVELOPE__BODY_PROGRAM: {
    const Lithium__Program *p = env->program;
    m->type = LT_MSG_PROGRAM;
    /* The decoded strings already sit in the arena. */
    m->u.program.nkernels = (uint32_t)p->n_kernels;
    m->u.program.npeers = (uint32_t)p->n_peers;
    if ((rc = strs_in(d, p->kernels, p->n_kernels, &m->u.program.kernels)) != 0) return rc;
    return strs_in(d, p->peers, p->n_peers, &m->u.program.peers);
  }
  case LITHIUM__ENVELOPE__BODY_EXECUTE: {
    const Lithium__Execute *p = env->execute;
    m->type = LT_MSG_EXECUTE;
    if ((rc = count_in(d, p->n_instrs)) != 0) return rc;
    m->u.execute.ninstrs = (uint32_t)p->n_instrs;
    m->u.execute.max_active = p->max_active;
    m->u.execute.timeout_ms = p->timeout_ms;
    m->u.execute.instrs = arr(d, p->n_instrs, sizeof(lt_instr_t), &rc);
    for (size_t i = 0; rc == 0 && i < p->n_instrs; i++)
      rc = instr_in(d, p->instrs[i], &m->u.execute.instrs[i]);
    return rc;
  }
  case LITHIUM__ENVELOPE__BODY_DONE: {
    m->type = LT_MSG_DONE;
    return done_in(d, env->done, m);
  }
  case LITHIUM__ENVELOPE__BODY_FETCH:
    m->type = LT_MSG_FETCH;
    m->u.fetch.release = env->fetch->release != 0;
    m->u.fetch.secret = env->fetch->secret;
    m->u.fetch.max_frame = env->fetch->max_frame;
    m->u.fetch.shm = env->fetch->shm != 0;
    return oid_in(env->fetch->id, &m->u.fetch.id);
  case LITHIUM__ENVELOPE__BODY_VALUE: {
    const Lithium__Value *p = env->value;
    m->type = LT_MSG_VALUE;
    m->u.value.status = p->status;
    m->u.value.frame = p->frame;
    if ((rc = oid_in(p->id, &m->u.value.id)) != 0 || (rc = frame_in(d, p->frame)) != 0) return rc;
    return str_in(p->errmsg, d->lim, &m->u.value.errmsg);
  }
  case LITHIUM__ENVELOPE__BODY_RELEASE: {
    const Lithium__Release *p = env->release;
    m->type = LT_MSG_RELEASE;
    if ((rc = count_in(d, p->n_ids)) != 0) return rc;
    m->u.release.nids = (uint32_t)p->n_ids;
    m->u.release.secret = p->secret;
    m->u.release.ids = arr(d, p->n_ids, sizeof(lt_oid_t), &rc);
    for (size_t i = 0; rc == 0 && i < p->n_ids; i++)
      rc = oid_in(p->ids[i], &m->u.release.ids[i]);
    return rc;
  }
  case LITHIUM__ENVELOPE__BODY_CANCEL:
    m->type = LT_MSG_CANCEL;
    if ((rc = count_in(d, env->cancel->n_seqs)) != 0) return rc;
    m->u.cancel.nseqs = (uint32_t)env->cancel->n_seqs;
    m->u.cancel.seqs = env->cancel->n_seqs ? env->cancel->seqs : NULL;
    return 0;
  case LITHIUM__ENVELOPE__BODY_HEARTBEAT:
    m->type = LT_MSG_HEARTBEAT;
    m->u.heartbeat.seq = env->heartbeat->seq;
    m->u.heartbeat.now_us = env->heartbeat->now_us;
    m->u.heartbeat.draining = env->heartbeat->draining;
    m->u.heartbeat.dones = env->heartbeat->dones;
    return 0;
  case LITHIUM__ENVELOPE__BODY_BYE:
    m->type = LT_MSG_BYE;
    return 0;
  case LITHIUM__ENVELOPE__BODY_ERROR:
    m->type = LT_MSG_ERROR;
    m->u.error.code = env->error->code;
    return str_in(env->error->message, d->lim, &m->u.error.message);
  case LITHIUM__ENVELOPE__BODY_LOST: {
    const Lithium__Lost *p = env->lost;
    m->type = LT_MSG_LOST;
    m->u.lost.nholders = (uint32_t)p->n_holders;
    return strs_in(d, p->holders, p->n_holders, &m->u.lost.holders);
  }
  case LITHIUM__ENVELOPE__BODY_STATUS:
    m->type = LT_MSG_STATUS;
    return 0;
  case LITHIUM__ENVELOPE__BODY_STATUS_REPLY: {
    const Lithium__StatusReply *p = env->status_reply;
    m->type = LT_MSG_STATUS_REPLY;
    m->u.status_reply.protocol = p->protocol;
    m->u.status_reply.uptime_ms = p->uptime_ms;
    m->u.status_reply.cores = p->cores;
    m->u.status_reply.speed = p->speed;
    m->u.status_reply.sessions = p->sessions;
    m->u.status_reply.value_bytes = p->value_bytes;
    m->u.status_reply.draining = p->draining;
    if ((rc = str_in(p->server_id, d->lim, &m->u.status_reply.server_id)) != 0 ||
        (rc = str_in(p->version, d->lim, &m->u.status_reply.version)) != 0 ||
        (rc = str_in(p->endpoint, d->lim, &m->u.status_reply.endpoint)) != 0)
      return rc;
    m->u.status_reply.nmodules = (uint32_t)p->n_modules;
    return modinfo_in(d, p->modules, p->n_modules, &m->u.status_reply.modules);
  }
  case LITHIUM__ENVELOPE__BODY_MODULE: {
    const Lithium__Module *p = env->module;
    m->type = LT_MSG_MODULE;
    m->u.module.size = p->size;
    m->u.module.frame = p->frame;
    if ((rc = frame_in(d, p->frame)) != 0 ||
        (rc = str_in(p->name, d->lim, &m->u.module.name)) != 0 ||
        (rc = str_in(p->sha256, d->lim, &m->u.module.sha256)) != 0)
      return rc;
    if (m->u.module.name[0] == '\0' || !sha_valid(m->u.module.sha256, false)) return LT_EPROTO;
    /* The bytes, when sent, are the size announced. */
    if (p->frame >= 0 && d->frames[p->frame].len != p->size) return LT_EPROTO;
    return 0;
  }
  default:
    return LT_EPROTO; /* no body, or one this version does not know */
  }
}

int lt__msg_decode(lt_msg_t *msg, const lt_bytes_t *frames, size_t nframes,
                   const lt_codec_limits_t *lim) {
  if (msg == NULL) return LT_EINVAL;
  memset(msg, 0, sizeof *msg);
  if (nframes > 0 && frames == NULL) return LT_EINVAL;
  lt_codec_limits_t deflim;
  if (lim == NULL) {
    lt__codec_limits_default(&deflim);
    lim = &deflim;
  }
  if (nframes == 0) return LT_EPROTO; /* no header */
  const lt_bytes_t *hdr = &frames[0];
  if (hdr->len > lim->max_header) return LT_ETOOBIG;
  if (hdr->len > 0 && hdr->data == NULL) return LT_EINVAL;
  size_t npay = nframes - 1;
  if (npay > lim->max_frames) return LT_ETOOBIG;
  for (size_t i = 1; i < nframes; i++)
    if (frames[i].len > lim->max_frame) return LT_ETOOBIG;
  if (hdr->len == 0) return LT_EPROTO; /* an empty envelope has no body */

  int rc = lt__wire_prescan(hdr->data, hdr->len, lim->max_items);
  if (rc != 0) return rc;

  /* Decoded objects take a few times the wire size; start there and grow if needed. */
  arena *a = lt__arena_new(hdr->len < DECODE_MAX_HINT / 8 ? hdr->len * 8 + 512 : DECODE_MAX_HINT);
  if (a == NULL) return LT_ENOMEM;
  ProtobufCAllocator pc = {pc_alloc, pc_free, a};
  Lithium__Envelope *env = lithium__envelope__unpack(&pc, hdr->len, hdr->data);
  if (env == NULL) {
    rc = lt__arena_oom(a) ? LT_ENOMEM : LT_EPROTO;
  } else {
    dec d = {a, lim, (uint32_t)npay, frames + 1};
    rc = body_in(&d, env, msg);
    if (rc == 0 && env->load != NULL) {
      const Lithium__Load *l = env->load;
      msg->has_load = true;
      msg->load.active = l->active;
      msg->load.queued = l->queued;
      msg->load.parked = l->parked;
      msg->load.completed = l->completed;
      msg->load.cpu = l->cpu;
      msg->load.values_held = l->values_held;
      msg->load.threads = l->threads;
      msg->load.peer_in = l->peer_in;
      msg->load.peer_out = l->peer_out;
      msg->load.incarnation = l->incarnation;
      msg->load.stopping = l->stopping != 0;
      msg->load.shm_in = l->shm_in;
      msg->load.shm_out = l->shm_out;
      msg->load.shm_values_in = l->shm_values_in;
      msg->load.shm_values_out = l->shm_values_out;
      msg->load.shm_fallbacks = l->shm_fallbacks;
      msg->load.shm_us = l->shm_us;
    }
  }
  if (rc != 0) {
    lt__arena_free(a);
    memset(msg, 0, sizeof *msg);
    return rc;
  }
  msg->nframes = (uint32_t)npay;
  /* Borrowed from the caller, who keeps `frames` alive until lt__msg_clear. */
  msg->frames = npay ? (lt_bytes_t *)(frames + 1) : NULL;
  msg->priv = a;
  return 0;
}

void lt__msg_clear(lt_msg_t *msg) {
  if (msg == NULL) return;
  lt__arena_free(msg->priv);
  memset(msg, 0, sizeof *msg);
}

/* ---------------------------------------------------------------------------------------
 * Encode: lt_msg_t -> Envelope -> bytes. The protobuf-c structs point at the caller's
 * strings and arrays wherever the layouts agree; the rest is built in a temporary arena. */

static int frame_out(const lt_msg_t *m, int32_t frame) {
  if (frame < -1 || (frame >= 0 && (uint32_t)frame >= m->nframes)) return LT_EINVAL;
  return 0;
}

/* oid_out returns a protobuf-c Oid for `id` allocated in `a`, NULL when out of memory. */
static Lithium__Oid *oid_out(arena *a, lt_oid_t id) {
  Lithium__Oid *o = lt__arena_alloc(a, sizeof *o);
  if (o == NULL) return NULL;
  lithium__oid__init(o);
  o->client = id.client;
  o->seq = id.seq;
  return o;
}

/* oids_out builds the array of n Oid pointers for `ids`. */
static int oids_out(arena *a, const lt_oid_t *ids, size_t n, Lithium__Oid ***out) {
  *out = NULL;
  if (n == 0) return 0;
  if (ids == NULL) return LT_EINVAL;
  Lithium__Oid **v = lt__arena_alloc(a, n * sizeof *v);
  Lithium__Oid *o = lt__arena_alloc(a, n * sizeof *o);
  if (v == NULL || o == NULL) return LT_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    lithium__oid__init(&o[i]);
    o[i].client = ids[i].client;
    o[i].seq = ids[i].seq;
    v[i] = &o[i];
  }
  *out = v;
  return 0;
}

/* bytes_out returns `b` as protobuf-c wants it; LT_EINVAL for a length without data. */
static int bytes_out(lt_bytes_t b, ProtobufCBinaryData *out) {
  if (b.len > 0 && b.data == NULL) return LT_EINVAL;
  out->len = b.len;
  out->data = (uint8_t *)b.data;
  return 0;
}

/* inputs_out builds the Input submessages of `in`. */
static int inputs_out(arena *a, const lt_msg_t *m, const lt_instr_t *in, Lithium__Instr *pi) {
  if (in->ninputs == 0) return 0;
  if (in->inputs == NULL) return LT_EINVAL;
  Lithium__Input **v = lt__arena_alloc(a, in->ninputs * sizeof *v);
  Lithium__Input *x = lt__arena_alloc(a, in->ninputs * sizeof *x);
  if (v == NULL || x == NULL) return LT_ENOMEM;
  for (uint32_t j = 0; j < in->ninputs; j++) {
    const lt_input_t *src = &in->inputs[j];
    lithium__input__init(&x[j]);
    x[j].kind = (uint32_t)src->kind;
    x[j].size = src->size;
    if (src->kind == LT_INPUT_INLINE) {
      if (src->frame >= m->nframes) return LT_EINVAL;
      x[j].frame = src->frame;
    } else if (src->kind == LT_INPUT_REF) {
      if ((x[j].oid = oid_out(a, src->id)) == NULL) return LT_ENOMEM;
      if ((x[j].holder = str_out(src->holder)) == NULL) return LT_EINVAL;
    } else {
      return LT_EINVAL;
    }
    v[j] = &x[j];
  }
  pi->n_inputs = in->ninputs;
  pi->inputs = v;
  return 0;
}

/* all_inline tells whether every input of `in` is an inline payload of no stated size (as
 * the client sends them), which bare frame indices carry without loss. */
static bool all_inline(const lt_instr_t *in) {
  for (uint32_t j = 0; j < in->ninputs; j++)
    if (in->inputs[j].kind != LT_INPUT_INLINE || in->inputs[j].size != 0) return false;
  return true;
}

/* pack_out fills the packing fields of a packed `in` (pack k > 1): an op SEQ of at most
 * LT_MAX_PACK members with k output ids of one client and k * n inputs; all-inline inputs
 * go as bare frame indices (pack_frames), others as Input submessages. */
static int pack_out(arena *a, const lt_msg_t *m, const lt_instr_t *in, Lithium__Instr *pi) {
  uint32_t k = in->pack;
  if (in->op != LT_OP_SEQ || k > LT_MAX_PACK || in->noutputs != k || in->outputs == NULL ||
      in->ninputs % k != 0 || (in->ninputs > 0 && in->inputs == NULL))
    return LT_EINVAL;
  uint64_t *seqs = lt__arena_alloc(a, k * sizeof *seqs);
  if (seqs == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < k; i++) {
    if (in->outputs[i].client != in->outputs[0].client) return LT_EINVAL;
    seqs[i] = in->outputs[i].seq;
  }
  pi->pack = k;
  pi->n_pack_outputs = k;
  pi->pack_outputs = seqs;
  pi->n_outputs = 1;
  int rc = oids_out(a, in->outputs, 1, &pi->outputs);
  if (rc != 0 || in->ninputs == 0) return rc;
  if (!all_inline(in)) return inputs_out(a, m, in, pi);
  uint32_t *frames = lt__arena_alloc(a, in->ninputs * sizeof *frames);
  if (frames == NULL) return LT_ENOMEM;
  for (uint32_t j = 0; j < in->ninputs; j++) {
    if (in->inputs[j].frame >= m->nframes) return LT_EINVAL;
    frames[j] = in->inputs[j].frame;
  }
  pi->n_pack_frames = in->ninputs;
  pi->pack_frames = frames;
  return 0;
}

static int instr_out(arena *a, const lt_msg_t *m, const lt_instr_t *in, Lithium__Instr *pi) {
  lithium__instr__init(pi);
  if (in->op > LT_OP_LAST) return LT_EINVAL;
  pi->seq = in->seq;
  pi->op = in->op;
  pi->kernel = in->kernel;
  pi->flags = in->flags;
  pi->group = in->group;
  if (bytes_out(in->param, &pi->param) != 0) return LT_EINVAL;
  if (in->nmore > 0) {
    if (in->more == NULL) return LT_EINVAL;
    Lithium__Stage **v = lt__arena_alloc(a, in->nmore * sizeof *v);
    Lithium__Stage *x = lt__arena_alloc(a, in->nmore * sizeof *x);
    if (v == NULL || x == NULL) return LT_ENOMEM;
    for (uint32_t j = 0; j < in->nmore; j++) {
      lithium__stage__init(&x[j]);
      x[j].kernel = in->more[j].kernel;
      if (bytes_out(in->more[j].param, &x[j].param) != 0) return LT_EINVAL;
      v[j] = &x[j];
    }
    pi->n_more = in->nmore;
    pi->more = v;
  }
  if (in->pack > 1) return pack_out(a, m, in, pi);
  pi->pack = in->pack;
  int rc = inputs_out(a, m, in, pi);
  if (rc != 0) return rc;
  pi->n_outputs = in->noutputs;
  return oids_out(a, in->outputs, in->noutputs, &pi->outputs);
}

static int compl_out(arena *a, const lt_msg_t *m, const lt_completion_t *c,
                     Lithium__Completion *pc) {
  lithium__completion__init(pc);
  if (c->answer < -1 || c->answer > 1 || c->worker >= LT_MAX_WORKERS) return LT_EINVAL;
  pc->answer = (uint32_t)(c->answer + 1);
  pc->seq = c->seq;
  pc->status = c->status;
  pc->service_us = c->service_us;
  pc->worker = c->worker;
  pc->start_us = c->start_us;
  pc->cpu_us = c->cpu_us;
  if ((pc->errmsg = str_out(c->errmsg)) == NULL) return LT_EINVAL;
  if (c->noutputs == 0) return 0;
  if (c->outputs == NULL) return LT_EINVAL;
  Lithium__OutputInfo **v = lt__arena_alloc(a, c->noutputs * sizeof *v);
  Lithium__OutputInfo *o = lt__arena_alloc(a, c->noutputs * sizeof *o);
  if (v == NULL || o == NULL) return LT_ENOMEM;
  for (uint32_t j = 0; j < c->noutputs; j++) {
    if (frame_out(m, c->outputs[j].frame) != 0) return LT_EINVAL;
    lithium__output_info__init(&o[j]);
    o[j].size = c->outputs[j].size;
    o[j].frame = c->outputs[j].frame;
    v[j] = &o[j];
  }
  pc->n_outputs = c->noutputs;
  pc->outputs = v;
  return 0;
}

/* pack_member_ok checks member c of a pack whose first member is c0: no answer, c0's
 * worker, no pack of its own, and one output (a valid frame) exactly when it succeeded. */
static bool pack_member_ok(const lt_msg_t *m, const lt_completion_t *c0, const lt_completion_t *c) {
  if (c->answer != -1 || c->worker != c0->worker || (c != c0 && c->pack > 1)) return false;
  if (c->status != LT_OK) return c->noutputs == 0;
  return c->noutputs == 1 && c->outputs != NULL && frame_out(m, c->outputs[0].frame) == 0;
}

/* pack_compl_out encodes the k members c[0..k) of a packed instruction as one Completion:
 * the pack_* arrays, pack_errmsg only when a member failed (or has a message). */
static int pack_compl_out(arena *a, const lt_msg_t *m, const lt_completion_t *c, uint32_t k,
                          Lithium__Completion *pc) {
  lithium__completion__init(pc);
  if (k > LT_MAX_PACK || c[0].worker >= LT_MAX_WORKERS) return LT_EINVAL;
  uint64_t *u = lt__arena_alloc(a, (size_t)k * 5 * sizeof *u);
  int32_t *st = lt__arena_alloc(a, (size_t)k * 2 * sizeof *st);
  char **em = lt__arena_alloc(a, (size_t)k * sizeof *em);
  if (u == NULL || st == NULL || em == NULL) return LT_ENOMEM;
  bool failed = false; /* some member has a message to send */
  for (uint32_t i = 0; i < k; i++) {
    const lt_completion_t *x = &c[i];
    if (!pack_member_ok(m, c, x) || (em[i] = str_out(x->errmsg)) == NULL) return LT_EINVAL;
    failed |= x->status != LT_OK || em[i][0] != '\0';
    u[i] = x->seq;
    u[k + i] = x->status == LT_OK ? x->outputs[0].size : 0;
    u[2 * k + i] = x->service_us;
    u[3 * k + i] = x->start_us;
    u[4 * k + i] = x->cpu_us;
    st[i] = x->status;
    st[k + i] = x->status == LT_OK ? x->outputs[0].frame : -1;
  }
  pc->seq = c[0].seq;
  pc->worker = c[0].worker;
  pc->n_pack_seq = pc->n_pack_status = pc->n_pack_size = pc->n_pack_frame = k;
  pc->n_pack_service_us = pc->n_pack_start_us = pc->n_pack_cpu_us = k;
  pc->pack_seq = u;
  pc->pack_size = u + k;
  pc->pack_service_us = u + 2 * k;
  pc->pack_start_us = u + 3 * k;
  pc->pack_cpu_us = u + 4 * k;
  pc->pack_status = st;
  pc->pack_frame = st + k;
  pc->n_pack_errmsg = failed ? k : 0;
  pc->pack_errmsg = failed ? em : NULL;
  return 0;
}

/* done_out encodes the completions of a DONE: k consecutive ones whose first has pack = k
 * as one packed entry, the others one entry each. */
static int done_out(arena *a, const lt_msg_t *m, Lithium__Done *done) {
  uint32_t n = m->u.done.ncompl;
  done->batch = m->u.done.batch;
  if (n == 0) return 0;
  const lt_completion_t *c = m->u.done.compl ;
  if (c == NULL) return LT_EINVAL;
  Lithium__Completion **v = lt__arena_alloc(a, n * sizeof *v);
  Lithium__Completion *x = lt__arena_alloc(a, n * sizeof *x);
  if (v == NULL || x == NULL) return LT_ENOMEM;
  uint32_t e = 0;
  int rc = 0;
  for (uint32_t i = 0; i < n; e++) {
    uint32_t k = c[i].pack > 1 ? c[i].pack : 1;
    if (k > n - i) return LT_EINVAL;
    rc = k > 1 ? pack_compl_out(a, m, &c[i], k, &x[e]) : compl_out(a, m, &c[i], &x[e]);
    if (rc != 0) return rc;
    v[e] = &x[e];
    i += k;
  }
  done->n_completions = e;
  done->completions = v;
  return 0;
}

/* strs_out checks n strings about to be encoded (none NULL, valid UTF-8). */
static int strs_out(const char *const *v, uint32_t n) {
  if (n > 0 && v == NULL) return LT_EINVAL;
  for (uint32_t i = 0; i < n; i++)
    if (v[i] == NULL || str_out(v[i]) == NULL) return LT_EINVAL;
  return 0;
}

/* modinfo_out builds the ModuleInfo array of n entries (hex SHA-256 or ""). */
static int modinfo_out(arena *a, const lt_module_info_t *infos, uint32_t n,
                       Lithium__ModuleInfo ***out) {
  *out = NULL;
  if (n == 0) return 0;
  if (infos == NULL) return LT_EINVAL;
  Lithium__ModuleInfo **v = lt__arena_alloc(a, n * sizeof *v);
  Lithium__ModuleInfo *x = lt__arena_alloc(a, n * sizeof *x);
  if (v == NULL || x == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    lithium__module_info__init(&x[i]);
    if ((x[i].name = str_out(infos[i].name)) == NULL ||
        (x[i].sha256 = str_out(infos[i].sha256)) == NULL || !sha_valid(infos[i].sha256, true))
      return LT_EINVAL;
    v[i] = &x[i];
  }
  *out = v;
  return 0;
}

/* The protobuf-c bodies of one message; only the member for msg->type is used. */
typedef struct body_out {
  union {
    Lithium__Hello hello;
    Lithium__Welcome welcome;
    Lithium__Program program;
    Lithium__Execute execute;
    Lithium__Done done;
    Lithium__Fetch fetch;
    Lithium__Value value;
    Lithium__Release release;
    Lithium__Cancel cancel;
    Lithium__Heartbeat heartbeat;
    Lithium__Bye bye;
    Lithium__Error error;
    Lithium__Lost lost;
    Lithium__Status status;
    Lithium__StatusReply status_reply;
    Lithium__Module module;
  };
  Lithium__Oid oid; /* Fetch.id, Value.id */
} body_out;

/* encode_size_hint estimates the temporary arena for the arrays of `m` (execute, done,
 * release). */
static size_t encode_size_hint(const lt_msg_t *m) {
  size_t n = 256;
  if (m->type == LT_MSG_EXECUTE && m->u.execute.instrs != NULL) {
    for (uint32_t i = 0; i < m->u.execute.ninstrs; i++) {
      const lt_instr_t *in = &m->u.execute.instrs[i];
      n += sizeof(Lithium__Instr) + 8 +
           in->ninputs * (sizeof(Lithium__Input) + sizeof(Lithium__Oid) + 8) +
           in->noutputs * (sizeof(Lithium__Oid) + 8) +
           (size_t)in->nmore * (sizeof(Lithium__Stage) + 8);
    }
  } else if (m->type == LT_MSG_DONE && m->u.done.compl != NULL) {
    for (uint32_t i = 0; i < m->u.done.ncompl; i++)
      n += sizeof(Lithium__Completion) + 8 + 7 * 8 + /* a pack member's share of its arrays */
           m->u.done.compl [i].noutputs * (sizeof(Lithium__OutputInfo) + 8);
  } else if (m->type == LT_MSG_RELEASE) {
    n += (size_t)m->u.release.nids * (sizeof(Lithium__Oid) + 8);
  } else if (m->type == LT_MSG_STATUS_REPLY) {
    n += (size_t)m->u.status_reply.nmodules * (sizeof(Lithium__ModuleInfo) + 16);
  } else if (m->type == LT_MSG_WELCOME) {
    n += (size_t)m->u.welcome.nmodules * (sizeof(Lithium__ModuleInfo) + 16);
  }
  return n;
}

static int body_out_fill(arena *a, const lt_msg_t *m, body_out *b, Lithium__Envelope *env) {
  int rc = 0;
  env->body_case = (Lithium__Envelope__BodyCase)(m->type + 1);
  switch (m->type) {
  case LT_MSG_HELLO:
    lithium__hello__init(&b->hello);
    b->hello.version = m->u.hello.version;
    b->hello.client_id = m->u.hello.client_id;
    b->hello.inline_max = m->u.hello.inline_max;
    b->hello.secret = m->u.hello.secret;
    if ((b->hello.name = str_out(m->u.hello.name)) == NULL ||
        strs_out(m->u.hello.modules, m->u.hello.nmodules) != 0)
      return LT_EINVAL;
    b->hello.n_modules = m->u.hello.nmodules;
    b->hello.modules = (char **)m->u.hello.modules;
    env->hello = &b->hello;
    return 0;
  case LT_MSG_WELCOME:
    lithium__welcome__init(&b->welcome);
    b->welcome.version = m->u.welcome.version;
    b->welcome.cores = m->u.welcome.cores;
    b->welcome.threads = m->u.welcome.threads;
    b->welcome.speed = m->u.welcome.speed;
    b->welcome.cpus = m->u.welcome.cpus;
    b->welcome.now_us = m->u.welcome.now_us;
    b->welcome.max_frame = m->u.welcome.max_frame;
    b->welcome.incarnation = m->u.welcome.incarnation;
    if (m->u.welcome.ncrashed > 0 && m->u.welcome.crashed == NULL) return LT_EINVAL;
    b->welcome.n_crashed = m->u.welcome.ncrashed;
    b->welcome.crashed = m->u.welcome.crashed;
    b->welcome.crash_signal = m->u.welcome.crash_signal;
    b->welcome.crashed_incarnation = m->u.welcome.crashed_incarnation;
    b->welcome.crash_culprit = m->u.welcome.crash_culprit;
    b->welcome.accept_modules = m->u.welcome.accept_modules;
    if ((b->welcome.server_id = str_out(m->u.welcome.server_id)) == NULL) return LT_EINVAL;
    if (m->u.welcome.same_host != NULL &&
        (b->welcome.same_host = str_out(m->u.welcome.same_host)) == NULL)
      return LT_EINVAL;
    b->welcome.n_modules = m->u.welcome.nmodules;
    env->welcome = &b->welcome;
    return modinfo_out(a, m->u.welcome.modules, m->u.welcome.nmodules, &b->welcome.modules);
  case LT_MSG_PROGRAM:
    lithium__program__init(&b->program);
    if (strs_out(m->u.program.kernels, m->u.program.nkernels) != 0 ||
        strs_out(m->u.program.peers, m->u.program.npeers) != 0)
      return LT_EINVAL;
    b->program.n_kernels = m->u.program.nkernels;
    b->program.kernels = (char **)m->u.program.kernels;
    b->program.n_peers = m->u.program.npeers;
    b->program.peers = (char **)m->u.program.peers;
    env->program = &b->program;
    return 0;
  case LT_MSG_EXECUTE: {
    lithium__execute__init(&b->execute);
    b->execute.max_active = m->u.execute.max_active;
    b->execute.timeout_ms = m->u.execute.timeout_ms;
    uint32_t n = m->u.execute.ninstrs;
    if (n > 0) {
      if (m->u.execute.instrs == NULL) return LT_EINVAL;
      Lithium__Instr **v = lt__arena_alloc(a, n * sizeof *v);
      Lithium__Instr *x = lt__arena_alloc(a, n * sizeof *x);
      if (v == NULL || x == NULL) return LT_ENOMEM;
      for (uint32_t i = 0; i < n; i++) {
        if ((rc = instr_out(a, m, &m->u.execute.instrs[i], &x[i])) != 0) return rc;
        v[i] = &x[i];
      }
      b->execute.n_instrs = n;
      b->execute.instrs = v;
    }
    env->execute = &b->execute;
    return 0;
  }
  case LT_MSG_DONE: {
    lithium__done__init(&b->done);
    env->done = &b->done;
    return done_out(a, m, &b->done);
  }
  case LT_MSG_FETCH:
    lithium__fetch__init(&b->fetch);
    lithium__oid__init(&b->oid);
    b->oid.client = m->u.fetch.id.client;
    b->oid.seq = m->u.fetch.id.seq;
    b->fetch.id = &b->oid;
    b->fetch.release = m->u.fetch.release;
    b->fetch.secret = m->u.fetch.secret;
    b->fetch.max_frame = m->u.fetch.max_frame;
    b->fetch.shm = m->u.fetch.shm;
    env->fetch = &b->fetch;
    return 0;
  case LT_MSG_VALUE:
    lithium__value__init(&b->value);
    if (frame_out(m, m->u.value.frame) != 0) return LT_EINVAL;
    b->value.status = m->u.value.status;
    b->value.frame = m->u.value.frame;
    if ((b->value.errmsg = str_out(m->u.value.errmsg)) == NULL) return LT_EINVAL;
    lithium__oid__init(&b->oid);
    b->oid.client = m->u.value.id.client;
    b->oid.seq = m->u.value.id.seq;
    b->value.id = &b->oid;
    env->value = &b->value;
    return 0;
  case LT_MSG_RELEASE:
    lithium__release__init(&b->release);
    b->release.n_ids = m->u.release.nids;
    b->release.secret = m->u.release.secret;
    env->release = &b->release;
    return oids_out(a, m->u.release.ids, m->u.release.nids, &b->release.ids);
  case LT_MSG_CANCEL:
    lithium__cancel__init(&b->cancel);
    if (m->u.cancel.nseqs > 0 && m->u.cancel.seqs == NULL) return LT_EINVAL;
    b->cancel.n_seqs = m->u.cancel.nseqs;
    b->cancel.seqs = m->u.cancel.seqs;
    env->cancel = &b->cancel;
    return 0;
  case LT_MSG_HEARTBEAT:
    lithium__heartbeat__init(&b->heartbeat);
    b->heartbeat.seq = m->u.heartbeat.seq;
    b->heartbeat.now_us = m->u.heartbeat.now_us;
    b->heartbeat.draining = m->u.heartbeat.draining;
    b->heartbeat.dones = m->u.heartbeat.dones;
    env->heartbeat = &b->heartbeat;
    return 0;
  case LT_MSG_BYE:
    lithium__bye__init(&b->bye);
    env->bye = &b->bye;
    return 0;
  case LT_MSG_ERROR:
    lithium__error__init(&b->error);
    b->error.code = m->u.error.code;
    if ((b->error.message = str_out(m->u.error.message)) == NULL) return LT_EINVAL;
    env->error = &b->error;
    return 0;
  case LT_MSG_LOST:
    lithium__lost__init(&b->lost);
    if (strs_out(m->u.lost.holders, m->u.lost.nholders) != 0) return LT_EINVAL;
    b->lost.n_holders = m->u.lost.nholders;
    b->lost.holders = (char **)m->u.lost.holders;
    env->lost = &b->lost;
    return 0;
  case LT_MSG_STATUS:
    lithium__status__init(&b->status);
    env->status = &b->status;
    return 0;
  case LT_MSG_STATUS_REPLY: {
    lithium__status_reply__init(&b->status_reply);
    b->status_reply.protocol = m->u.status_reply.protocol;
    b->status_reply.uptime_ms = m->u.status_reply.uptime_ms;
    b->status_reply.cores = m->u.status_reply.cores;
    b->status_reply.speed = m->u.status_reply.speed;
    b->status_reply.sessions = m->u.status_reply.sessions;
    b->status_reply.value_bytes = m->u.status_reply.value_bytes;
    b->status_reply.draining = m->u.status_reply.draining;
    if ((b->status_reply.server_id = str_out(m->u.status_reply.server_id)) == NULL ||
        (b->status_reply.version = str_out(m->u.status_reply.version)) == NULL ||
        (b->status_reply.endpoint = str_out(m->u.status_reply.endpoint)) == NULL)
      return LT_EINVAL;
    b->status_reply.n_modules = m->u.status_reply.nmodules;
    env->status_reply = &b->status_reply;
    return modinfo_out(a, m->u.status_reply.modules, m->u.status_reply.nmodules,
                       &b->status_reply.modules);
  }
  case LT_MSG_MODULE:
    lithium__module__init(&b->module);
    if (frame_out(m, m->u.module.frame) != 0 || m->u.module.name == NULL ||
        m->u.module.name[0] == '\0' || !sha_valid(m->u.module.sha256, false) ||
        (m->u.module.frame >= 0 && m->frames[m->u.module.frame].len != m->u.module.size))
      return LT_EINVAL;
    if ((b->module.name = str_out(m->u.module.name)) == NULL) return LT_EINVAL;
    b->module.sha256 = (char *)m->u.module.sha256;
    b->module.size = m->u.module.size;
    b->module.frame = m->u.module.frame;
    env->module = &b->module;
    return 0;
  default:
    return LT_EINVAL;
  }
}

int lt__msg_encode(const lt_msg_t *msg, void **hdr, size_t *hdrlen) {
  if (msg == NULL || hdr == NULL || hdrlen == NULL) return LT_EINVAL;
  *hdr = NULL;
  *hdrlen = 0;
  if (msg->type <= LT_MSG_NONE || msg->type > LT_MSG_LAST) return LT_EINVAL;
  if (msg->nframes > 0 && msg->frames == NULL) return LT_EINVAL;

  Lithium__Envelope env = LITHIUM__ENVELOPE__INIT;
  Lithium__Load load = LITHIUM__LOAD__INIT;
  if (msg->has_load) {
    load.active = msg->load.active;
    load.queued = msg->load.queued;
    load.parked = msg->load.parked;
    load.completed = msg->load.completed;
    load.cpu = msg->load.cpu;
    load.values_held = msg->load.values_held;
    load.threads = msg->load.threads;
    load.peer_in = msg->load.peer_in;
    load.peer_out = msg->load.peer_out;
    load.incarnation = msg->load.incarnation;
    load.stopping = msg->load.stopping;
    load.shm_in = msg->load.shm_in;
    load.shm_out = msg->load.shm_out;
    load.shm_values_in = msg->load.shm_values_in;
    load.shm_values_out = msg->load.shm_values_out;
    load.shm_fallbacks = msg->load.shm_fallbacks;
    load.shm_us = msg->load.shm_us;
    env.load = &load;
  }
  /* Only bodies with arrays of sub-messages need memory beyond the stack. */
  arena *a = NULL;
  if (msg->type == LT_MSG_EXECUTE || msg->type == LT_MSG_DONE || msg->type == LT_MSG_RELEASE ||
      msg->type == LT_MSG_STATUS_REPLY || msg->type == LT_MSG_WELCOME) {
    if ((a = lt__arena_new(encode_size_hint(msg))) == NULL) return LT_ENOMEM;
  }
  body_out b;
  int rc = body_out_fill(a, msg, &b, &env);
  if (rc == 0) {
    size_t n = lithium__envelope__get_packed_size(&env);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
      rc = LT_ENOMEM;
    } else {
      size_t w = lithium__envelope__pack(&env, buf);
      assert(w == n);
      (void)w;
      *hdr = buf;
      *hdrlen = n;
    }
  }
  lt__arena_free(a);
  return rc;
}

/* ---------------------------------------------------------------------------------------
 * Small things. */

const char *lt__msg_type_name(lt_msg_type_t t) {
  static const char *const names[] = {"none",         "hello", "welcome", "program", "execute",
                                      "done",         "fetch", "value",   "release", "cancel",
                                      "heartbeat",    "bye",   "error",   "lost",    "status",
                                      "status_reply", "module"};
  if ((unsigned)t >= sizeof names / sizeof names[0]) return "unknown";
  return names[t];
}

void lt__codec_limits_default(lt_codec_limits_t *lim) {
  lim->max_header = (size_t)4 << 20;
  lim->max_frames = 4096;
  lim->max_frame = (size_t)1 << 30;
  lim->max_items = 65536;
  lim->max_string = 4096;
}
