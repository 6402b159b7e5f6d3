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
  void *hdr;
  size_t len;
  if (lt__msg_encode(m, &hdr, &len) != LT_OK) return;
  zmq_msg_t id;
  zmq_msg_init(&id);
  zmq_msg_copy(&id, rid);
  zmq_msg_send(&id, h->sock, ZMQ_SNDMORE);
  zmq_send(h->sock, hdr, len, 0);
  free(hdr);
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
    hostile_send(h, rid, &out);
  } else if (h->mode == LT_HOSTILE_MUTE) {
    if (in->type == LT_MSG_EXECUTE && atomic_load(&h->welcomes) > 1)
      atomic_fetch_add(&h->reworks, 1);
    return;
  } else if (in->type == LT_MSG_HEARTBEAT) {
    out.type = LT_MSG_HEARTBEAT;
    out.u.heartbeat.seq = in->u.heartbeat.seq;
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
  } else if (in->type == LT_MSG_EXECUTE && in->u.execute.ninstrs > 0) {
    /* Keeps the work; answers for an instruction nobody gave it. */
    lt_completion_t c = {.seq = 7 + (*bogus)++ * 1000003, .status = LT_OK, .errmsg = ""};
    out.type = LT_MSG_DONE;
    out.u.done.ncompl = 1;
    out.u.done.compl = &c;
    hostile_send(h, rid, &out);
  }
}

static void *hostile_main(void *arg) {
  lt_hostile_t *h = arg;
  uint64_t bogus = 1;
  while (!atomic_load(&h->stop)) {
    zmq_pollitem_t it = {.socket = h->sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 50) <= 0) continue;
    zmq_msg_t parts[16];
    int n = 0, more = 1;
    while (more && n < 16) {
      zmq_msg_init(&parts[n]);
      if (zmq_msg_recv(&parts[n], h->sock, 0) < 0) {
        zmq_msg_close(&parts[n]);
        break;
      }
      more = zmq_msg_more(&parts[n]);
      n++;
    }
    lt_bytes_t fr[15];
    for (int i = 1; i < n; i++)
      fr[i - 1] = (lt_bytes_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
    lt_msg_t in;
    if (n >= 2 && lt__msg_decode(&in, fr, (size_t)n - 1, NULL) == LT_OK) {
      answer(h, &parts[0], &in, &bogus);
      lt__msg_clear(&in);
    }
    for (int i = 0; i < n; i++)
      zmq_msg_close(&parts[i]);
  }
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
