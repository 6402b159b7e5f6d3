/* files.c: the inputs and outputs of `lithium run` (files.h). Everything that can be known
 * before the run is checked at once and every problem reported, so a typo costs no server
 * start-up; inputs are read one at a time as they are submitted. Main thread only. */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* A file identity, to find an output that is one of the inputs (also through links). */
typedef struct ident {
  dev_t dev;
  ino_t ino;
  size_t idx;
} ident_t;

static int cmp_ident(const void *a, const void *b) {
  const ident_t *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return 0;
}

static const char *base_name(const lt_input_t *in) {
  if (strcmp(in->path, "-") == 0) return "stdin";
  const char *slash = strrchr(in->path, '/');
  return slash != NULL ? slash + 1 : in->path;
}

static const lt_input_t *sort_base; /* qsort has no context argument */

static int cmp_base(const void *a, const void *b) {
  return strcmp(base_name(&sort_base[*(const size_t *)a]),
                base_name(&sort_base[*(const size_t *)b]));
}

/* check_inputs stats every input; returns the number of problems reported. */
static int check_inputs(lt_input_t *ins, size_t n, ident_t *ids, size_t *nids) {
  int bad = 0;
  *nids = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    int is_stdin = strcmp(ins[i].path, "-") == 0;
    if (is_stdin) {
      if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode))
        ids[(*nids)++] = (ident_t){st.st_dev, st.st_ino, i};
      continue;
    }
    const char *why = NULL;
    if (stat(ins[i].path, &st) != 0)
      why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
      why = strerror(EISDIR);
    else if (access(ins[i].path, R_OK) != 0)
      why = strerror(errno);
    if (why != NULL) {
      fprintf(stderr, "lithium: %s: %s\n", ins[i].name, why);
      bad++;
      continue;
    }
    ids[(*nids)++] = (ident_t){st.st_dev, st.st_ino, i};
  }
  return bad;
}

/* check_outputs names every output and reports clashes between them and with the inputs;
 * returns the number of problems reported, or -1 on out of memory. */
static int check_outputs(lt_input_t *ins, size_t n, const char *dir, ident_t *ids, size_t nids) {
  size_t dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/')
    dlen--;
  size_t *order = malloc(n * sizeof *order);
  if (order == NULL) return -1;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    order[i] = i;
    const char *base = base_name(&ins[i]);
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
      fprintf(stderr, "lithium: %s: no file name to write under --out\n", ins[i].name);
      bad++;
    }
    if (asprintf(&ins[i].out_path, "%.*s/%s", (int)dlen, dir, base) < 0) {
      ins[i].out_path = NULL;
      free(order);
      return -1;
    }
  }
  sort_base = ins;
  qsort(order, n, sizeof *order, cmp_base);
  for (size_t i = 1; i < n; i++) {
    const lt_input_t *a = &ins[order[i - 1]], *b = &ins[order[i]];
    if (strcmp(base_name(a), base_name(b)) != 0) continue;
    fprintf(stderr, "lithium: %s and %s would both write %s\n", a->name, b->name, b->out_path);
    bad++;
  }
  free(order);
  qsort(ids, nids, sizeof *ids, cmp_ident);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(ins[i].out_path, &st) != 0) continue;
    ident_t key = {st.st_dev, st.st_ino, 0};
    const ident_t *hit = bsearch(&key, ids, nids, sizeof *ids, cmp_ident);
    if (hit == NULL) continue;
    fprintf(stderr, "lithium: %s would overwrite the input %s\n", ins[i].out_path,
            ins[hit->idx].name);
    bad++;
  }
  return bad;
}

/* make_dirs creates `dir` and its missing parents, like mkdir -p. */
static int make_dirs(const char *dir) {
  char *path = strdup(dir);
  if (path == NULL) return ENOMEM;
  int rc = 0;
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) rc = errno;
    *p = c;
    if (rc != 0 || c == '\0') break;
  }
  struct stat st;
  if (rc == 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) rc = ENOTDIR;
  free(path);
  return rc;
}

