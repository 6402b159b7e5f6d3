/* inputs.c: the image list of an imgpipe run (inputs.h): directory scan, output paths and
 * loading one input: a file's bytes as they are, or a synthetic image drawn into a token.
 * Building the list belongs to the main thread; img_inputs_load to any thread. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imgtoken.h"
#include "inputs.h"
#include "synth.h"

#define MAX_FILE_BYTES (512u << 20) /* larger than any sane encoding of an IMG_MAX_PIXELS image */

void img_inputs_init(img_inputs_t *l, uint32_t synth_w, uint32_t synth_h) {
  *l = (img_inputs_t){.synth_w = synth_w, .synth_h = synth_h};
}

void img_inputs_free(img_inputs_t *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].name);
    free(l->v[i].path);
    free(l->v[i].out_path);
  }
  free(l->v);
  *l = (img_inputs_t){0};
}

/* push appends an entry taking ownership of name and path (freed here on failure); a NULL
 * path makes it synthetic image `synth`. */
static int push(img_inputs_t *l, char *name, char *path, uint64_t synth) {
  if (name == NULL) goto fail;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    img_input_t *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) goto fail;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (img_input_t){.name = name, .path = path, .synth = synth};
  return 0;
fail:
  free(name);
  free(path);
  return -1;
}

int img_inputs_add_file(img_inputs_t *l, const char *path) {
  char *p = strdup(path);
  return p == NULL ? -1 : push(l, strdup(path), p, 0);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int img_inputs_add_dir(img_inputs_t *l, const char *dir, char *err, size_t errlen) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    snprintf(err, errlen, "%s: %s", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (;;) {
    errno = 0; /* readdir reports an error only through errno */
    struct dirent *e = readdir(d);
    if (e == NULL) {
      if (errno != 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        rc = -2;
      }
      break;
    }
    if (e->d_name[0] == '.') continue;
    char *path = NULL;
    struct stat st;
    if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
      rc = -1;
      break;
    }
    /* stat follows links: a dangling one fails here and stays in, to be reported by name. */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      free(path);
      continue;
    }
    if (n == cap) {
      char **v = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *v);
      if (v == NULL) {
        free(path);
        rc = -1;
        break;
      }
      names = v;
    }
    names[n++] = path;
  }
  closedir(d);
  if (rc == -1) snprintf(err, errlen, "%s: out of memory", dir);
  if (rc == 0) qsort(names, n, sizeof *names, cmp_name);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0 && push(l, strdup(names[i]), names[i], 0) != 0) {
      snprintf(err, errlen, "%s: out of memory", dir);
      rc = -1;
    } else if (rc != 0) {
      free(names[i]);
    }
  }
  free(names);
  return rc == 0 ? 0 : -1;
}

int img_inputs_add_synth(img_inputs_t *l, size_t count) {
  for (size_t i = 0; i < count; i++) {
    char *name = NULL;
    if (asprintf(&name, "synthetic-%04zu", i + 1) < 0) return -1;
    if (push(l, name, NULL, i) != 0) return -1;
  }
  return 0;
}

/* make_dirs creates dir and its missing parents, like mkdir -p. */
static int make_dirs(const char *dir, char *err, size_t errlen) {
  char *p = strdup(dir);
  if (p == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot create %s: %s", p, strerror(errno));
      rc = -1;
      break;
    }
    *s = c;
    if (c == '\0') break;
  }
  struct stat st;
  if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
    snprintf(err, errlen, "%s is not a directory", dir);
    rc = -1;
  }
  free(p);
  return rc;
}

/* out_name returns "<base name without its extension>.png" for path (caller frees). */
static char *out_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base != NULL ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  size_t stem = dot != NULL && dot != base ? (size_t)(dot - base) : strlen(base);
  char *s = NULL;
  if (asprintf(&s, "%.*s.png", (int)stem, base) < 0) return NULL;
  return s;
}

static int cmp_out(const void *a, const void *b) {
  const img_input_t *x = *(img_input_t *const *)a, *y = *(img_input_t *const *)b;
  int c = strcmp(x->out_path, y->out_path);
  /* Equal paths keep the list's order, so the message names the inputs in order. */
  return c != 0 ? c : (x > y) - (x < y);
}

int img_inputs_plan(img_inputs_t *l, const char *out_dir, char *err, size_t errlen) {
  if (make_dirs(out_dir, err, errlen) != 0) return -1;
  for (size_t i = 0; i < l->n; i++) {
    img_input_t *in = &l->v[i];
    char *base = out_name(in->path != NULL ? in->path : in->name);
    free(in->out_path);
    in->out_path = NULL;
    if (base == NULL || asprintf(&in->out_path, "%s/%s", out_dir, base) < 0) {
      in->out_path = NULL;
      free(base);
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    free(base);
    struct stat si, so;
    if (in->path != NULL && stat(in->path, &si) == 0 && stat(in->out_path, &so) == 0 &&
        si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
      snprintf(err, errlen, "%s: its output %s would overwrite it", in->name, in->out_path);
      return -1;
    }
  }
  img_input_t **by_out = malloc((l->n ? l->n : 1) * sizeof *by_out);
  if (by_out == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < l->n; i++)
    by_out[i] = &l->v[i];
  qsort(by_out, l->n, sizeof *by_out, cmp_out);
  int rc = 0;
  for (size_t i = 1; i < l->n && rc == 0; i++)
    if (strcmp(by_out[i - 1]->out_path, by_out[i]->out_path) == 0) {
      snprintf(err, errlen, "%s and %s would both be written to %s", by_out[i - 1]->name,
               by_out[i]->name, by_out[i]->out_path);
      rc = -1;
    }
  free(by_out);
  return rc;
}

/* read_file reads the whole file into *data (caller frees). */
static int read_file(const char *path, unsigned char **data, size_t *len, char *err,
                     size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  int rc = -1;
  unsigned char *buf = NULL;
  if (fstat(fileno(f), &st) != 0) {
    snprintf(err, errlen, "%s", strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "not a regular file");
  } else if (st.st_size == 0) {
    snprintf(err, errlen, "empty file, not an image");
  } else if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
    snprintf(err, errlen, "%lld bytes, more than the %u accepted", (long long)st.st_size,
             MAX_FILE_BYTES);
  } else if ((buf = malloc((size_t)st.st_size)) == NULL) {
    snprintf(err, errlen, "out of memory for %lld bytes", (long long)st.st_size);
  } else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    snprintf(err, errlen, "read error: %s", ferror(f) ? strerror(errno) : "file shrank");
  } else {
    rc = 0;
  }
  fclose(f);
  if (rc != 0) {
    free(buf);
    return -1;
  }
  *data = buf;
  *len = (size_t)st.st_size;
  return 0;
}

int img_inputs_load(const img_inputs_t *l, size_t i, unsigned char **token, size_t *len, char *err,
                    size_t errlen) {
  const img_input_t *in = &l->v[i];
  *token = NULL;
  *len = 0;
  if (in->path == NULL) {
    size_t n = img_token_size(l->synth_w, l->synth_h);
    unsigned char *t = malloc(n);
    if (t == NULL) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    img_token_put_header(t, l->synth_w, l->synth_h);
    img_synth_fill(t + IMG_HEADER, l->synth_w, l->synth_h, in->synth);
    *token = t;
    *len = n;
    return 0;
  }
  return read_file(in->path, token, len, err, errlen);
}
