/* test_zmq_uv.c: the ZeroMQ/libuv glue: whole multipart messages reach the callback, a
 * burst larger than the drain budget is fully delivered (edge-triggered ZMQ_FD), messages
 * with too many parts are cut and flagged without disturbing the next one, replies sent
 * from the callback arrive, and closing leaves a loop that closes with 0. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <lithium/error.h>
#include "zmq_uv.h"

typedef struct fx {
  uv_loop_t loop;
  void *ctx, *router, *dealer;
  lt_zuv_t z;
  int nmsgs;
  int want;
  size_t last_n;
  bool last_truncated;
  char last_first[64];
  int ntruncated;
  bool echo;
  uv_timer_t timer;
} fx_t;

static void on_msg(lt_zuv_t *z, zmq_msg_t *parts, size_t n, bool truncated) {
  fx_t *f = z->data;
  f->nmsgs++;
  f->last_n = n;
  f->last_truncated = truncated;
  f->ntruncated += truncated;
  if (n >= 2) {
    size_t len = zmq_msg_size(&parts[1]);
    if (len >= sizeof f->last_first) len = sizeof f->last_first - 1;
    memcpy(f->last_first, zmq_msg_data(&parts[1]), len);
    f->last_first[len] = '\0';
  }
  if (f->echo) {
    /* Reply [routing id][copy of every other part]. */
    zmq_msg_t out[8];
    size_t k = n < 8 ? n : 8;
    for (size_t i = 0; i < k; i++) {
      zmq_msg_init(&out[i]);
      zmq_msg_copy(&out[i], &parts[i]);
    }
    cr_assert_eq(lt__zuv_send(z, out, k), LT_OK);
  }
  if (f->nmsgs >= f->want) uv_stop(&f->loop);
}

static void on_timeout(uv_timer_t *t) {
  (void)t;
  cr_assert_fail("zmq_uv test timed out");
}

static void setup(fx_t *f, size_t max_parts) {
  memset(f, 0, sizeof *f);
  cr_assert_eq(uv_loop_init(&f->loop), 0);
  f->ctx = zmq_ctx_new();
  f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
  f->dealer = zmq_socket(f->ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(f->router, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(f->dealer, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_bind(f->router, "tcp://127.0.0.1:*"), 0);
  char ep[256];
  size_t len = sizeof ep;
  zmq_getsockopt(f->router, ZMQ_LAST_ENDPOINT, ep, &len);
  cr_assert_eq(zmq_connect(f->dealer, ep), 0);
  cr_assert_eq(lt__zuv_start(&f->z, &f->loop, f->router, max_parts, on_msg, f), LT_OK);
  uv_timer_init(&f->loop, &f->timer);
  uv_timer_start(&f->timer, on_timeout, 10000, 0);
}

static void run_until(fx_t *f, int want) {
  f->want = want;
  if (f->nmsgs < want) uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void teardown(fx_t *f) {
  lt__zuv_close(&f->z, NULL);
  uv_close((uv_handle_t *)&f->timer, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(&f->loop), 0);
  zmq_close(f->dealer);
  zmq_close(f->router);
  zmq_ctx_term(f->ctx);
}

static void send_parts(void *sock, int nparts, const char *first) {
  for (int i = 0; i < nparts; i++) {
    const char *p = i == 0 ? first : "x";
    cr_assert_geq(zmq_send(sock, p, strlen(p), i + 1 < nparts ? ZMQ_SNDMORE : 0), 0);
  }
}

Test(zmq_uv, whole_messages) {
  fx_t f;
  setup(&f, 16);
  send_parts(f.dealer, 3, "hello");
  run_until(&f, 1);
  cr_assert_eq(f.nmsgs, 1);
  cr_assert_eq(f.last_n, 4, "routing id + 3 parts");
  cr_assert(!f.last_truncated);
  cr_assert_str_eq(f.last_first, "hello");
  teardown(&f);
}

/* More messages than one drain handles: the rest must still arrive although ZMQ_FD will
 * not signal again for them. */
Test(zmq_uv, burst_beyond_budget) {
  fx_t f;
  setup(&f, 4);
  enum { N = 3000 };
  int hwm = 0;
  zmq_setsockopt(f.dealer, ZMQ_SNDHWM, &hwm, sizeof hwm);
  for (int i = 0; i < N; i++) {
    char b[32];
    snprintf(b, sizeof b, "m%d", i);
    send_parts(f.dealer, 1, b);
  }
  run_until(&f, N);
  cr_assert_eq(f.nmsgs, N);
  cr_assert_str_eq(f.last_first, "m2999");
  teardown(&f);
}

Test(zmq_uv, too_many_parts_are_cut) {
  fx_t f;
  setup(&f, 4);
  send_parts(f.dealer, 50, "big");
  send_parts(f.dealer, 2, "after");
  run_until(&f, 2);
  cr_assert_eq(f.nmsgs, 2);
  cr_assert_eq(f.ntruncated, 1);
  cr_assert(!f.last_truncated, "the next message is whole");
  cr_assert_eq(f.last_n, 3);
  cr_assert_str_eq(f.last_first, "after");
  teardown(&f);
}

/* Replies sent from inside the callback reach the peer, and messages that arrive while
 * sending are still drained. */
Test(zmq_uv, echo_from_callback) {
  fx_t f;
  setup(&f, 8);
  f.echo = true;
  enum { N = 500 };
  for (int i = 0; i < N; i++)
    send_parts(f.dealer, 2, "ping");
  run_until(&f, N);
  cr_assert_eq(f.nmsgs, N);
  int got = 0;
  for (;;) {
    zmq_pollitem_t it = {.socket = f.dealer, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, got == N ? 0 : 2000) <= 0) break;
    char buf[16];
    int more;
    size_t ml = sizeof more;
    int len = zmq_recv(f.dealer, buf, sizeof buf, 0);
    cr_assert_eq(len, 4);
    cr_assert_eq(memcmp(buf, "ping", 4), 0);
    zmq_getsockopt(f.dealer, ZMQ_RCVMORE, &more, &ml);
    cr_assert(more);
    cr_assert_eq(zmq_recv(f.dealer, buf, sizeof buf, 0), 1);
    got++;
  }
  cr_assert_eq(got, N);
  teardown(&f);
}

Test(zmq_uv, send_to_unknown_peer_is_dropped) {
  fx_t f;
  setup(&f, 4);
  zmq_msg_t parts[2];
  zmq_msg_init_size(&parts[0], 5);
  memcpy(zmq_msg_data(&parts[0]), "nobod", 5);
  zmq_msg_init_size(&parts[1], 1);
  /* ROUTER_MANDATORY is off: silently dropped, never blocks. */
  cr_assert_eq(lt__zuv_send(&f.z, parts, 2), LT_OK);
  send_parts(f.dealer, 1, "still-alive");
  run_until(&f, 1);
  cr_assert_str_eq(f.last_first, "still-alive");
  teardown(&f);
}
