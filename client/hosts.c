/* hosts.c: hosts files and announce directories (hosts.h). The parser turns text into
 * (endpoint, key) entries and nothing else; the loaders read files and hand entries to the
 * caller's adder (the evaluator's keeps each endpoint once, so reading a file again adds
 * only what is new). Touches no sockets and knows nothing of the evaluator. */
#include "hosts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eval.h"
#include "log.h"
#include "vec.h"

/* Announce files and hosts files are small: a hosts file for a very large cluster still
 * fits. */
#define HOSTS_FILE_MAX ((size_t)16 << 20)
#define SUFFIX         ".endpoint"

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

int lt__hosts_key_valid(const char *t, size_t n) {
  static const char z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            ".-:+=^!/*?&<>()[]{}@%$#";
  if (n != LT_HOSTS_KEY_LEN) return 0;
  for (size_t i = 0; i < n; i++)
    if (t[i] == '\0' || strchr(z85, t[i]) == NULL) return 0;
  return 1;
}

/* parse_line finds the entry of one line (without its newline). Returns 1 with the endpoint
 * and key (key_len 0: none) set, 0 for a blank or comment line, -1 with a reason. A token
 * starting with '#' begins a comment, except a 40-character Z85 key (whose alphabet has '#')
 * in the key's place. */
static int parse_line(const char *p, size_t n, const char **ep, size_t *ep_len, const char **key,
                      size_t *key_len, const char **why) {
  const char *tok[3];
  size_t len[3];
  size_t ntok = 0, i = 0;
  *key_len = 0;
  while (i < n) {
    while (i < n && is_space(p[i]))
      i++;
    if (i == n) break;
    size_t start = i;
    while (i < n && !is_space(p[i]))
      i++;
    const char *t = p + start;
    size_t tl = i - start;
    if (t[0] == '#' && !(ntok == 1 && lt__hosts_key_valid(t, tl))) break;
    if (ntok == 2) {
      *why = "more than ENDPOINT and PUBLIC_KEY";
      return -1;
    }
    tok[ntok] = t;
    len[ntok++] = tl;
  }
  if (ntok == 0) return 0;
  if (len[0] < 7 || strncmp(tok[0], "tcp://", 6) != 0 || len[0] > LT_HOSTS_ENDPOINT_MAX ||
      memchr(tok[0], '\0', len[0]) != NULL) {
    *why = "the endpoint is not tcp://HOST:PORT (at most 255 bytes)";
    return -1;
  }
  if (ntok == 2 && !lt__hosts_key_valid(tok[1], len[1])) {
    *why = "the public key is not 40 characters of Z85";
    return -1;
  }
  *ep = tok[0];
  *ep_len = len[0];
  if (ntok == 2) {
    *key = tok[1];
    *key_len = len[1];
  }
  return 1;
}

int lt__hosts_parse(const char *text, size_t len, lt_hosts_fn fn, void *ud, char *err,
                    size_t errlen) {
  size_t lineno = 0, off = 0;
  while (off < len) {
    const char *nl = memchr(text + off, '\n', len - off);
    size_t n = nl != NULL ? (size_t)(nl - (text + off)) : len - off;
    lineno++;
    const char *ep = NULL, *key = NULL, *why = NULL;
    size_t ep_len = 0, key_len = 0;
    int r = parse_line(text + off, n, &ep, &ep_len, &key, &key_len, &why);
    off += n + (nl != NULL);
    if (r == 0) continue;
    if (r < 0) {
      snprintf(err, errlen, "line %zu: %s", lineno, why);
      return LT_EINVAL;
    }
    char e[LT_HOSTS_ENDPOINT_MAX + 1], k[LT_HOSTS_KEY_LEN + 1];
    memcpy(e, ep, ep_len);
    e[ep_len] = '\0';
    if (key_len > 0) {
      memcpy(k, key, key_len);
      k[key_len] = '\0';
    }
    int rc = fn(ud, e, key_len > 0 ? k : NULL);
    if (rc != 0) {
      snprintf(err, errlen, "line %zu: %s", lineno, lt_strerror(rc));
      return rc;
    }
  }
  return LT_OK;
}

