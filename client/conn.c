/* conn.c: one link to a server over its transport (conn.h: ZeroMQ, net_zmq.c, or the
 * simulator's). Encodes with the codec, sends header + payload frames as one multipart
 * message, receives whole multipart messages. Knows nothing of instructions or scheduling.
 * Dispatcher thread only. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "conn.h"
#include "log.h"
#include "value.h"
#include "vec.h"

/* free_header is the zmq_free_fn of an encoded header. */
static void free_header(void *data, void *hint) {
  (void)hint;
  free(data);
}

int lt__conn_program(lt_conn_t *c, char *const *kernels, uint32_t nkernels,
                     const char *const *peers, uint32_t npeers, int64_t now_ms) {
  lt_msg_t prog = {.type = LT_MSG_PROGRAM};
  prog.u.program.nkernels = nkernels;
  prog.u.program.kernels = (const char **)kernels;
  prog.u.program.npeers = npeers;
  prog.u.program.peers = (const char **)peers;
  return lt__conn_send(c, &prog, NULL, now_ms);
}

int lt__conn_open(lt_conn_t *c, const lt_net_t *net, const char *endpoint, uint64_t client_id,
                  uint64_t inline_max, const lt_conn_program_t *prog, const lt_conn_auth_t *auth,
                  int64_t now_ms) {
  memset(c, 0, sizeof *c);
  c->net = net;
  c->endpoint = strdup(endpoint);
  if (c->endpoint == NULL) return LT_ENOMEM;
  int rc = net->ops->open(net->ctx, c, endpoint, auth);
  if (rc != LT_OK) return rc;
  c->opened_ms = c->last_recv_ms = now_ms;
  c->state = LT_CONN_HELLO;

  lt_msg_t hello = {.type = LT_MSG_HELLO};
  hello.u.hello.version = LT_PROTO_VERSION;
  hello.u.hello.client_id = client_id;
  hello.u.hello.name = "lithium-client";
  hello.u.hello.inline_max = inline_max;
  hello.u.hello.secret = auth->secret;
  hello.u.hello.modules = (const char **)prog->modules;
  hello.u.hello.nmodules = prog->nmodules;
  rc = lt__conn_send(c, &hello, NULL, now_ms);
  if (rc != LT_OK) return rc;
  return lt__conn_program(c, prog->kernels, prog->nkernels, auth->peers, auth->npeers, now_ms);
}

/* build_parts makes the parts of `m`: the encoded header `hdr` (taken) and its payload
 * frames, values as lt__value_msg_init makes them (a large one without a copy, holding a
 * reference until ZeroMQ is done with it), other frames copied. All or nothing: on LT_ENOMEM no
 * part is left open. */
static int build_parts(zmq_msg_t *parts, void *hdr, size_t hdrlen, const lt_msg_t *m,
                       lt_value_t *const *values) {
  if (zmq_msg_init_data(&parts[0], hdr, hdrlen, free_header, NULL) != 0) {
    free(hdr);
    return LT_ENOMEM;
  }
  for (uint32_t i = 0; i < m->nframes; i++) {
    zmq_msg_t *part = &parts[i + 1];
    int rc;
    if (values != NULL && values[i] != NULL) {
      rc = lt__value_msg_init(part, values[i]);
    } else {
      rc = zmq_msg_init_size(part, m->frames[i].len);
      if (rc == 0 && m->frames[i].len > 0)
        memcpy(zmq_msg_data(part), m->frames[i].data, m->frames[i].len);
    }
    if (rc != 0) {
      for (uint32_t k = 0; k <= i; k++)
        zmq_msg_close(&parts[k]);
      return LT_ENOMEM;
    }
  }
  return LT_OK;
}

/* send_parts sends parts[0..n) as one message; every part is sent or closed. */
static int send_parts(lt_conn_t *c, zmq_msg_t *parts, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += zmq_msg_size(&parts[i]);
  int rc = c->net->ops->send(c, parts, n);
  if (rc == LT_OK) c->bytes_out += len;
  return rc;
}

int lt__conn_send(lt_conn_t *c, const lt_msg_t *m, lt_value_t *const *values, int64_t now_ms) {
  void *hdr;
  size_t hdrlen;
  int rc = lt__msg_encode(m, &hdr, &hdrlen);
  if (rc != LT_OK) return rc;
  size_t n = (size_t)m->nframes + 1;
  zmq_msg_t stack[8];
  zmq_msg_t *parts = n <= sizeof stack / sizeof stack[0] ? stack : malloc(n * sizeof *parts);
  if (parts == NULL) {
    free(hdr);
    return LT_ENOMEM;
  }
  rc = build_parts(parts, hdr, hdrlen, m, values);
  if (rc == LT_OK) rc = send_parts(c, parts, n);
  if (parts != stack) free(parts);
  if (rc == LT_OK) c->last_send_ms = now_ms;
  return rc;
}

