/* fetch.c: FETCH on the holder: a ready value is answered at once with a VALUE (zero copy),
 * an unknown or failed one with its error, and a pending one parks a waiter in the store so
 * that the VALUE goes out when the value is set (a deferred reply). Fetching from another
 * holder (peer fetch) will live beside this. Loop thread only. */
#include "fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "oid.h"

/* A FETCH for a pending value, parked in the store until the value is set. */
struct lt_fetch {
  lt_waiter_t w; /* first: the waiter callback casts back */
  lt_server_t *srv;
  lt_session_t *sess;
  lt_oid_t id;
  lt_fetch_t *next, *prev; /* in sess->fetches */
};

static void send_value(lt_server_t *srv, lt_session_t *s, lt_oid_t id, int status,
                       const char *errmsg, lt_value_t *v) {
  char text[LT_KERNEL_ERRMSG_MAX + 128];
  snprintf(text, sizeof text, "%s", status == LT_OK ? "" : errmsg != NULL ? errmsg : "");
  lt__utf8_sanitize(text);
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_VALUE;
  m.u.value.id = id;
  m.u.value.status = status;
  m.u.value.errmsg = text;
  m.u.value.frame = v != NULL ? 0 : -1;
  lt__server_send(srv, s->rid, s->rid_len, &m, v != NULL ? &v : NULL, v != NULL ? 1 : 0);
}

static void fetch_unlink(lt_session_t *s, lt_fetch_t *f) {
  if (f->prev)
    f->prev->next = f->next;
  else
    s->fetches = f->next;
  if (f->next) f->next->prev = f->prev;
  f->next = f->prev = NULL;
}

static void on_fetch_ready(lt_waiter_t *w, lt_oid_t id, int status, lt_value_t *v,
                           const char *errmsg) {
  lt_fetch_t *f = (lt_fetch_t *)w;
  fetch_unlink(f->sess, f);
  if (status != LT_OK && (errmsg == NULL || errmsg[0] == '\0')) errmsg = lt_strerror(status);
  send_value(f->srv, f->sess, id, status, errmsg, status == LT_OK ? v : NULL);
  free(f);
}

void lt__fetch_handle(lt_server_t *srv, lt_session_t *s, lt_oid_t id) {
  lt_fetch_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    send_value(srv, s, id, LT_ENOMEM, "out of memory", NULL);
    return;
  }
  f->w.cb = on_fetch_ready;
  f->srv = srv;
  f->sess = s;
  f->id = id;
  lt_value_t *v = NULL;
  const char *em = NULL;
  char ids[48], text[96];
  int rc = lt__store_get(srv->store, id, &v, srv->stopping ? NULL : &f->w, &em);
  if (rc == LT_EAGAIN && !srv->stopping) {
    f->next = s->fetches;
    if (s->fetches) s->fetches->prev = f;
    s->fetches = f;
    return;
  }
  free(f);
  switch (rc) {
  case LT_OK:
    send_value(srv, s, id, LT_OK, "", v);
    lt__value_unref(v);
    break;
  case LT_EAGAIN:
    send_value(srv, s, id, LT_ESHUTDOWN, "server shutting down", NULL);
    break;
  case LT_ENOENT:
    snprintf(text, sizeof text, "no object %s on this server", lt__oid_format(id, ids, sizeof ids));
    send_value(srv, s, id, LT_ENOENT, text, NULL);
    break;
  default:
    send_value(srv, s, id, rc, em != NULL && em[0] ? em : lt_strerror(rc), NULL);
    break;
  }
}

void lt__fetch_drop_session(lt_server_t *srv, lt_session_t *s, int status) {
  lt_fetch_t *f;
  while ((f = s->fetches) != NULL) {
    fetch_unlink(s, f);
    lt__store_unpark(srv->store, &f->w);
    if (status != LT_OK) send_value(srv, s, f->id, status, lt_strerror(status), NULL);
    free(f);
  }
}