/* read_file reads a whole small file into a new buffer. */
static int read_file(const char *path, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? LT_ENOENT : LT_EIO;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  int rc = buf != NULL ? LT_OK : LT_ENOMEM;
  while (rc == LT_OK) {
    if (n == cap) {
      char *b = cap < HOSTS_FILE_MAX ? realloc(buf, cap * 2) : NULL;
      if (b == NULL) {
        rc = cap < HOSTS_FILE_MAX ? LT_ENOMEM : LT_ETOOBIG;
        break;
      }
      buf = b;
      cap *= 2;
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) rc = LT_EIO;
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  if (rc != LT_OK) {
    free(buf);
    return rc;
  }
  *out = buf;
  *len = n;
  return LT_OK;
}

typedef struct adder {
  lt_host_add_fn add;
  void *ud;
  int entries;
} adder_t;

/* add_entry gives the evaluator one server, with its public key when the line has one
 * (a host string "ENDPOINT KEY", as lt_eval_add_host takes). */
static int add_entry(void *ud, const char *endpoint, const char *key) {
  adder_t *a = ud;
  char host[1024];
  if ((size_t)snprintf(host, sizeof host, "%s%s%s", endpoint, key != NULL ? " " : "",
                       key != NULL ? key : "") >= sizeof host)
    return LT_EINVAL;
  int rc = a->add(a->ud, host);
  if (rc == LT_OK) a->entries++;
  return rc;
}

/* read_one calls fn for the entries of one file; the error message names the file. */
static int read_one(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen) {
  char *text;
  size_t len;
  int rc = read_file(path, &text, &len);
  if (rc != LT_OK) {
    snprintf(err, errlen, "%s: %s", path, rc == LT_ENOENT ? "no such file" : lt_strerror(rc));
    return rc;
  }
  char why[256] = "";
  rc = lt__hosts_parse(text, len, fn, ud, why, sizeof why);
  free(text);
  if (rc != LT_OK) snprintf(err, errlen, "%s: %s", path, why);
  return rc;
}

static int is_announce_name(const char *name) {
  size_t n = strlen(name), s = strlen(SUFFIX);
  return name[0] != '.' && n > s && strcmp(name + n - s, SUFFIX) == 0;
}

int lt__hosts_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- the directory watch --------------------------------------------------------------- */

typedef struct seen {
  char *name;
  int64_t mtime_ns;
  int64_t size;
} seen_t;

struct lt_hosts_watch {
  char *dir;
  seen_t *seen;
  size_t nseen, capseen;
  int64_t last_ms; /* of the last read; 0 before the first */
};

int lt__hosts_watch_new(lt_hosts_watch_t **out, const char *dir) {
  *out = NULL;
  lt_hosts_watch_t *w = calloc(1, sizeof *w);
  if (w == NULL || (w->dir = strdup(dir)) == NULL) {
    free(w);
    return LT_ENOMEM;
  }
  *out = w;
  return LT_OK;
}

void lt__hosts_watch_free(lt_hosts_watch_t *w) {
  if (w == NULL) return;
  for (size_t i = 0; i < w->nseen; i++)
    free(w->seen[i].name);
  free(w->seen);
  free(w->dir);
  free(w);
}

/* changed tells whether the file `name` with `st` is new or changed since it was read, and
 * records it as read. */
static int changed(lt_hosts_watch_t *w, const char *name, const struct stat *st) {
  int64_t mt = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
  for (size_t i = 0; i < w->nseen; i++) {
    seen_t *s = &w->seen[i];
    if (strcmp(s->name, name) != 0) continue;
    if (s->mtime_ns == mt && s->size == (int64_t)st->st_size) return 0;
    s->mtime_ns = mt;
    s->size = (int64_t)st->st_size;
    return 1;
  }
  if (LT_VEC_RESERVE(w->seen, w->capseen, w->nseen + 1) != LT_OK)
    return 1; /* read it again next time */
  char *copy = strdup(name);
  if (copy == NULL) return 1;
  w->seen[w->nseen++] = (seen_t){copy, mt, (int64_t)st->st_size};
  return 1;
}

/* scan_dir reads every announce file of `dir` (with a watch: only new or changed ones). */
static int scan_dir(lt_hosts_watch_t *w, const char *dir, lt_hosts_fn fn, void *ud) {
  DIR *d = opendir(dir);
  if (d == NULL) return errno == ENOENT ? LT_ENOENT : LT_EIO;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!is_announce_name(de->d_name)) continue;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path) continue;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (w != NULL && !changed(w, de->d_name, &st)) continue;
    char err[512];
    int rc = read_one(path, fn, ud, err, sizeof err);
    if (rc != LT_OK && rc != LT_ENOENT) lt__log(LT_LOG_WARN, "hosts: skipped %s", err);
  }
  closedir(d);
  return LT_OK;
}

int lt__hosts_read(const char *path, lt_hosts_fn fn, void *ud, char *err, size_t errlen) {
  if (!lt__hosts_is_dir(path)) return read_one(path, fn, ud, err, errlen);
  int rc = scan_dir(NULL, path, fn, ud);
  if (rc != LT_OK) snprintf(err, errlen, "%s: %s", path, lt_strerror(rc));
  return rc;
}

int lt__hosts_load(lt_host_add_fn add, void *ud, const char *path, char *err, size_t errlen) {
  adder_t a = {add, ud, 0};
  int rc = lt__hosts_read(path, add_entry, &a, err, errlen);
  return rc != LT_OK ? rc : a.entries;
}

int lt__hosts_watch_poll(lt_hosts_watch_t *w, lt_host_add_fn add, void *ud, int64_t now_ms) {
  if (w->last_ms != 0 && now_ms - w->last_ms < LT_HOSTS_WATCH_MS) return 0;
  w->last_ms = now_ms;
  adder_t a = {add, ud, 0};
  int rc = scan_dir(w, w->dir, add_entry, &a);
  return rc != LT_OK ? 0 : a.entries;
}
