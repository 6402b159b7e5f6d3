/* session.c: the session table (by routing id), a session's kernel table, and its batch of
 * completions: everything finished for one client in one loop turn goes out as one `done`
 * (cut into several only at the codec's limits). Does not touch instructions or fetches;
 * dropping a whole session is server.c's. Loop thread only. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lithium/error.h>
#include "curve.h"
#include "log.h"
#include "peer.h"

int lt__session_new(lt_server_t *srv, lt_session_t **out, const void *rid, size_t rid_len,
                    uint64_t client_id, const char *name) {
  *out = NULL;
  if (rid_len == 0 || rid_len > LT_RID_MAX) return LT_EINVAL;
  lt_session_t *s = calloc(1, sizeof *s);
  if (s == NULL) return LT_ENOMEM;
  s->name = strdup(name != NULL ? name : "");
  if (s->name == NULL) {
    free(s);
    return LT_ENOMEM;
  }
  memcpy(s->rid, rid, rid_len);
  s->rid_len = rid_len;
  s->client_id = client_id;
  s->fd = -1;
  s->last_seen = uv_now(&srv->loop);
  HASH_ADD(hh, srv->sessions, rid, rid_len, s);
  if (s->oom) {
    free(s->name);
    free(s);
    return LT_ENOMEM;
  }
  *out = s;
  return LT_OK;
}

lt_session_t *lt__session_find(lt_server_t *srv, const void *rid, size_t rid_len) {
  lt_session_t *s = NULL;
  if (rid_len == 0 || rid_len > LT_RID_MAX) return NULL;
  HASH_FIND(hh, srv->sessions, rid, rid_len, s);
  return s;
}

lt_session_t *lt__session_by_client(lt_server_t *srv, uint64_t client_id) {
  lt_session_t *s, *tmp;
  HASH_ITER(hh, srv->sessions, s, tmp) {
    if (s->client_id == client_id && !lt__peer_session(s)) return s;
  }
  return NULL;
}

static void free_peers(char **eps, char **keys, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (eps != NULL) free(eps[i]);
    if (keys != NULL) free(keys[i]);
  }
  free(eps);
  free(keys);
}

int lt__session_peers(lt_session_t *s, const char *const *hosts, uint32_t n) {
  char **eps = calloc(n ? n : 1, sizeof *eps);
  char **keys = calloc(n ? n : 1, sizeof *keys);
  int rc = eps != NULL && keys != NULL ? LT_OK : LT_ENOMEM;
  for (uint32_t i = 0; rc == LT_OK && i < n; i++) {
    char ep[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
    if (lt__host_parse(hosts[i], ep, key) != LT_OK) {
      rc = LT_EINVAL;
      break;
    }
    if ((eps[i] = strdup(ep)) == NULL || (keys[i] = strdup(key)) == NULL) rc = LT_ENOMEM;
  }
  if (rc != LT_OK) {
    free_peers(eps, keys, n);
    return rc;
  }
  free_peers(s->peers, s->peer_keys, s->npeers);
  s->peers = eps;
  s->peer_keys = keys;
  s->npeers = n;
  return LT_OK;
}

bool lt__session_peer(const lt_session_t *s, const char *ep, const char **key) {
  for (uint32_t i = 0; i < s->npeers; i++) {
    if (strcmp(s->peers[i], ep) != 0) continue;
    if (key != NULL) *key = s->peer_keys[i];
    return true;
  }
  return false;
}

lt_program_t *lt__program_ref(lt_program_t *p) {
  if (p != NULL) p->refs++;
  return p;
}

void lt__program_unref(lt_program_t *p) {
  if (p == NULL || --p->refs > 0) return;
  for (uint32_t i = 0; i < p->n; i++) {
    if (p->err != NULL) free(p->err[i]);
    if (p->names != NULL) free(p->names[i]);
    if (p->mods != NULL) lt__shipped_unref(p->mods[i]);
  }
  free(p->mods);
  free(p->names);
  free(p->fns);
  free(p->in_place);
  free(p->status);
  free(p->err);
  free(p);
}

/* same_program tells whether `p` is the table of `names`. */
static bool same_program(const lt_program_t *p, const char *const *names, uint32_t n) {
  if (p == NULL) return n == 0;
  if (p->n != n) return false;
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(p->names[i], names[i]) != 0) return false;
  return true;
}

