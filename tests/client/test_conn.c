/* test_conn.c: a server connection's socket and its monitor (client/conn.c). Closing many
 * connections that are retrying a refused connect must leave the ZeroMQ context working:
 * libzmq sends monitor events from its I/O thread with blocking sends, so a monitor whose
 * reader was closed first would hang that thread and every other connection with it. A value
 * sent as a frame goes without a copy, and its reference goes exactly once, when ZeroMQ is
 * done with the frame (here: when the socket holding it unsent closes). */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <lithium/error.h>

#include "conn.h"

#define CONNS  100
#define ROUNDS 3

/* bound_endpoint binds `sock` to a free loopback port and writes its endpoint. */
static void bound_endpoint(void *sock, char *ep, size_t len) {
  cr_assert_eq(zmq_bind(sock, "tcp://127.0.0.1:*"), 0);
  cr_assert_eq(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len), 0);
}

/* refusing_endpoint holds a loopback port that refuses every connect: a TCP socket bound to
 * it and never listening. Holding the port (rather than closing a socket that had it) means
 * no other process can take it while the test runs, so nothing can ever accept there. */
static int refusing_endpoint(char *ep, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(fd, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  snprintf(ep, len, "tcp://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
  return fd;
}

/* still_moves checks a message crosses the context's live DEALER -> ROUTER pair in time. */
static void still_moves(void *dealer, void *router, int round) {
  cr_assert_eq(zmq_send(dealer, "ping", 4, 0), 4);
  zmq_pollitem_t it = {.socket = router, .events = ZMQ_POLLIN};
  cr_assert_eq(zmq_poll(&it, 1, 5000), 1, "round %d: the context's I/O thread is stuck", round);
  char buf[64];
  cr_assert_gt(zmq_recv(router, buf, sizeof buf, 0), 0); /* routing id */
  cr_assert_eq(zmq_recv(router, buf, sizeof buf, 0), 4);
}

Test(conn, shutting_retrying_connections_keeps_the_context_alive, .timeout = 60) {
  void *ctx = zmq_ctx_new();
  int zero = 0;
  void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
  char live[256], dead[256];
  bound_endpoint(router, live, sizeof live);
  cr_assert_eq(zmq_connect(dealer, live), 0);
  /* A port held and never listened on: connects are refused and retried every 100 ms. */
  int hold = refusing_endpoint(dead, sizeof dead);
  static lt_conn_t conns[CONNS];
  lt_conn_auth_t auth = {.pub = "", .sec = "", .server = ""};
  lt_conn_program_t prog = {0};
  lt_net_t net = {&lt__net_zmq, ctx};
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < CONNS; k++)
      cr_assert_eq(lt__conn_open(&conns[k], &net, dead, 1, 0, &prog, &auth, 0), LT_OK);
    /* Shut them while their first reconnect attempts fire (and emit monitor events). */
    usleep(90 * 1000);
    for (int k = 0; k < CONNS; k++) {
      lt__conn_shut(&conns[k]);
      usleep(200);
    }
    still_moves(dealer, router, round);
    for (int k = 0; k < CONNS; k++)
      lt__conn_close(&conns[k]);
  }
  zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(dealer);
  zmq_close(router);
  zmq_ctx_term(ctx);
  close(hold);
}

static atomic_int freed;

static void count_free(void *data, void *hint) {
  (void)data;
  (void)hint;
  atomic_fetch_add(&freed, 1);
}

Test(conn, a_sent_value_is_released_once_zeromq_is_done_with_it, .timeout = 60) {
  void *ctx = zmq_ctx_new();
  /* A port that refuses every connect: the message waits in the socket, unsent. */
  char dead[256];
  int hold = refusing_endpoint(dead, sizeof dead);
  lt_conn_t c;
  lt_conn_auth_t auth = {.pub = "", .sec = "", .server = ""};
  lt_conn_program_t prog = {0};
  lt_net_t net = {&lt__net_zmq, ctx};
  cr_assert_eq(lt__conn_open(&c, &net, dead, 1, 0, &prog, &auth, 0), LT_OK);
  static char bytes[1 << 16];
  lt_value_t *v = lt__value_user(bytes, sizeof bytes, count_free, NULL);
  cr_assert_not_null(v);
  lt_msg_t m = {.type = LT_MSG_VALUE};
  m.u.value.frame = 0;
  lt_bytes_t frame = {v->data, v->len};
  m.nframes = 1;
  m.frames = &frame;
  cr_assert_eq(lt__conn_send(&c, &m, &v, 0), LT_OK);
  lt__value_unref(v);
  cr_assert_eq(atomic_load(&freed), 0, "released while ZeroMQ holds the frame");
  lt__conn_close(&c);
  cr_assert_eq(zmq_ctx_term(ctx), 0);
  cr_assert_eq(atomic_load(&freed), 1);
  close(hold);
}