/* drop_rest discards the remaining parts of a multipart message. */
static void drop_rest(lt_conn_t *c, int more) {
  while (more) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (c->net->ops->recv(c, &part, 0, &more) != LT_OK) more = 0;
    c->bytes_in += zmq_msg_size(&part);
    zmq_msg_close(&part);
  }
}

int lt__conn_recv(lt_conn_t *c, lt_rx_t *rx, const lt_codec_limits_t *lim, int64_t now_ms) {
  rx->nparts = 0;
  int more = 1;
  for (;;) {
    if (rx->nparts == rx->cap) {
      size_t cap = rx->cap ? rx->cap * 2 : 8;
      if (cap > (size_t)lim->max_frames + 1) cap = (size_t)lim->max_frames + 1;
      if (cap == rx->cap) {
        drop_rest(c, more);
        lt__rx_clear(rx);
        return LT_ETOOBIG;
      }
      /* zmq_msg_t may hold small data inline, so parts move with zmq_msg_move. */
      zmq_msg_t *parts = malloc(cap * sizeof *parts);
      if (LT_VEC_RESIZE(rx->frames, rx->cap, cap) != LT_OK || parts == NULL) {
        free(parts);
        drop_rest(c, more);
        lt__rx_clear(rx);
        return LT_ENOMEM;
      }
      for (size_t i = 0; i < rx->nparts; i++) {
        zmq_msg_init(&parts[i]);
        zmq_msg_move(&parts[i], &rx->parts[i]);
        zmq_msg_close(&rx->parts[i]);
      }
      free(rx->parts);
      rx->parts = parts;
      rx->cap = cap;
    }
    zmq_msg_t *part = &rx->parts[rx->nparts];
    zmq_msg_init(part);
    int rc = c->net->ops->recv(c, part, rx->nparts == 0, &more);
    if (rc != LT_OK) {
      zmq_msg_close(part);
      lt__rx_clear(rx);
      return rc;
    }
    c->bytes_in += zmq_msg_size(part);
    rx->nparts++;
    if (!more) break;
  }
  c->last_recv_ms = now_ms;
  for (size_t i = 0; i < rx->nparts; i++) {
    rx->frames[i].data = zmq_msg_data(&rx->parts[i]);
    rx->frames[i].len = zmq_msg_size(&rx->parts[i]);
  }
  int rc = lt__msg_decode(&rx->msg, rx->frames, rx->nparts, lim);
  if (rc != LT_OK) {
    lt__rx_clear(rx);
    return rc;
  }
  return LT_OK;
}

lt_conn_event_t lt__conn_monitor(lt_conn_t *c) {
  return c->sock != NULL ? c->net->ops->monitor(c) : LT_CONN_EV_NONE;
}

int lt__conn_readable(lt_conn_t *c) {
  return c->sock != NULL && c->net->ops->readable(c);
}

void lt__conn_shut(lt_conn_t *c) {
  if (c->sock != NULL) c->net->ops->close(c, 0);
}

lt_value_t *lt__rx_value(lt_rx_t *rx, const lt_bytes_t *frame) {
  size_t part = (size_t)(frame - rx->frames); /* rx->msg.frames is rx->frames + 1 */
  assert(frame >= rx->frames && part > 0 && part < rx->nparts);
  /* The part stays whole for the message's other readers: zmq_msg_copy shares a large
   * message's bytes (a reference count), and the value takes the shared copy. */
  zmq_msg_t share;
  zmq_msg_init(&share);
  lt_value_t *v = zmq_msg_copy(&share, &rx->parts[part]) == 0 ? lt__value_from_msg(&share) : NULL;
  zmq_msg_close(&share);
  return v;
}

void lt__rx_clear(lt_rx_t *rx) {
  lt__msg_clear(&rx->msg);
  for (size_t i = 0; i < rx->nparts; i++)
    zmq_msg_close(&rx->parts[i]);
  rx->nparts = 0;
}

void lt__rx_free(lt_rx_t *rx) {
  lt__rx_clear(rx);
  free(rx->parts);
  free(rx->frames);
  memset(rx, 0, sizeof *rx);
}

void lt__conn_close(lt_conn_t *c) {
  if (c->sock != NULL) {
    int linger = 0;
    if (c->state != LT_CONN_DEAD) {
      lt_msg_t bye = {.type = LT_MSG_BYE};
      lt__conn_send(c, &bye, NULL, 0);
      /* Give the bye a moment to leave; linger is otherwise 0 so a dead server never
       * holds up the close. */
      linger = 200;
    }
    c->net->ops->close(c, linger);
  }
  free(c->endpoint);
  free(c->server_id);
  memset(c, 0, sizeof *c);
}