const lt_session_module_t *lt__session_shipped(const lt_session_t *s, const char *name) {
  for (uint32_t i = 0; i < s->nshipped; i++)
    if (strcmp(s->shipped[i].name, name) == 0) return &s->shipped[i];
  return NULL;
}

/* resolve resolves kernel i of `p`: in a module the session shipped when it shipped one of
 * that name (a refused one fails the kernel with its refusal), else in the server's own
 * module directories. */
static int resolve(lt_server_t *srv, const lt_session_t *s, lt_program_t *p, uint32_t i, char *err,
                   size_t errlen) {
  char module[LT_MODULE_NAME_MAX + 1];
  const lt_session_module_t *sm =
      lt__kernel_module(p->names[i], module) == LT_OK ? lt__session_shipped(s, module) : NULL;
  if (sm == NULL) {
    int rc = lt__modules_resolve(srv->mods, p->names[i], &p->fns[i], err, errlen);
    if (rc == LT_OK) p->in_place[i] = lt__modules_in_place(srv->mods, p->names[i]);
    return rc;
  }
  if (sm->mod == NULL) {
    snprintf(err, errlen, "%s", sm->err != NULL ? sm->err : "module refused");
    return sm->status != LT_OK ? sm->status : LT_ENOMODULE;
  }
  int rc = lt__shipped_kernel(sm->mod, p->names[i], &p->fns[i], err, errlen);
  if (rc == LT_OK) {
    p->mods[i] = lt__shipped_ref(sm->mod);
    p->in_place[i] = lt__shipped_in_place(sm->mod, p->names[i]);
  }
  return rc;
}

/* build makes the kernel table of `names`, each resolved (see resolve). */
static int build(lt_server_t *srv, const lt_session_t *s, const char *const *names, uint32_t n,
                 lt_program_t **out) {
  lt_program_t *p = calloc(1, sizeof *p);
  if (p == NULL) return LT_ENOMEM;
  p->refs = 1;
  p->n = n;
  p->fns = calloc(n ? n : 1, sizeof *p->fns);
  p->in_place = calloc(n ? n : 1, sizeof *p->in_place);
  p->status = calloc(n ? n : 1, sizeof *p->status);
  p->err = calloc(n ? n : 1, sizeof *p->err);
  p->names = calloc(n ? n : 1, sizeof *p->names);
  p->mods = calloc(n ? n : 1, sizeof *p->mods);
  if (p->fns == NULL || p->in_place == NULL || p->status == NULL || p->err == NULL ||
      p->names == NULL || p->mods == NULL) {
    lt__program_unref(p);
    return LT_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) {
    if ((p->names[i] = strdup(names[i])) == NULL) {
      lt__program_unref(p);
      return LT_ENOMEM;
    }
    char err[512] = "";
    int rc = resolve(srv, s, p, i, err, sizeof err);
    if (rc == LT_OK) continue;
    p->fns[i] = NULL;
    p->status[i] = rc;
    if (err[0] == '\0')
      snprintf(err, sizeof err, "cannot resolve kernel %s: %s", names[i], lt_strerror(rc));
    lt__utf8_sanitize(err);
    if ((p->err[i] = strdup(err)) == NULL) {
      lt__program_unref(p);
      return LT_ENOMEM;
    }
    lt__log(LT_LOG_INFO, "session %s: kernel %u: %s", s->name, i, err);
  }
  *out = p;
  return LT_OK;
}

/* replace_program makes a kernel table of `names` the session's. */
static int replace_program(lt_server_t *srv, lt_session_t *s, const char *const *names,
                           uint32_t n) {
  lt_program_t *p;
  int rc = build(srv, s, names, n, &p);
  if (rc != LT_OK) return rc;
  lt__program_unref(s->prog);
  s->prog = p;
  return LT_OK;
}

int lt__session_program(lt_server_t *srv, lt_session_t *s, const char *const *names, uint32_t n) {
  if (same_program(s->prog, names, n)) return LT_OK;
  return replace_program(srv, s, names, n);
}

/* module_clear drops what a session's module record holds. */
static void module_clear(lt_session_module_t *sm) {
  free(sm->name);
  free(sm->err);
  lt__shipped_unref(sm->mod);
  memset(sm, 0, sizeof *sm);
}

