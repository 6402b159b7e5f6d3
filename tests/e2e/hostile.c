/* hostile.c: the hostile server stand-in of the end-to-end tests (hostile.h). It owns its
 * socket and context; nothing else touches them while its thread runs. */
#include "hostile.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include <lithium/error.h>
#include "codec.h"

static void hostile_send(lt_hostile_t *h, zmq_msg_t *rid, lt_msg_t *m) {
  m->has_load = true;
  m->load.threads = 2;
  m->load.incarnation = 42;
  if (h->mode == LT_HOSTILE_LOSES && atomic_load(&h->kept) > 0) {
    m->load.active = 2;
    m->load.cpu = 1.5f; /* computing, for all a load report can tell */
  }
  void *hdr;
  size_t len;
  if (lt__msg_encode(m, &hdr, &len) != LT_OK) return;
  zmq_msg_t id;
  zmq_msg_init(&id);
  zmq_msg_copy(&id, rid);
  zmq_msg_send(&id, h->sock, ZMQ_SNDMORE);
  zmq_send(h->sock, hdr, len, m->nframes > 0 ? ZMQ_SNDMORE : 0);
  free(hdr);
  for (uint32_t i = 0; i < m->nframes; i++)
    zmq_send(h->sock, m->frames[i].data, m->frames[i].len, i + 1 < m->nframes ? ZMQ_SNDMORE : 0);
}

/* answer_pack answers the packed instruction `in` (k members) as its PACK_* mode says: a
 * packed completion that claims each member it names done, with the value -1 inline, and
 * names the wrong members. A pack of 2 cut short is a single completion of member 0. */
static void answer_pack(lt_hostile_t *h, zmq_msg_t *rid, const lt_instr_t *in) {
  static const unsigned char minus_one[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uint32_t k = in->pack;
  lt_completion_t c[LT_MAX_PACK];
  lt_output_info_t o[LT_MAX_PACK];
  lt_bytes_t fr[LT_MAX_PACK];
  uint32_t n = h->mode == LT_HOSTILE_PACK_SHORT ? k - 1 : k;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t seq = in->outputs[i].seq;
    if (h->mode == LT_HOSTILE_PACK_TWICE && i == k - 1) seq = in->outputs[0].seq;
    if (h->mode == LT_HOSTILE_PACK_UNKNOWN) seq += 7; /* an id between two instructions' */
    o[i] = (lt_output_info_t){.size = sizeof minus_one, .frame = (int32_t)i};
    fr[i] = (lt_bytes_t){minus_one, sizeof minus_one};
    c[i] = (lt_completion_t){
        .seq = seq, .status = LT_OK, .errmsg = "", .noutputs = 1, .outputs = &o[i], .answer = -1};
  }
  c[0].pack = n > 1 ? n : 0;
  lt_msg_t out = {.type = LT_MSG_DONE, .nframes = n, .frames = fr};
  out.u.done.ncompl = n;
  out.u.done.compl = c;
  atomic_fetch_add(&h->packs, 1);
  hostile_send(h, rid, &out);
}

/* answer_packs answers an EXECUTE in a PACK_* mode: each pack out of shape, each single
 * instruction "canceled, never ran" (it comes again, in a pack). */
static void answer_packs(lt_hostile_t *h, zmq_msg_t *rid, const lt_msg_t *in) {
  for (uint32_t i = 0; i < in->u.execute.ninstrs; i++) {
    const lt_instr_t *ins = &in->u.execute.instrs[i];
    if (ins->pack > 1) {
      answer_pack(h, rid, ins);
      continue;
    }
    lt_completion_t c = {
        .seq = ins->seq, .status = LT_ECANCELED, .errmsg = "canceled", .answer = -1};
    lt_msg_t out = {.type = LT_MSG_DONE};
    out.u.done.ncompl = 1;
    out.u.done.compl = &c;
    hostile_send(h, rid, &out);
  }
}

/* answer answers one decoded message `in` from the peer `rid`. */
static void answer(lt_hostile_t *h, zmq_msg_t *rid, const lt_msg_t *in, uint64_t *bogus) {
  lt_msg_t out = {0};
  if (in->type == LT_MSG_HELLO) {
    out.type = LT_MSG_WELCOME;
    out.u.welcome.version = LT_PROTO_VERSION;
    out.u.welcome.server_id = "hostile";
    out.u.welcome.cores = 1;
    out.u.welcome.threads = 2;
    out.u.welcome.speed = 100.0; /* it says it is fast, to draw work */
    out.u.welcome.incarnation = 42;
    atomic_fetch_add(&h->welcomes, 1);
    atomic_store(&h->kept, 0); /* a new session: no done said sent yet */
    hostile_send(h, rid, &out);
  } else if (h->mode == LT_HOSTILE_MUTE) {
    if (in->type == LT_MSG_EXECUTE && atomic_load(&h->welcomes) > 1)
      atomic_fetch_add(&h->reworks, 1);
    return;
  } else if (in->type == LT_MSG_HEARTBEAT) {
    out.type = LT_MSG_HEARTBEAT;
    out.u.heartbeat.seq = in->u.heartbeat.seq;
    if (h->mode == LT_HOSTILE_LOSES && atomic_load(&h->kept) > 0) out.u.heartbeat.dones = 1;
    hostile_send(h, rid, &out);
  } else if (h->mode == LT_HOSTILE_STRAY && in->type == LT_MSG_FETCH) {
    atomic_fetch_add(&h->fetches, 1);
    out.type = LT_MSG_VALUE;
    out.u.value.id = in->u.fetch.id;
    out.u.value.id.seq += 1000003; /* not what was asked */
    out.u.value.status = LT_ENOENT;
    out.u.value.errmsg = "astray";
    out.u.value.frame = -1;
    hostile_send(h, rid, &out);
    lt_msg_t e = {.type = LT_MSG_ERROR};
    e.u.error.code = LT_ESTATE;
    e.u.error.message = "send hello first";
    hostile_send(h, rid, &e);
  } else if (in->type == LT_MSG_EXECUTE && h->mode == LT_HOSTILE_LOSES) {
    atomic_fetch_add(&h->kept, (int)in->u.execute.ninstrs);
  } else if (in->type == LT_MSG_EXECUTE && h->mode >= LT_HOSTILE_PACK_TWICE) {
    answer_packs(h, rid, in);
  } else if (in->type == LT_MSG_EXECUTE && in->u.execute.ninstrs > 0) {
    /* Keeps the work; answers for an instruction nobody gave it. */
    lt_completion_t c = {.seq = 7 + (*bogus)++ * 1000003, .status = LT_OK, .errmsg = ""};
    out.type = LT_MSG_DONE;
    out.u.done.ncompl = 1;
    out.u.done.compl = &c;
    hostile_send(h, rid, &out);
  }
}

