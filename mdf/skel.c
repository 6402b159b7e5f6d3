/* skel.c: builders and destructor of skeleton trees (lithium/skel.h). Builders take
 * ownership of their children and free them when they fail; which kernels a kind takes and
 * how many children is the kinds table's (kind.h). Knows nothing of running. Any thread. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "kind.h"
#include "lasterr.h"
#include "module.h"
#include "skel.h"

static lt_skel_t *node_new(lt_skel_kind_t kind, size_t nchildren) {
  lt_skel_t *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->kind = kind;
  if (nchildren > 0) {
    s->children = calloc(nchildren, sizeof *s->children);
    if (s->children == NULL) {
      free(s);
      return NULL;
    }
  }
  s->nchildren = nchildren;
  return s;
}

/* name_flaw says what is wrong with kernel name `name` (NULL: nothing), as a phrase that
 * follows the quoted name in a message. */
static const char *name_flaw(const char *name, char *buf, size_t len) {
  if (lt__kernel_name_valid(name)) return NULL;
  size_t n = strnlen(name, LT_MODULE_NAME_MAX + 1);
  const char *colon = strchr(name, ':');
  if (n > LT_MODULE_NAME_MAX)
    snprintf(buf, len, "is longer than %d bytes", LT_MODULE_NAME_MAX);
  else if (colon == NULL)
    snprintf(buf, len, "has no ':' (expected module:function, e.g. \"mandel:band\")");
  else if (colon == name)
    snprintf(buf, len, "has no module before ':' (expected module:function)");
  else if (colon[1] == '\0')
    snprintf(buf, len, "has no function after ':' (expected module:function)");
  else {
    const char *p = name;
    for (; p < colon; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '_' || *p == '-' || *p == '.'))
        break;
    if (p < colon) {
      snprintf(buf, len,
               "has '%c' at offset %d in its module name (a module name is letters, digits, "
               "'_', '-' and '.')",
               *p, (int)(p - name));
    } else {
      for (p = colon + 1; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
          break;
      snprintf(buf, len,
               "has '%c' at offset %d in its function name (a function name is letters, "
               "digits and '_', a C identifier's characters)",
               *p, (int)(p - name));
    }
  }
  return buf;
}

/* kernels_valid tells whether `kernels` holds a valid name for each kernel argument of the
 * kind `d`, in argument order; NULL stands for a skeleton in place of the kernel where the
 * argument allows one. A failure is the thread's last (lt__fail_skel), naming builder `fn`
 * and the argument. */
static int kernels_valid(const char *fn, const lt_skel_kind_desc_t *d, const char *const *kernels) {
  size_t k = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    const char *role = d->args[i].role != NULL ? d->args[i].role : "kernel";
    char why[160];
    const char *flaw;
    if (kernels[k] == NULL) {
      if (d->args[i].instead == 0) return lt__fail_null(fn, role, 1), 0;
    } else if ((flaw = name_flaw(kernels[k], why, sizeof why)) != NULL) {
      lt__fail_skel(LT_EINVAL, "%s: %s name '%.300s' %s", fn, role, kernels[k], flaw);
      return 0;
    }
    k++;
  }
  return 1;
}

/* oom notes an out-of-memory failure of builder `fn` and returns NULL. */
static lt_skel_t *oom(const char *fn) {
  lt__fail_skel(LT_ENOMEM, "%s: out of memory", fn);
  return NULL;
}

/* node_with returns a node of `kind` holding copies of `kernels` (one per kernel argument,
 * in argument order) with room for `nchildren` children; NULL on a malformed name or out of
 * memory, the reason set for builder `fn`. */
static lt_skel_t *node_with(const char *fn, lt_skel_kind_t kind, const char *const *kernels,
                            size_t nchildren) {
  const lt_skel_kind_desc_t *d = lt__skel_kind(kind);
  if (!kernels_valid(fn, d, kernels)) return NULL;
  lt_skel_t *s = node_new(kind, nchildren);
  if (s == NULL) return oom(fn);
  size_t k = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    if (d->args[i].kind != LT_ARG_KERNEL) continue;
    const char *name = kernels[k++];
    lt_skel_kernel_t *slot = lt__skel_slot(s, d->args[i].slot);
    if (name != NULL && (slot->name = strdup(name)) == NULL) {
      lt_skel_free(s);
      return oom(fn);
    }
  }
  return s;
}