int lt__session_ship(lt_server_t *srv, lt_session_t *s, const char *name, uint64_t size,
                     lt_shipped_t *mod, int status, const char *err) {
  lt_session_module_t *sm = (lt_session_module_t *)lt__session_shipped(s, name);
  if (sm == NULL) {
    if (s->nshipped >= LT_SESSION_MAX_SHIPPED) {
      lt__shipped_unref(mod);
      return LT_EAGAIN;
    }
    lt_session_module_t *v = realloc(s->shipped, (s->nshipped + 1) * sizeof *v);
    if (v == NULL) {
      lt__shipped_unref(mod);
      return LT_ENOMEM;
    }
    s->shipped = v;
    sm = &v[s->nshipped++];
    memset(sm, 0, sizeof *sm);
  } else {
    if (sm->mod != NULL) s->shipped_bytes -= sm->size;
    module_clear(sm);
  }
  sm->name = strdup(name);
  sm->err = err != NULL ? strdup(err) : NULL;
  if (sm->name == NULL || (err != NULL && sm->err == NULL)) {
    lt__shipped_unref(mod);
    free(sm->name);
    free(sm->err);
    *sm = s->shipped[--s->nshipped];
    return LT_ENOMEM;
  }
  if (sm->err != NULL) lt__utf8_sanitize(sm->err);
  sm->mod = mod;
  sm->status = status;
  sm->size = size;
  if (mod != NULL) s->shipped_bytes += size;
  if (s->prog == NULL) return LT_OK;
  return replace_program(srv, s, (const char *const *)s->prog->names, s->prog->n);
}

static void mark_dirty(lt_server_t *srv, lt_session_t *s) {
  if (s->dirty) return;
  s->dirty = true;
  s->dirty_next = srv->dirty;
  srv->dirty = s;
}

static void unmark_dirty(lt_server_t *srv, lt_session_t *s) {
  if (!s->dirty) return;
  for (lt_session_t **p = &srv->dirty; *p; p = &(*p)->dirty_next) {
    if (*p == s) {
      *p = s->dirty_next;
      break;
    }
  }
  s->dirty = false;
  s->dirty_next = NULL;
}

/* grow makes room for `more` elements of `size` in *arr (capacity *cap). */
static int grow(void **arr, uint32_t *cap, uint32_t used, uint32_t more, size_t size) {
  if ((uint64_t)used + more <= *cap) return LT_OK;
  uint64_t want = *cap ? *cap : 16;
  while (want < (uint64_t)used + more)
    want *= 2;
  void *p = realloc(*arr, want * size);
  if (p == NULL) return LT_ENOMEM;
  *arr = p;
  *cap = (uint32_t)want;
  return LT_OK;
}

int lt__session_done_add(lt_server_t *srv, lt_session_t *s, uint64_t seq, int status,
                         const char *errmsg, const lt_ran_t *ran, int answer, uint32_t nout,
                         const uint64_t *sizes, lt_value_t *const *ret) {
  uint32_t nret = 0;
  for (uint32_t i = 0; ret != NULL && i < nout; i++)
    nret += ret[i] != NULL;
  if (s->ndone + 1 > LT_DONE_MAX_COMPL || s->nvals + nret > LT_DONE_MAX_FRAMES ||
      s->nouts + nout > LT_DONE_MAX_OUTS)
    lt__session_flush(srv, s);
  int rc = LT_OK;
  if (grow((void **)&s->done, &s->capdone, s->ndone, 1, sizeof *s->done) != LT_OK)
    return LT_ENOMEM; /* not even a bare completion fits: the client will time it out */
  if (grow((void **)&s->outs, &s->capouts, s->nouts, nout, sizeof *s->outs) != LT_OK ||
      grow((void **)&s->vals, &s->capvals, s->nvals, nret, sizeof *s->vals) != LT_OK) {
    status = LT_ENOMEM;
    errmsg = "out of memory for the outputs of the completion";
    nout = 0;
    rc = LT_ENOMEM;
  }
  lt_done_entry_t *e = &s->done[s->ndone];
  memset(e, 0, sizeof *e);
  e->seq = seq;
  e->status = status;
  if (ran != NULL) {
    e->service_us = ran->service_us;
    e->start_us = ran->start_us;
    e->worker = ran->worker;
    e->cpu_us = ran->cpu_us;
  }
  e->answer = answer;
  if (errmsg != NULL && errmsg[0] != '\0') {
    e->errmsg = strdup(errmsg);
    if (e->errmsg != NULL) lt__utf8_sanitize(e->errmsg);
  }
  e->out_off = s->nouts;
  e->nout = nout;
  for (uint32_t i = 0; i < nout; i++) {
    lt_output_info_t *o = &s->outs[s->nouts++];
    o->size = sizes[i];
    o->frame = -1;
    if (ret != NULL && ret[i] != NULL) {
      o->frame = (int32_t)s->nvals;
      s->vals[s->nvals++] = lt__value_ref(ret[i]);
    }
  }
  s->ndone++;
  mark_dirty(srv, s);
  return rc;
}

