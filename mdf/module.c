/* module.c: the kernel-module registry: an ordered list of directories and the modules
 * loaded from them, and the resolution of "module:function" to the exported symbol
 * `lt_kernel_function`. A module is dlopen'ed once and stays loaded until the registry is
 * freed. One mutex guards everything: any thread. */
#include <dlfcn.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lithium/error.h>

#include "module.h"
#include "sha256.h"

#define NAME_MAX_LEN 255

typedef struct module {
  char *name;
  void *handle;
  char sha256[LT_SHA256_HEX]; /* of the file loaded, hex; "" when it could not be read */
  struct module *next;
} module_t;

struct lt_modules {
  pthread_mutex_t mu;
  char **dirs;
  size_t ndirs;
  module_t *loaded;
};

static int is_word_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

int lt__kernel_name_valid(const char *name) {
  if (name == NULL) return 0;
  size_t len = strnlen(name, NAME_MAX_LEN + 1);
  if (len > NAME_MAX_LEN) return 0;
  const char *colon = strchr(name, ':');
  if (colon == NULL || colon == name || colon[1] == '\0') return 0;
  for (const char *p = name; p < colon; p++)
    if (!is_word_char(*p) && *p != '-' && *p != '.') return 0;
  for (const char *p = colon + 1; *p != '\0'; p++)
    if (!is_word_char(*p)) return 0; /* also rejects a second ':' */
  return 1;
}

int lt__modules_new(lt_modules_t **out) {
  lt_modules_t *m = calloc(1, sizeof *m);
  if (m == NULL) return LT_ENOMEM;
  if (pthread_mutex_init(&m->mu, NULL) != 0) {
    free(m);
    return LT_ENOMEM;
  }
  *out = m;
  return LT_OK;
}

int lt__modules_add_dir(lt_modules_t *m, const char *dir) {
  struct stat sb;
  if (dir == NULL || dir[0] == '\0' || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return LT_EINVAL;
  DIR *d = opendir(dir);
  if (d == NULL) return LT_EINVAL;
  closedir(d);
  char *copy = strdup(dir);
  if (copy == NULL) return LT_ENOMEM;
  pthread_mutex_lock(&m->mu);
  char **dirs = realloc(m->dirs, (m->ndirs + 1) * sizeof *dirs);
  if (dirs == NULL) {
    pthread_mutex_unlock(&m->mu);
    free(copy);
    return LT_ENOMEM;
  }
  dirs[m->ndirs++] = copy;
  m->dirs = dirs;
  pthread_mutex_unlock(&m->mu);
  return LT_OK;
}

/* searched_list writes the directories, comma-separated, for an error message. */
static void searched_list(const lt_modules_t *m, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  if (m->ndirs == 0) {
    snprintf(buf, len, "no module directories");
    return;
  }
  for (size_t i = 0; i < m->ndirs && used < len; i++) {
    int n = snprintf(buf + used, len - used, "%s%s", i > 0 ? ", " : "", m->dirs[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* find_file looks for lib<name>.so, then <name>.so, in each directory in order; writes the
 * first that exists into path and returns 1, else 0. */
static int find_file(const lt_modules_t *m, const char *name, char *path, size_t len) {
  static const char *const patterns[] = {"%s/lib%s.so", "%s/%s.so"};
  for (size_t i = 0; i < m->ndirs; i++) {
    for (size_t j = 0; j < sizeof patterns / sizeof patterns[0]; j++) {
      struct stat sb;
      int n = snprintf(path, len, patterns[j], m->dirs[i], name);
      if (n < 0 || (size_t)n >= len) continue;
      if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
    }
  }
  return 0;
}

/* load returns the handle of module `name`, loading it on first use. Called with the mutex
 * held. */
static int load(lt_modules_t *m, const char *name, void **handle, char *err, size_t errlen) {
  for (module_t *mod = m->loaded; mod != NULL; mod = mod->next) {
    if (strcmp(mod->name, name) == 0) {
      *handle = mod->handle;
      return LT_OK;
    }
  }
  char path[4096];
  if (!find_file(m, name, path, sizeof path)) {
    char searched[1024];
    searched_list(m, searched, sizeof searched);
    snprintf(err, errlen, "unknown module '%s' (searched: %s)", name, searched);
    return LT_ENOMODULE;
  }
  module_t *mod = calloc(1, sizeof *mod);
  if (mod == NULL || (mod->name = strdup(name)) == NULL) {
    free(mod);
    snprintf(err, errlen, "out of memory loading module '%s'", name);
    return LT_ENOMEM;
  }
  mod->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (mod->handle == NULL) {
    const char *why = dlerror();
    snprintf(err, errlen, "cannot load module '%s': %s", name, why != NULL ? why : path);
    free(mod->name);
    free(mod);
    return LT_ENOMODULE;
  }
  lt__sha256_file(path, mod->sha256);
  mod->next = m->loaded;
  m->loaded = mod;
  *handle = mod->handle;
  return LT_OK;
}

size_t lt__modules_each(lt_modules_t *m, lt_module_fn fn, void *ud) {
  size_t n = 0;
  pthread_mutex_lock(&m->mu);
  for (const module_t *mod = m->loaded; mod != NULL; mod = mod->next, n++)
    fn(ud, mod->name, mod->sha256);
  pthread_mutex_unlock(&m->mu);
  return n;
}

int lt__modules_resolve(lt_modules_t *m, const char *name, lt_kernel_fn *fn, char *err,
                        size_t errlen) {
  char dummy[1];
  if (err == NULL || errlen == 0) {
    err = dummy;
    errlen = sizeof dummy;
  }
  err[0] = '\0';
  if (!lt__kernel_name_valid(name)) {
    snprintf(err, errlen, "malformed kernel name '%.*s' (expected module:function)", NAME_MAX_LEN,
             name != NULL ? name : "(null)");
    return LT_EINVAL;
  }
  const char *colon = strchr(name, ':');
  char module[NAME_MAX_LEN + 1];
  char symbol[NAME_MAX_LEN + sizeof "lt_kernel_"];
  snprintf(module, sizeof module, "%.*s", (int)(colon - name), name);
  snprintf(symbol, sizeof symbol, "lt_kernel_%s", colon + 1);

  pthread_mutex_lock(&m->mu);
  void *handle = NULL;
  int rc = load(m, module, &handle, err, errlen);
  if (rc == LT_OK) {
    dlerror(); /* clear a stale error so a NULL symbol is reported correctly */
    void *sym = dlsym(handle, symbol);
    if (sym == NULL) {
      snprintf(err, errlen, "unknown kernel '%s' (module '%s' has no %s)", name, module, symbol);
      rc = LT_ENOKERNEL;
    } else {
      *fn = (lt_kernel_fn)sym;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

void lt__modules_free(lt_modules_t *m) {
  if (m == NULL) return;
  module_t *mod = m->loaded;
  while (mod != NULL) {
    module_t *next = mod->next;
    dlclose(mod->handle);
    free(mod->name);
    free(mod);
    mod = next;
  }
  for (size_t i = 0; i < m->ndirs; i++)
    free(m->dirs[i]);
  free(m->dirs);
  pthread_mutex_destroy(&m->mu);
  free(m);
}
