/* status.c: the answer to STATUS (`lithium status`): who the server is, how it is doing and
 * which kernel modules it has loaded (with their SHA-256).
 * Any connected peer may ask; no session is opened and nothing is kept. Loop thread only. */
#include <stdlib.h>
#include <string.h>
#include "server.h"
#include "session.h"

#ifndef LT_VERSION
#define LT_VERSION "0.0.0"
#endif

/* A STATUS reply names at most this many modules (the most recently loaded). */
#define STATUS_MODULES_MAX 256

typedef struct modlist {
  lt_module_info_t v[STATUS_MODULES_MAX];
  uint32_t n;
} modlist_t;

/* add_module copies one loaded module's name and hash (borrowed only for the call). */
static void add_module(void *ud, const char *name, const char *sha256) {
  modlist_t *l = ud;
  if (l->n == STATUS_MODULES_MAX) return;
  char *n = strdup(name), *h = strdup(sha256);
  if (n == NULL || h == NULL) {
    free(n);
    free(h);
    return;
  }
  l->v[l->n++] = (lt_module_info_t){n, h};
}

static uint32_t count_draining(const lt_server_t *srv) {
  uint32_t n = 0;
  for (const lt_session_t *s = srv->sessions; s != NULL; s = s->hh.next)
    n += s->draining;
  return n;
}

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
  m.u.status_reply.draining = count_draining(srv);
  modlist_t *mods = calloc(1, sizeof *mods);
  if (mods != NULL) {
    lt__modules_each(srv->mods, add_module, mods);
    m.u.status_reply.nmodules = mods->n;
    m.u.status_reply.modules = mods->v;
  }
  srv->send(srv, rid, rid_len, &m, NULL, 0);
  for (uint32_t i = 0; mods != NULL && i < mods->n; i++) {
    free((char *)mods->v[i].name);
    free((char *)mods->v[i].sha256);
  }
  free(mods);
}
