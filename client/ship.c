/* ship.c: the client's side of module shipping (ship.h): the local copies of the program's
 * modules, compared with each server's, and the MODULE messages. Knows no scheduling: the
 * scheduler calls it on every welcome, before the session takes work. */
#include "ship.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium/error.h>
#include "log.h"
#include "module.h"
#include "sha256.h"
#include "value.h"

/* A local copy larger than this is not read (nor shipped): no server takes a frame so large
 * by default (--max-frame 1g). */
#define SHIP_MAX_BYTES ((uint64_t)1 << 30)

typedef struct entry {
  char *name;
  char path[4096];            /* the local copy, "" when there is none */
  char sha256[LT_SHA256_HEX]; /* of the local copy, "" when there is none */
  uint64_t size;
  lt_value_t *bytes; /* ship_modules: the local copy, NULL when not read */
  int warned;        /* this evaluation has said something about this module */
} entry_t;

struct lt_ship {
  int ship;
  entry_t *v;
  const char **names; /* v[i].name, for the hello */
  uint32_t n;
};

/* read_file reads the regular file at `path` into a new value. LT_EIO, LT_ETOOBIG, LT_ENOMEM. */
static int read_file(const char *path, lt_value_t **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return LT_EIO;
  struct stat sb;
  int rc = LT_OK;
  lt_value_t *v = NULL;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
    rc = LT_EIO;
  else if ((uint64_t)sb.st_size > SHIP_MAX_BYTES)
    rc = LT_ETOOBIG;
  else if ((v = lt__value_new((size_t)sb.st_size)) == NULL)
    rc = LT_ENOMEM;
  size_t got = 0;
  while (rc == LT_OK && got < v->len) {
    ssize_t n = read(fd, (char *)v->data + got, v->len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      rc = LT_EIO; /* an error, or the file shrank under us */
    else
      got += (size_t)n;
  }
  close(fd);
  if (rc != LT_OK) {
    lt__value_unref(v);
    return rc;
  }
  *out = v;
  return LT_OK;
}

/* local_copy finds and hashes the local copy of e->name (and reads it under `ship`). */
static void local_copy(lt_modules_t *dirs, entry_t *e, int ship) {
  if (dirs == NULL || lt__modules_locate(dirs, e->name, e->path, sizeof e->path) != LT_OK) {
    e->path[0] = '\0';
    return;
  }
  int rc = LT_OK;
  if (ship && (rc = read_file(e->path, &e->bytes)) == LT_OK) {
    e->size = e->bytes->len;
    lt__sha256_hex(e->bytes->data, e->bytes->len, e->sha256);
    return;
  }
  if (ship)
    lt__log(LT_LOG_WARN, "ship_modules: cannot read %s (%s): not shipped", e->path,
            lt_strerror(rc));
  struct stat sb;
  if (stat(e->path, &sb) == 0) e->size = (uint64_t)sb.st_size;
  if (lt__sha256_file(e->path, e->sha256) != LT_OK)
    lt__log(LT_LOG_WARN, "module '%s': cannot read the local copy %s", e->name, e->path);
}

/* add_module adds module `name` to the list once. */
static int add_module(lt_ship_t *sh, const char *name) {
  for (uint32_t i = 0; i < sh->n; i++)
    if (strcmp(sh->v[i].name, name) == 0) return LT_OK;
  entry_t *e = &sh->v[sh->n];
  memset(e, 0, sizeof *e);
  if ((e->name = strdup(name)) == NULL) return LT_ENOMEM;
  sh->names[sh->n++] = e->name;
  return LT_OK;
}

int lt__ship_new(lt_ship_t **out, const char *moddir, char *const *kernels, uint32_t nkernels,
                 int ship) {
  *out = NULL;
  lt_ship_t *sh = calloc(1, sizeof *sh);
  if (sh == NULL) return LT_ENOMEM;
  sh->ship = ship;
  sh->v = calloc(nkernels ? nkernels : 1, sizeof *sh->v);
  sh->names = calloc(nkernels ? nkernels : 1, sizeof *sh->names);
  int rc = sh->v != NULL && sh->names != NULL ? LT_OK : LT_ENOMEM;
  for (uint32_t i = 0; rc == LT_OK && i < nkernels; i++) {
    char module[LT_MODULE_NAME_MAX + 1];
    if (lt__kernel_module(kernels[i], module) == LT_OK) rc = add_module(sh, module);
  }
  lt_modules_t *dirs = NULL;
  if (rc == LT_OK && moddir != NULL && lt__modules_new(&dirs) == LT_OK &&
      lt__modules_add_dir(dirs, moddir) != LT_OK)
    lt__log(LT_LOG_WARN, "modules=%s is not a readable directory: no local copies of modules",
            moddir);
  for (uint32_t i = 0; rc == LT_OK && i < sh->n; i++) {
    local_copy(dirs, &sh->v[i], ship);
    if (ship && sh->v[i].path[0] == '\0')
      lt__log(LT_LOG_WARN, "ship_modules: no local copy of module '%s' (modules=%s): not shipped",
              sh->v[i].name, moddir != NULL ? moddir : "not set");
  }
  lt__modules_free(dirs);
  if (rc != LT_OK) {
    lt__ship_free(sh);
    return rc;
  }
  *out = sh;
  return LT_OK;
}

void lt__ship_modules(const lt_ship_t *sh, const char *const **names, uint32_t *n) {
  *names = sh->names;
  *n = sh->n;
}

const char *lt__ship_sha256(const lt_ship_t *sh, uint32_t i) {
  return sh->v[i].sha256;
}

/* server_copy returns the server's hex SHA-256 of module `name` from the welcome: "" when
 * it has none (or does not say). */
static const char *server_copy(const lt_msg_t *w, const char *name) {
  for (uint32_t i = 0; i < w->u.welcome.nmodules; i++)
    if (strcmp(w->u.welcome.modules[i].name, name) == 0) return w->u.welcome.modules[i].sha256;
  return "";
}

/* send_module ships the local copy of `e` to the server of `c`; one larger than the server's
 * frame limit (or that could not be read) goes without its bytes, so that the server fails
 * the instructions naming it with the reason instead of running another copy. */
static void send_module(const entry_t *e, lt_conn_t *c, int64_t now_ms) {
  int whole = e->bytes != NULL && (c->max_frame == 0 || e->size <= c->max_frame);
  lt_msg_t m = {.type = LT_MSG_MODULE};
  m.u.module.name = e->name;
  m.u.module.sha256 = e->sha256;
  m.u.module.size = e->size;
  m.u.module.frame = whole ? 0 : -1;
  lt_bytes_t frame = {whole ? e->bytes->data : NULL, whole ? e->bytes->len : 0};
  m.nframes = whole ? 1 : 0;
  m.frames = whole ? &frame : NULL;
  lt_value_t *vals[1] = {whole ? e->bytes : NULL};
  int rc = lt__conn_send(c, &m, whole ? vals : NULL, now_ms);
  if (rc != LT_OK)
    lt__log(LT_LOG_WARN, "server %s: could not ship module '%s': %s", c->endpoint, e->name,
            lt_strerror(rc));
  else
    lt__log(LT_LOG_INFO, "server %s: shipped module '%s' (sha256 %.12s..., %llu bytes)%s",
            c->endpoint, e->name, e->sha256, (unsigned long long)e->size,
            whole ? "" : " without its bytes (over its frame limit, or unreadable here)");
}

/* compare acts on one module: the same copy needs nothing; another or none is shipped when
 * the option is on and the server takes modules, else a copy that differs is warned about
 * once per evaluation (a module rebuilt while the server ran: that server's results come
 * from its own copy). */
static void compare(lt_ship_t *sh, entry_t *e, lt_conn_t *c, const lt_msg_t *w, int64_t now_ms) {
  const char *theirs = server_copy(w, e->name);
  if (e->sha256[0] == '\0' || strcmp(theirs, e->sha256) == 0) return;
  if (sh->ship && w->u.welcome.accept_modules) {
    send_module(e, c, now_ms);
    return;
  }
  if (e->warned) return;
  if (theirs[0] != '\0') {
    e->warned = 1;
    lt__log(LT_LOG_WARN,
            "module '%s': server %s runs another copy (sha256 %.12s...) than the local %s "
            "(sha256 %.12s...), e.g. one rebuilt while the server ran: its results come from "
            "its copy%s",
            e->name, c->endpoint, theirs, e->path, e->sha256,
            sh->ship ? " (it does not accept shipped modules: --accept-modules)"
                     : " (ship_modules=on sends the local copy)");
  } else if (sh->ship) {
    e->warned = 1;
    lt__log(LT_LOG_WARN,
            "module '%s': server %s has no copy and does not accept shipped modules "
            "(--accept-modules)",
            e->name, c->endpoint);
  }
}

void lt__ship_welcome(lt_ship_t *sh, lt_conn_t *c, const lt_msg_t *w, int64_t now_ms) {
  for (uint32_t i = 0; i < sh->n; i++)
    compare(sh, &sh->v[i], c, w, now_ms);
}

uint32_t lt__ship_lacking(const lt_ship_t *sh, const lt_msg_t *w, char *buf, size_t len) {
  uint32_t n = 0;
  size_t at = 0;
  if (len > 0) buf[0] = '\0';
  for (uint32_t i = 0; i < sh->n; i++) {
    const entry_t *e = &sh->v[i];
    int stated = 0; /* a welcome that states nothing of a module lacks nothing we know of */
    for (uint32_t k = 0; k < w->u.welcome.nmodules && !stated; k++)
      stated = strcmp(w->u.welcome.modules[k].name, e->name) == 0 &&
               w->u.welcome.modules[k].sha256[0] == '\0';
    if (!stated || (sh->ship && w->u.welcome.accept_modules && e->bytes != NULL)) continue;
    n++;
    if (at < len) at += (size_t)snprintf(buf + at, len - at, "%s%s", n > 1 ? "," : "", e->name);
  }
  return n;
}

void lt__ship_free(lt_ship_t *sh) {
  if (sh == NULL) return;
  for (uint32_t i = 0; i < sh->n; i++) {
    free(sh->v[i].name);
    lt__value_unref(sh->v[i].bytes);
  }
  free(sh->v);
  free(sh->names);
  free(sh);
}