int lt__files_plan(lt_input_t **out, const char *const *paths, size_t n, const char *out_dir) {
  *out = NULL;
  lt_input_t *ins = calloc(n + 1, sizeof *ins);
  ident_t *ids = calloc(n + 1, sizeof *ids);
  if (ins == NULL || ids == NULL) {
    free(ins);
    free(ids);
    fprintf(stderr, "lithium: out of memory\n");
    return LT_EXIT_FAILED;
  }
  for (size_t i = 0; i < n; i++) {
    ins[i].path = paths[i];
    ins[i].name = strcmp(paths[i], "-") == 0 ? "stdin" : paths[i];
  }
  size_t nids;
  int bad = check_inputs(ins, n, ids, &nids);
  if (bad == 0 && out_dir != NULL) {
    bad = check_outputs(ins, n, out_dir, ids, nids);
    if (bad < 0) {
      fprintf(stderr, "lithium: out of memory\n");
      free(ids);
      lt__files_free(ins, n);
      return LT_EXIT_FAILED;
    }
    int rc = bad == 0 ? make_dirs(out_dir) : 0;
    if (rc != 0) {
      fprintf(stderr, "lithium: --out %s: %s\n", out_dir, strerror(rc));
      bad++;
    }
  }
  free(ids);
  if (bad > 0) {
    lt__files_free(ins, n);
    return LT_EXIT_USAGE;
  }
  *out = ins;
  return LT_EXIT_OK;
}

int lt__files_read(const lt_input_t *in, void **data, size_t *len, char *err, size_t errlen) {
  *data = NULL;
  *len = 0;
  int is_stdin = strcmp(in->path, "-") == 0;
  int fd = is_stdin ? STDIN_FILENO : open(in->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "%s: %s", in->name, strerror(errno));
    return -1;
  }
  struct stat st;
  size_t cap = 4096;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    cap = (size_t)st.st_size + 1; /* +1: one read sees the end without growing */
  char *buf = malloc(cap);
  size_t have = 0;
  int rc = buf != NULL ? 0 : ENOMEM;
  while (rc == 0) {
    if (have == cap) {
      char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (b == NULL) {
        rc = ENOMEM;
        break;
      }
      buf = b;
      cap *= 2;
    }
    ssize_t got = read(fd, buf + have, cap - have);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) rc = errno;
    if (got <= 0) break;
    have += (size_t)got;
  }
  if (!is_stdin) close(fd);
  if (rc != 0) {
    free(buf);
    snprintf(err, errlen, "%s: %s", in->name, strerror(rc));
    return -1;
  }
  *data = buf;
  *len = have;
  return 0;
}

int lt__files_write_stdout(const void *data, size_t len, char *err, size_t errlen) {
  if (len > 0 && fwrite(data, 1, len, stdout) != len) {
    int e = errno != 0 ? errno : EIO;
    snprintf(err, errlen, "stdout: %s", strerror(e));
    return e;
  }
  return 0;
}

int lt__files_write(const lt_input_t *in, const void *data, size_t len, char *err, size_t errlen) {
  if (in->out_path == NULL) return lt__files_write_stdout(data, len, err, errlen);
  int fd = open(in->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "%s: %s", in->out_path, strerror(e));
    return e;
  }
  const char *p = data;
  size_t left = len;
  int rc = 0;
  while (left > 0 && rc == 0) {
    ssize_t put = write(fd, p, left);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      rc = errno;
      break;
    }
    p += put;
    left -= (size_t)put;
  }
  if (close(fd) != 0 && rc == 0) rc = errno;
  if (rc != 0) {
    unlink(in->out_path);
    snprintf(err, errlen, "%s: %s", in->out_path, strerror(rc));
    return rc;
  }
  return 0;
}

void lt__files_free(lt_input_t *ins, size_t n) {
  if (ins == NULL) return;
  for (size_t i = 0; i < n; i++)
    free(ins[i].out_path);
  free(ins);
}