int lt__session_done_room(lt_server_t *srv, lt_session_t *s, uint32_t n, uint32_t *first) {
  if (s->ndone + n > LT_DONE_MAX_COMPL || s->nvals + n > LT_DONE_MAX_FRAMES ||
      s->nouts + n > LT_DONE_MAX_OUTS)
    lt__session_flush(srv, s);
  *first = s->ndone;
  if (grow((void **)&s->done, &s->capdone, s->ndone, n, sizeof *s->done) != LT_OK ||
      grow((void **)&s->outs, &s->capouts, s->nouts, n, sizeof *s->outs) != LT_OK ||
      grow((void **)&s->vals, &s->capvals, s->nvals, n, sizeof *s->vals) != LT_OK)
    return LT_ENOMEM;
  return LT_OK;
}

void lt__session_done_pack(lt_session_t *s, uint32_t first, uint32_t n) {
  if (n > 1 && first + n == s->ndone) s->done[first].pack = n;
}

static void done_reset(lt_session_t *s) {
  for (uint32_t i = 0; i < s->ndone; i++)
    free(s->done[i].errmsg);
  for (uint32_t i = 0; i < s->nvals; i++)
    lt__value_unref(s->vals[i]);
  s->ndone = s->nouts = s->nvals = 0;
}

void lt__session_flush(lt_server_t *srv, lt_session_t *s) {
  unmark_dirty(srv, s);
  if (s->ndone == 0) return;
  lt_completion_t *c = calloc(s->ndone, sizeof *c);
  s->dones_sent++; /* counted sent or not: the client learns of a loss from the next one */
  if (c == NULL) {
    lt__log(LT_LOG_ERROR, "session %s: out of memory: %u completions lost", s->name, s->ndone);
    done_reset(s);
    return;
  }
  for (uint32_t i = 0; i < s->ndone; i++) {
    const lt_done_entry_t *e = &s->done[i];
    c[i].seq = e->seq;
    c[i].status = e->status;
    c[i].errmsg = e->errmsg != NULL ? e->errmsg : "";
    c[i].noutputs = e->nout;
    c[i].outputs = e->nout ? &s->outs[e->out_off] : NULL;
    c[i].service_us = e->service_us;
    c[i].start_us = e->start_us;
    c[i].worker = e->worker;
    c[i].cpu_us = e->cpu_us;
    c[i].answer = e->answer;
    c[i].pack = e->pack;
  }
  lt_msg_t m;
  memset(&m, 0, sizeof m);
  m.type = LT_MSG_DONE;
  m.u.done.ncompl = s->ndone;
  m.u.done.compl = c;
  m.u.done.batch = s->dones_sent;
  if (srv->send(srv, s->rid, s->rid_len, &m, s->vals, s->nvals) != LT_OK)
    lt__log(LT_LOG_WARN, "session %s: a done with %u completions was not sent", s->name, s->ndone);
  free(c);
  done_reset(s);
}

void lt__session_free(lt_server_t *srv, lt_session_t *s) {
  unmark_dirty(srv, s);
  HASH_DEL(srv->sessions, s);
  done_reset(s);
  lt__program_unref(s->prog);
  for (uint32_t i = 0; i < s->nshipped; i++)
    module_clear(&s->shipped[i]);
  free(s->shipped);
  free_peers(s->peers, s->peer_keys, s->npeers);
  free(s->done);
  free(s->outs);
  free(s->vals);
  free(s->name);
  free(s);
}

const char *lt__short_id(uint64_t client_id, char *buf) {
  snprintf(buf, 12, "%04x...", (unsigned)(client_id >> 48));
  return buf;
}