/* Most parts of a message it reads: a routing id, a header and LT_MAX_PACK payload frames
 * of a pack with room to spare; the rest of a longer one is dropped with it. */
#define HOSTILE_PARTS ((int)LT_MAX_PACK + 64)

/* read_one reads one message's parts (at most HOSTILE_PARTS) into parts and answers it. */
static void read_one(lt_hostile_t *h, zmq_msg_t *parts, lt_bytes_t *fr, uint64_t *bogus) {
  int n = 0, more = 1, whole = 1;
  while (more) {
    zmq_msg_t *p = &parts[n < HOSTILE_PARTS ? n : HOSTILE_PARTS];
    zmq_msg_init(p);
    if (zmq_msg_recv(p, h->sock, 0) < 0) {
      zmq_msg_close(p);
      whole = 0;
      break;
    }
    more = zmq_msg_more(p);
    if (n < HOSTILE_PARTS) {
      n++;
    } else {
      zmq_msg_close(p);
      whole = 0;
    }
  }
  for (int i = 1; i < n; i++)
    fr[i - 1] = (lt_bytes_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
  lt_msg_t in;
  if (whole && n >= 2 && lt__msg_decode(&in, fr, (size_t)n - 1, NULL) == LT_OK) {
    answer(h, &parts[0], &in, bogus);
    lt__msg_clear(&in);
  }
  for (int i = 0; i < n; i++)
    zmq_msg_close(&parts[i]);
}

static void *hostile_main(void *arg) {
  lt_hostile_t *h = arg;
  uint64_t bogus = 1;
  zmq_msg_t *parts = calloc(HOSTILE_PARTS + 1, sizeof *parts);
  lt_bytes_t *fr = calloc(HOSTILE_PARTS, sizeof *fr);
  while (parts != NULL && fr != NULL && !atomic_load(&h->stop)) {
    zmq_pollitem_t it = {.socket = h->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 50) > 0) read_one(h, parts, fr, &bogus);
  }
  free(parts);
  free(fr);
  return NULL;
}

void hostile_start(lt_hostile_t *h, lt_hostile_mode_t mode) {
  memset(h, 0, sizeof *h);
  h->mode = mode;
  h->ctx = zmq_ctx_new();
  cr_assert_not_null(h->ctx);
  h->sock = zmq_socket(h->ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt(h->sock, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(h->sock, "tcp://127.0.0.1:*"), 0);
  size_t len = sizeof h->endpoint;
  zmq_getsockopt(h->sock, ZMQ_LAST_ENDPOINT, h->endpoint, &len);
  cr_assert_eq(pthread_create(&h->thread, NULL, hostile_main, h), 0);
}

void hostile_stop(lt_hostile_t *h) {
  atomic_store(&h->stop, 1);
  pthread_join(h->thread, NULL);
  zmq_close(h->sock);
  zmq_ctx_term(h->ctx);
}

void hostile_run_start(lt_hostile_run_t *r, lt_hostile_mode_t mode, int honest, lt_skel_t *prog,
                       const char *const *opts) {
  hostile_start(&r->h, mode);
  r->honest = honest;
  if (honest) start_server(&r->p, "honest", 2);
  cr_assert_eq(lt_eval_new(&r->ev, prog), LT_OK);
  for (size_t i = 0; opts[i] != NULL; i += 2)
    cr_assert_eq(lt_eval_set(r->ev, opts[i], opts[i + 1]), LT_OK, "%s", opts[i]);
  cr_assert_eq(lt_eval_add_host(r->ev, r->h.endpoint), LT_OK);
  if (honest) cr_assert_eq(lt_eval_add_host(r->ev, r->p.endpoint), LT_OK);
  cr_assert_eq(lt_eval_start(r->ev), LT_OK);
}

void hostile_run_stop(lt_hostile_run_t *r) {
  lt_eval_free(r->ev);
  if (r->honest) lt__proc_stop(&r->p, 5000);
  hostile_stop(&r->h);
}