/* with_children returns `s` holding the `n` `kids` (named `names` in messages), or frees
 * them all when `s` or one of them is NULL, saying which for builder `fn`. */
static lt_skel_t *with_children(const char *fn, lt_skel_t *s, lt_skel_t **kids,
                                const char *const *names, size_t n) {
  int whole = s != NULL; /* a NULL `s` has said why */
  for (size_t i = 0; i < n && whole; i++)
    if (kids[i] == NULL) {
      lt__fail_null(fn, names[i], 1);
      whole = 0;
    }
  if (!whole) {
    lt_skel_free(s);
    for (size_t i = 0; i < n; i++)
      lt_skel_free(kids[i]);
    return NULL;
  }
  memcpy(s->children, kids, n * sizeof *kids);
  return s;
}

/* with_child returns `s` holding `child` (named `name`), or frees both when either is NULL. */
static lt_skel_t *with_child(const char *fn, lt_skel_t *s, lt_skel_t *child, const char *name) {
  return with_children(fn, s, &child, &name, 1);
}

int lt__skel_param_set(lt_skel_kernel_t *k, const void *param, size_t len) {
  void *copy = NULL;
  if (len > 0) {
    if ((copy = malloc(len)) == NULL) return LT_ENOMEM;
    memcpy(copy, param, len);
  }
  free(k->param);
  k->param = copy;
  k->param_len = len;
  return LT_OK;
}

LT_API lt_skel_t *lt_seq_with(const char *kernel, const void *param, size_t len) {
  if (len > 0 && param == NULL) {
    lt__fail_skel(LT_EINVAL, "lt_seq_with: param is NULL with len %zu (NULL needs len 0)", len);
    return NULL;
  }
  if (kernel == NULL) return lt__fail_null("lt_seq", "kernel", 1), NULL;
  lt_skel_t *s = node_with("lt_seq", LT_SKEL_SEQ, &kernel, 0);
  if (s == NULL || len == 0) return s;
  if (lt__skel_param_set(&s->k[LT_SLOT_KERNEL], param, len) != LT_OK) {
    lt_skel_free(s);
    return oom("lt_seq_with");
  }
  return s;
}

LT_API lt_skel_t *lt_seq(const char *kernel) {
  return lt_seq_with(kernel, NULL, 0);
}

LT_API lt_skel_t *lt_farm(lt_skel_t *worker) {
  if (worker == NULL) return lt__fail_null("lt_farm", "worker", 1), NULL;
  lt_skel_t *s = node_new(LT_SKEL_FARM, 1);
  return with_child("lt_farm", s != NULL ? s : oom("lt_farm"), worker, "worker");
}

LT_API lt_skel_t *lt_pipeline(lt_skel_t *first, ...) {
  va_list ap;
  size_t n = 0;
  va_start(ap, first);
  for (lt_skel_t *c = first; c != NULL; c = va_arg(ap, lt_skel_t *))
    n++;
  va_end(ap);
  if (n == 0) return lt__fail_null("lt_pipeline", "the first stage", 1), NULL;

  lt_skel_t *s = node_new(LT_SKEL_PIPE, n);
  if (s == NULL) oom("lt_pipeline");
  va_start(ap, first);
  size_t i = 0;
  for (lt_skel_t *c = first; c != NULL; c = va_arg(ap, lt_skel_t *)) {
    if (s != NULL)
      s->children[i++] = c;
    else
      lt_skel_free(c);
  }
  va_end(ap);
  return s;
}

LT_API lt_skel_t *lt_map(const char *split, lt_skel_t *body, const char *merge) {
  if (body == NULL || merge == NULL) {
    lt_skel_free(body);
    return lt__fail_null("lt_map", body == NULL ? "body" : "merge", 1), NULL;
  }
  const char *kernels[] = {split, merge};
  return with_child("lt_map", node_with("lt_map", LT_SKEL_MAP, kernels, 1), body, "body");
}

LT_API lt_skel_t *lt_reduce(const char *combine) {
  if (combine == NULL) return lt__fail_null("lt_reduce", "combine", 1), NULL;
  return node_with("lt_reduce", LT_SKEL_REDUCE, &combine, 0);
}

