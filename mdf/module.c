/* module.c: the kernel-module registry: an ordered list of directories and the modules
 * loaded from them, and the resolution of "module:function" to the exported symbol
 * `lt_kernel_function`. A module is dlopen'ed once and stays loaded until the registry is
 * freed. One mutex guards everything: any thread. */
#include <dlfcn.h>
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lithium/error.h>

#include "elfhdr.h"
#include "module.h"
#include "safefile.h"
#include "sha256.h"
#include "vec.h"

#define NAME_MAX_LEN LT_MODULE_NAME_MAX

typedef struct module {
  char *name;
  void *handle;
  char sha256[LT_SHA256_HEX]; /* of the file loaded, hex; "" when it could not be read */
  int fd; /* the checked file it was loaded from (kept open: its /proc/self/fd name stays
             this module's), or -1 */
  struct module *next;
} module_t;

struct lt_modules {
  pthread_mutex_t mu;
  char **dirs;
  size_t ndirs, capdirs;
  module_t *loaded;
  bool checked; /* lt__modules_set_checked */
};

static int is_word_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

/* module_chars_valid tells whether s[0..len) is a module name: [A-Za-z0-9_.-]+. */
static int module_chars_valid(const char *s, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (!is_word_char(s[i]) && s[i] != '-' && s[i] != '.') return 0;
  return 1;
}

int lt__kernel_name_valid(const char *name) {
  if (name == NULL) return 0;
  size_t len = strnlen(name, NAME_MAX_LEN + 1);
  if (len > NAME_MAX_LEN) return 0;
  const char *colon = strchr(name, ':');
  if (colon == NULL || colon[1] == '\0' || !module_chars_valid(name, (size_t)(colon - name)))
    return 0;
  for (const char *p = colon + 1; *p != '\0'; p++)
    if (!is_word_char(*p)) return 0; /* also rejects a second ':' */
  return 1;
}

int lt__module_name_valid(const char *module) {
  if (module == NULL) return 0;
  size_t len = strnlen(module, NAME_MAX_LEN + 1);
  return len <= NAME_MAX_LEN && module_chars_valid(module, len) && strcmp(module, ".") != 0 &&
         strcmp(module, "..") != 0;
}

int lt__kernel_module(const char *kernel, char module[LT_MODULE_NAME_MAX + 1]) {
  if (!lt__kernel_name_valid(kernel)) return LT_EINVAL;
  const char *colon = strchr(kernel, ':');
  snprintf(module, LT_MODULE_NAME_MAX + 1, "%.*s", (int)(colon - kernel), kernel);
  return LT_OK;
}

int lt__module_open(const char *path, const char *name, void **handle, char *err, size_t errlen) {
  char why[512];
  int rc = lt__elf_check_file(path, why, sizeof why);
  if (rc != LT_OK) {
    snprintf(err, errlen, "cannot load module '%s': %s: %s", name, path, why);
    return LT_ENOMODULE;
  }
  *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (*handle == NULL) {
    const char *e = dlerror();
    snprintf(err, errlen, "cannot load module '%s': %s", name, e != NULL ? e : path);
    return LT_ENOMODULE;
  }
  return LT_OK;
}

int lt__module_kernel(void *handle, const char *kernel, lt_kernel_fn *fn, char *err,
                      size_t errlen) {
  const char *colon = strchr(kernel, ':');
  char symbol[NAME_MAX_LEN + sizeof "lt_kernel_"];
  snprintf(symbol, sizeof symbol, "lt_kernel_%s", colon != NULL ? colon + 1 : kernel);
  dlerror(); /* clear a stale error so a NULL symbol is reported correctly */
  void *sym = dlsym(handle, symbol);
  if (sym == NULL) {
    snprintf(err, errlen, "unknown kernel '%s' (module '%.*s' has no %s)", kernel,
             colon != NULL ? (int)(colon - kernel) : 0, kernel, symbol);
    return LT_ENOKERNEL;
  }
  *fn = (lt_kernel_fn)sym;
  return LT_OK;
}

