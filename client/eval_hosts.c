/* eval_hosts.c: the evaluator's hosts (eval_state.h): lt_eval_add_host and
 * lt_eval_remove_host, servers spawned on this machine (lt_eval_spawn_local, finding the
 * lithium-server of the library's own prefix), the `hosts` option (a hosts file or an
 * announce directory), the hosts side of the backend's door, and what the initial hosts
 * answered at start (which lack a module of the program). Tasks and results are not its
 * business. Any thread, under ev->mu where it says so; the door's calls are the backend's. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "curve.h"
#include "eval_state.h"
#include "hosts.h"
#include "log.h"
#include "vec.h"

/* grow_hosts makes room for one more host; under ev->mu. */
static int grow_hosts(lt_eval_t *ev) {
  if (ev->nhosts < ev->caphosts) return LT_OK;
  size_t old = ev->caphosts, cap = old ? old * 2 : 8;
  if (LT_VEC_RESIZE(ev->hosts, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_fds, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_gone, old, cap) != LT_OK ||
      LT_VEC_RESIZE(ev->host_keys, old, cap) != LT_OK)
    return LT_ENOMEM;
  ev->caphosts = cap;
  return LT_OK;
}

int lt__eval_add_host(lt_eval_t *ev, const char *host, int fd) {
  /* A host string is "ENDPOINT [Z85 server public key]"; one endpoint is one server. */
  char endpoint[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
  if (ev == NULL || host == NULL)
    return lt__fail_null("lt_eval_add_host", ev == NULL ? "ev" : "endpoint", 0);
  if (lt__host_parse(host, endpoint, key) != LT_OK) {
    lt__log(LT_LOG_ERROR, "bad host '%.300s': expected 'tcp://HOST:PORT [Z85 server key]'", host);
    return lt__eval_fail(
        ev, LT_EINVAL,
        "lt_eval_add_host: endpoint '%.300s' is malformed: expected 'tcp://HOST:PORT' "
        "and an optional CURVE server key (%d Z85 characters)",
        host, LT_Z85_KEY_LEN);
  }
  char *copy = strdup(endpoint);
  if (copy == NULL) return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_add_host: out of memory");
  pthread_mutex_lock(&ev->mu);
  for (size_t i = 0; i < ev->nhosts; i++) {
    if (strcmp(ev->hosts[i], endpoint) == 0) {
      /* The same endpoint twice is one server. */
      if (fd >= 0 && ev->host_fds[i] < 0) ev->host_fds[i] = fd;
      if (key[0] != '\0' && ev->host_keys[i][0] == '\0') memcpy(ev->host_keys[i], key, sizeof key);
      pthread_mutex_unlock(&ev->mu);
      free(copy);
      return LT_OK;
    }
  }
  if (grow_hosts(ev) != LT_OK) {
    pthread_mutex_unlock(&ev->mu);
    free(copy);
    return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_add_host: out of memory");
  }
  ev->host_fds[ev->nhosts] = fd;
  ev->host_gone[ev->nhosts] = 0;
  memcpy(ev->host_keys[ev->nhosts], key, sizeof key);
  ev->hosts[ev->nhosts++] = copy;
  int started = ev->state == LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  if (started) lt__eval_wake(ev);
  return LT_OK;
}

/* add_host adds a server read from a hosts file or an announce directory (lt_host_add_fn). */
static int add_host(void *ud, const char *host) {
  return lt__eval_add_host(ud, host, -1);
}

LT_API int lt_eval_add_host(lt_eval_t *ev, const char *endpoint) {
  return lt__eval_add_host(ev, endpoint, -1);
}

LT_API int lt_eval_remove_host(lt_eval_t *ev, const char *host) {
  char endpoint[LT_HOST_EP_MAX + 1], key[LT_Z85_KEY_LEN + 1];
  if (ev == NULL || host == NULL)
    return lt__fail_null("lt_eval_remove_host", ev == NULL ? "ev" : "endpoint", 0);
  if (lt__host_parse(host, endpoint, key) != LT_OK)
    return lt__eval_fail(ev, LT_EINVAL,
                         "lt_eval_remove_host: endpoint '%.300s' is malformed: expected "
                         "'tcp://HOST:PORT'",
                         host);
  pthread_mutex_lock(&ev->mu);
  int rc = LT_ENOENT;
  for (size_t i = 0; i < ev->nhosts; i++) {
    if (strcmp(ev->hosts[i], endpoint) == 0 && !ev->host_gone[i]) {
      ev->host_gone[i] = 1;
      rc = LT_OK;
    }
  }
  int started = ev->state == LT_EVAL_STARTED;
  pthread_mutex_unlock(&ev->mu);
  if (rc != LT_OK)
    return lt__eval_fail(
        ev, rc,
        "lt_eval_remove_host: endpoint '%s' was never added to this evaluator, or was "
        "removed already",
        endpoint);
  if (started) lt__eval_wake(ev);
  return rc;
}

/* own_prefix_server finds the lithium-server installed beside the code that runs this
 * function: liblithium.so in LIBDIR gives LIBDIR/<LT_LIBDIR_TO_BINDIR>/lithium-server, a
 * program linked with the objects (the `lithium` tool in BINDIR) gives the one next to it.
 * Writes the path into `path` and returns 1 when such a program exists. */
static int own_prefix_server(char *path, size_t len) {
  Dl_info info;
  char self[PATH_MAX];
  const char *where = NULL;
  if (dladdr((void *)&lt_eval_spawn_local, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] != '\0' && strcmp(info.dli_fname, program_invocation_name) != 0 &&
      realpath(info.dli_fname, self) != NULL) {
    where = self; /* the shared library */
  } else {
    /* The main program: glibc names it by argv[0], which need not be a path. */
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 0;
    self[n] = '\0';
    where = self;
  }
  char *slash = strrchr(where, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  static const char *const rel[] = {LT_LIBDIR_TO_BINDIR, "."};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    if ((size_t)snprintf(path, len, "%s/%s/lithium-server", where, rel[i]) < len &&
        access(path, X_OK) == 0)
      return 1;
  }
  return 0;
}

/* server_program is the `server` option, else the lithium-server of the library's own
 * prefix, else the one of the configured install prefix. Writes into `buf`. */
static const char *server_program(const lt_eval_t *ev, char *buf, size_t len) {
  if (ev->opts.server != NULL) return ev->opts.server;
  if (own_prefix_server(buf, len)) return buf;
  return LT_DEFAULT_SERVER;
}

LT_API int lt_eval_spawn_local(lt_eval_t *ev, int nservers) {
  if (ev == NULL) return lt__fail_null("lt_eval_spawn_local", "ev", 0);
  if (nservers <= 0 || nservers > 256)
    return lt__eval_fail(ev, LT_EINVAL,
                         "lt_eval_spawn_local: nservers %d is out of range (1 to 256)", nservers);
  if (LT_VEC_RESERVE(ev->procs, ev->capprocs, ev->nprocs + (size_t)nservers) != LT_OK)
    return lt__eval_fail(ev, LT_ENOMEM, "lt_eval_spawn_local: out of memory");
  for (int i = 0; i < nservers; i++) {
    lt_proc_t *p = &ev->procs[ev->nprocs];
    char name[32], err[256], buf[PATH_MAX];
    snprintf(name, sizeof name, "local-%zu", ev->nprocs);
    const char *program = server_program(ev, buf, sizeof buf);
    int rc = lt__proc_spawn(p, program, ev->opts.modules, ev->opts.server_threads, name, NULL,
                            (int)ev->opts.connect_timeout_ms * 2, err, sizeof err);
    if (rc != LT_OK) {
      lt__log(LT_LOG_ERROR, "cannot start %s: %s", program, err);
      return lt__eval_fail(ev, rc,
                           "lt_eval_spawn_local: cannot start server %d of %d (%s, option server; "
                           "modules=%s): %s",
                           i + 1, nservers, program,
                           ev->opts.modules ? ev->opts.modules : "not set", err);
    }
    ev->nprocs++;
    rc = lt__eval_add_host(ev, p->endpoint, p->out_fd);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

/* lt__eval_use_hosts adds the servers of the `hosts` option: a hosts file, or an announce
 * directory, which the dispatcher then keeps watching. An announce directory that is still
 * empty is waited for up to connect_timeout_ms: under a batch system the servers may be
 * starting at the same time as the client. */
int lt__eval_use_hosts(lt_eval_t *ev) {
  const char *path = ev->opts.hosts;
  char err[512] = "";
  int dir = lt__hosts_is_dir(path);
  int n = lt__hosts_load(add_host, ev, path, err, sizeof err);
  if (n >= 0 && dir) {
    int64_t t0 = lt__clock_ms();
    for (;;) {
      pthread_mutex_lock(&ev->mu);
      size_t have = ev->nhosts;
      pthread_mutex_unlock(&ev->mu);
      int64_t ms = lt__clock_ms() - t0;
      if (have > 0 || ms >= (int64_t)ev->opts.connect_timeout_ms || n < 0) break;
      struct timespec pause = {0, 100 * 1000000L};
      nanosleep(&pause, NULL);
      n = lt__hosts_load(add_host, ev, path, err, sizeof err);
    }
    if (n >= 0 && ev->hosts_watch == NULL) n = lt__hosts_watch_new(&ev->hosts_watch, path);
  }
  if (n < 0) {
    lt__log(LT_LOG_ERROR, "hosts: %s", err[0] != '\0' ? err : lt_strerror(n));
    return lt__eval_fail(ev, n, "lt_eval_start: option hosts '%s': %s", path,
                         err[0] != '\0' ? err : lt_strerror(n));
  }
  return LT_OK;
}

/* kernels_of appends to `b` the program's kernels of module `mod` (`n` bytes), quoted. */
static void kernels_of(const lt_eval_t *ev, lt_strbuf_t *b, const char *mod, size_t n) {
  int first = 1;
  for (uint32_t i = 0; i < ev->tmpl->nkernels; i++) {
    const char *k = ev->tmpl->kernels[i];
    if (strncmp(k, mod, n) != 0 || k[n] != ':') continue;
    lt__strbuf_printf(b, "%s'%s'", first ? "" : ", ", k);
    first = 0;
  }
}

/* lt__eval_modules_missing fails lt_eval_start once, with LT_ENOMODULE, when every initial host
 * that welcomed us lacks a module of the program: it names each host, each module it lacks and the
 * kernels that need it. Nothing was sent: the dispatcher takes no task before start. */
int lt__eval_modules_missing(lt_eval_t *ev) {
  lt_strbuf_t b = {0};
  pthread_mutex_lock(&ev->mu);
  char *lacks = lt__strbuf_take(&ev->start_lacks);
  pthread_mutex_unlock(&ev->mu);
  lt__strbuf_printf(&b, "lt_eval_start: no server has every module of the program, nothing "
                        "was sent:");
  for (char *line = lacks, *next; line != NULL && *line != '\0'; line = next) {
    next = strchr(line, '\n');
    if (next != NULL) *next++ = '\0';
    char *mods = strchr(line, '\t');
    if (mods == NULL) continue;
    *mods++ = '\0';
    lt__strbuf_printf(&b, " server %s has no module", line);
    for (char *m = mods; *m != '\0';) {
      size_t n = strcspn(m, ",");
      lt__strbuf_printf(&b, " '%.*s' (for ", (int)n, m);
      kernels_of(ev, &b, m, n);
      lt__strbuf_puts(&b, ")");
      m += n;
      if (*m == ',') m++;
      if (*m != '\0') lt__strbuf_puts(&b, ",");
    }
    lt__strbuf_puts(&b, ";");
  }
  free(lacks);
  lt__strbuf_printf(&b,
                    " looked in each server's module directories (lithium-server --modules)%s%s. "
                    "Check the names (lithium check EXPR --modules DIR), or install the modules "
                    "on the servers, or send them: ship_modules=on with a local copy in option "
                    "modules and servers started with --accept-modules",
                    ev->opts.modules != NULL ? " and in modules=" : "",
                    ev->opts.modules != NULL ? ev->opts.modules : "");
  char *text = lt__strbuf_take(&b);
  int rc =
      lt__eval_fail(ev, LT_ENOMODULE, "%s", text != NULL ? text : "lt_eval_start: unknown module");
  lt__log(LT_LOG_ERROR, "%s", lt_last_error());
  free(text);
  return rc;
}

void lt__eval_door_hosts_free(lt_host_t *hosts, size_t n) {
  for (size_t i = 0; hosts != NULL && i < n; i++)
    free(hosts[i].endpoint);
  free(hosts);
}

long lt__eval_door_hosts(lt_eval_t *ev, lt_host_t **out) {
  pthread_mutex_lock(&ev->mu);
  size_t n = ev->nhosts;
  lt_host_t *h = calloc(n ? n : 1, sizeof *h);
  for (size_t i = 0; h != NULL && i < n; i++) {
    h[i].fd = ev->host_fds[i];
    h[i].gone = ev->host_gone[i];
    memcpy(h[i].key, ev->host_keys[i], sizeof h[i].key);
    if ((h[i].endpoint = strdup(ev->hosts[i])) == NULL) {
      lt__eval_door_hosts_free(h, i);
      h = NULL;
    }
  }
  pthread_mutex_unlock(&ev->mu);
  *out = h;
  return h != NULL ? (long)n : LT_ENOMEM;
}

int lt__eval_door_poll_hosts(lt_eval_t *ev, int64_t now_ms) {
  return ev->hosts_watch != NULL && lt__hosts_watch_poll(ev->hosts_watch, add_host, ev, now_ms) > 0;
}

void lt__eval_door_host_answered(lt_eval_t *ev, int ready) {
  pthread_mutex_lock(&ev->mu);
  ev->start_waiting--;
  ev->start_ready += ready;
  pthread_cond_broadcast(&ev->cv_start);
  pthread_mutex_unlock(&ev->mu);
}

void lt__eval_door_host_lacks(lt_eval_t *ev, const char *endpoint, const char *modules) {
  pthread_mutex_lock(&ev->mu);
  if (ev->state == LT_EVAL_NEW) {
    ev->start_lacking++;
    lt__strbuf_printf(&ev->start_lacks, "%s\t%s\n", endpoint, modules);
  }
  pthread_mutex_unlock(&ev->mu);
}

void lt__eval_door_host_auth_failed(lt_eval_t *ev) {
  pthread_mutex_lock(&ev->mu);
  ev->start_auth++;
  pthread_mutex_unlock(&ev->mu);
}