LT_API lt_skel_t *lt_map_reduce(const char *split, lt_skel_t *body, lt_skel_t *reduce) {
  const char *kernels[] = {split, NULL};
  lt_skel_t *kids[] = {body, reduce};
  const char *names[] = {"body", "reduce"};
  if (reduce != NULL && reduce->kind != LT_SKEL_REDUCE) {
    lt_skel_free(reduce);
    lt_skel_free(body);
    lt__fail_skel(LT_EINVAL, "lt_map_reduce: reduce is no lt_reduce(...)");
    return NULL;
  }
  if (body == NULL || reduce == NULL) {
    lt_skel_free(body);
    lt_skel_free(reduce);
    return lt__fail_null("lt_map_reduce", body == NULL ? "body" : "reduce", 1), NULL;
  }
  return with_children("lt_map_reduce", node_with("lt_map_reduce", LT_SKEL_MAP, kernels, 2), kids,
                       names, 2);
}

LT_API lt_skel_t *lt_dc(const char *cond, const char *divide, lt_skel_t *base,
                        const char *combine) {
  const char *kernels[] = {cond, divide, combine};
  if (cond == NULL || divide == NULL || combine == NULL || base == NULL) {
    lt_skel_free(base);
    return lt__fail_null("lt_dc",
                         cond == NULL     ? "cond"
                         : divide == NULL ? "divide"
                         : base == NULL   ? "base"
                                          : "combine",
                         1),
           NULL;
  }
  return with_child("lt_dc", node_with("lt_dc", LT_SKEL_DC, kernels, 1), base, "base");
}

LT_API lt_skel_t *lt_while(const char *cond, lt_skel_t *body) {
  if (cond == NULL || body == NULL) {
    lt_skel_free(body);
    return lt__fail_null("lt_while", cond == NULL ? "cond" : "body", 1), NULL;
  }
  return with_child("lt_while", node_with("lt_while", LT_SKEL_WHILE, &cond, 1), body, "body");
}

LT_API lt_skel_t *lt_if(const char *cond, lt_skel_t *then_branch, lt_skel_t *else_branch) {
  lt_skel_t *kids[] = {then_branch, else_branch};
  const char *names[] = {"then_branch", "else_branch"};
  if (cond == NULL) {
    lt_skel_free(then_branch);
    lt_skel_free(else_branch);
    return lt__fail_null("lt_if", "cond", 1), NULL;
  }
  if (then_branch == NULL || else_branch == NULL) {
    lt_skel_free(then_branch);
    lt_skel_free(else_branch);
    return lt__fail_null("lt_if", then_branch == NULL ? "then_branch" : "else_branch", 1), NULL;
  }
  return with_children("lt_if", node_with("lt_if", LT_SKEL_IF, &cond, 2), kids, names, 2);
}

/* role_slot finds the kernel argument of kind `d` whose DOT role is `role` ("kernel" for a
 * seq's), NULL when none is. */
static const lt_skel_arg_t *role_arg(const lt_skel_kind_desc_t *d, const char *role) {
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    if (a->kind == LT_ARG_KERNEL && strcmp(a->role != NULL ? a->role : "kernel", role) == 0)
      return a;
  }
  return NULL;
}

LT_API lt_skel_t *lt_skel_param(lt_skel_t *s, const char *role, const void *param, size_t len) {
  if (s == NULL || role == NULL) {
    lt_skel_free(s);
    return lt__fail_null("lt_skel_param", s == NULL ? "s" : "role", 1), NULL;
  }
  const lt_skel_kind_desc_t *d = lt__skel_kind(s->kind);
  const lt_skel_arg_t *a = role_arg(d, role);
  int rc = LT_OK;
  if (a == NULL)
    rc = lt__fail_skel(LT_EINVAL, "lt_skel_param: a %s has no kernel of role '%.100s'", d->name,
                       role);
  else if (len > 0 && param == NULL)
    rc = lt__fail_skel(LT_EINVAL, "lt_skel_param: param is NULL with len %zu", len);
  else if (lt__skel_arg_instead(s, a))
    rc = lt__fail_skel(LT_EINVAL,
                       "lt_skel_param: the %s of this %s is a skeleton, not a kernel: it takes "
                       "no parameter",
                       role, d->name);
  else if (lt__skel_param_set(lt__skel_slot(s, a->slot), param, len) != LT_OK)
    rc = lt__fail_skel(LT_ENOMEM, "lt_skel_param: out of memory");
  if (rc != LT_OK) {
    lt_skel_free(s);
    return NULL;
  }
  return s;
}

