/* status.c: the answer to STATUS (`lithium status`): who the server is and how it is doing.
 * Any connected peer may ask; no session is opened and nothing is kept. Loop thread only. */
#include <string.h>
#include "server.h"
#include "session.h"

#ifndef LT_VERSION
#define LT_VERSION "0.0.0"
#endif

void lt__status_reply(lt_server_t *srv, const void *rid, size_t rid_len) {
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_STATUS_REPLY;
  m.u.status_reply.server_id = srv->server_id;
  m.u.status_reply.version = LT_VERSION;
  m.u.status_reply.protocol = LT_PROTO_VERSION;
  m.u.status_reply.endpoint = srv->endpoint;
  uint64_t now = lt__executor_now_us();
  m.u.status_reply.uptime_ms = now > srv->start_us ? (now - srv->start_us) / 1000 : 0;
  m.u.status_reply.cores = srv->cores;
  m.u.status_reply.speed = srv->speed;
  m.u.status_reply.sessions = HASH_COUNT(srv->sessions);
  m.u.status_reply.value_bytes = lt__store_bytes(srv->store);
  lt__server_send(srv, rid, rid_len, &m, NULL, 0);
}