int lt__module_in_place(void *handle, const char *kernel) {
  const char *colon = strchr(kernel, ':');
  char symbol[NAME_MAX_LEN + sizeof "lt_in_place__"];
  snprintf(symbol, sizeof symbol, "lt_in_place__%s", colon != NULL ? colon + 1 : kernel);
  dlerror();
  const int *flag = dlsym(handle, symbol);
  return flag != NULL && *flag == 1;
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

void lt__modules_set_checked(lt_modules_t *m, bool on) {
  pthread_mutex_lock(&m->mu);
  m->checked = on;
  pthread_mutex_unlock(&m->mu);
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
  int rc = LT_VEC_RESERVE(m->dirs, m->capdirs, m->ndirs + 1);
  if (rc == LT_OK) m->dirs[m->ndirs++] = copy;
  pthread_mutex_unlock(&m->mu);
  if (rc != LT_OK) free(copy);
  return rc;
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

/* find_loaded returns the loaded module `name`, or NULL. Called with the mutex held. */
static module_t *find_loaded(const lt_modules_t *m, const char *name) {
  for (module_t *mod = m->loaded; mod != NULL; mod = mod->next)
    if (strcmp(mod->name, name) == 0) return mod;
  return NULL;
}

/* load returns the handle of module `name`, loading it on first use. Called with the mutex
 * held. */
static int load(lt_modules_t *m, const char *name, void **handle, char *err, size_t errlen) {
  const module_t *have = find_loaded(m, name);
  if (have != NULL) {
    *handle = have->handle;
    return LT_OK;
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
  /* Checked: opened without following a link, checked on its descriptor and loaded from
   * that descriptor, so the file checked is the file that runs (safefile.h). */
  char fdpath[32];
  const char *from = path;
  mod->fd = -1;
  if (m->checked) {
    char *slash = strrchr(path, '/'), why[600];
    *slash = '\0';
    int rc = lt__safe_open(path, slash + 1, &mod->fd, why, sizeof why);
    *slash = '/';
    if (rc != LT_OK) {
      snprintf(err, errlen, "cannot load module '%s': %s: %s", name, path, why);
      free(mod->name);
      free(mod);
      return LT_ENOMODULE;
    }
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", mod->fd);
    from = fdpath;
  }
  int rc = lt__module_open(from, name, &mod->handle, err, errlen);
  if (rc != LT_OK) {
    if (mod->fd >= 0) close(mod->fd);
    free(mod->name);
    free(mod);
    return rc;
  }
  lt__sha256_file(from, mod->sha256);
  mod->next = m->loaded;
  m->loaded = mod;
  *handle = mod->handle;
  return LT_OK;
}

int lt__modules_locate(lt_modules_t *m, const char *name, char *path, size_t len) {
  pthread_mutex_lock(&m->mu);
  int found = find_file(m, name, path, len);
  pthread_mutex_unlock(&m->mu);
  return found ? LT_OK : LT_ENOMODULE;
}

void lt__modules_sha256(lt_modules_t *m, const char *name, char hex[LT_SHA256_HEX]) {
  char path[4096];
  hex[0] = '\0';
  pthread_mutex_lock(&m->mu);
  const module_t *mod = find_loaded(m, name);
  if (mod != NULL)
    memcpy(hex, mod->sha256, LT_SHA256_HEX);
  else if (find_file(m, name, path, sizeof path))
    lt__sha256_file(path, hex);
  pthread_mutex_unlock(&m->mu);
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
  char module[LT_MODULE_NAME_MAX + 1];
  lt__kernel_module(name, module);
  pthread_mutex_lock(&m->mu);
  void *handle = NULL;
  int rc = load(m, module, &handle, err, errlen);
  if (rc == LT_OK) rc = lt__module_kernel(handle, name, fn, err, errlen);
  pthread_mutex_unlock(&m->mu);
  return rc;
}

int lt__modules_in_place(lt_modules_t *m, const char *name) {
  char module[LT_MODULE_NAME_MAX + 1];
  char err[8];
  if (!lt__kernel_name_valid(name)) return 0;
  lt__kernel_module(name, module);
  pthread_mutex_lock(&m->mu);
  void *handle = NULL;
  int in_place =
      load(m, module, &handle, err, sizeof err) == LT_OK && lt__module_in_place(handle, name);
  pthread_mutex_unlock(&m->mu);
  return in_place;
}

void lt__modules_free(lt_modules_t *m) {
  if (m == NULL) return;
  module_t *mod = m->loaded;
  while (mod != NULL) {
    module_t *next = mod->next;
    dlclose(mod->handle);
    if (mod->fd >= 0) close(mod->fd);
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