static int str_eq(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int kernel_eq(const lt_skel_kernel_t *a, const lt_skel_kernel_t *b) {
  return str_eq(a->name, b->name) && a->param_len == b->param_len &&
         (a->param_len == 0 || memcmp(a->param, b->param, a->param_len) == 0);
}

LT_API int lt_skel_equal(const lt_skel_t *a, const lt_skel_t *b) {
  if (a == NULL || b == NULL) return a == b;
  if (a->kind != b->kind || a->nchildren != b->nchildren) return 0;
  for (int k = 0; k < LT_SKEL_SLOTS; k++)
    if (!kernel_eq(&a->k[k], &b->k[k])) return 0;
  for (size_t i = 0; i < a->nchildren; i++)
    if (!lt_skel_equal(a->children[i], b->children[i])) return 0;
  return 1;
}

LT_API void lt_skel_free(lt_skel_t *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->nchildren; i++)
    lt_skel_free(s->children[i]);
  free(s->children);
  for (int k = 0; k < LT_SKEL_SLOTS; k++) {
    free(s->k[k].name);
    free(s->k[k].param);
  }
  free(s);
}

/* slots_valid tells whether the kernel slots of `s` hold what its kind `d` says: a valid
 * name in each kernel argument's slot (or nothing where a skeleton stands instead), and
 * nothing, not even a parameter, in the slots the kind does not use. */
static int slots_valid(const lt_skel_kind_desc_t *d, const lt_skel_t *s) {
  int used[LT_SKEL_SLOTS] = {0};
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    if (a->kind != LT_ARG_KERNEL) continue;
    used[a->slot] = 1;
    const lt_skel_kernel_t *k = lt__skel_slot_get(s, a->slot);
    if (lt__skel_arg_instead(s, a) ? k->param_len != 0 : !lt__kernel_name_valid(k->name)) return 0;
  }
  for (int k = 0; k < LT_SKEL_SLOTS; k++)
    if (!used[k] && (s->k[k].name != NULL || s->k[k].param_len != 0)) return 0;
  return 1;
}

/* node_valid is lt__skel_valid of a node standing in place of a kernel of kind `instead`
 * (0: in place of a skeleton, where no kind that only stands for a kernel may be). */
static int node_valid(const lt_skel_t *s, lt_skel_kind_t instead) {
  const lt_skel_kind_desc_t *d = s != NULL ? lt__skel_kind(s->kind) : NULL;
  if (d == NULL || (instead != 0 ? s->kind != instead : d->only_instead)) return 0;
  if (!slots_valid(d, s)) return 0;
  if (lt__skel_kind_variadic(d) ? s->nchildren == 0 : s->nchildren != lt__skel_nchildren(d, s))
    return 0;
  size_t child = 0;
  for (uint32_t i = 0; i < d->nargs; i++) {
    const lt_skel_arg_t *a = &d->args[i];
    int ok = 1;
    if (a->kind == LT_ARG_KERNEL && lt__skel_arg_instead(s, a))
      ok = node_valid(s->children[child++], a->instead);
    else if (a->kind == LT_ARG_SKEL)
      ok = node_valid(s->children[child++], 0);
    else if (a->kind == LT_ARG_SKELS)
      for (; child < s->nchildren && ok; child++)
        ok = node_valid(s->children[child], 0);
    if (!ok) return 0;
  }
  return 1;
}

LT_API int lt_skel_reduces(const lt_skel_t *s) {
  return lt__skel_valid(s) && lt__skel_reduces(s);
}

int lt__skel_reduces(const lt_skel_t *s) {
  return s != NULL && s->kind == LT_SKEL_PIPE && s->nchildren >= 2 && s->children != NULL &&
         s->children[s->nchildren - 1] != NULL &&
         s->children[s->nchildren - 1]->kind == LT_SKEL_REDUCE;
}

/* reducing_valid is lt__skel_valid of a program that reduces its stream: its stages before
 * the reduce valid skeletons, the last a valid reduce. */
static int reducing_valid(const lt_skel_t *s) {
  for (size_t i = 0; i + 1 < s->nchildren; i++)
    if (!node_valid(s->children[i], 0)) return 0;
  return node_valid(s->children[s->nchildren - 1], LT_SKEL_REDUCE);
}

int lt__skel_valid(const lt_skel_t *s) {
  return lt__skel_reduces(s) ? reducing_valid(s) : node_valid(s, 0);
}
