/* skel_dot.c: lt_skel_dot, the public door to a program's compiled template as Graphviz DOT
 * (`lithium graph`). It only compiles and prints, with template.c and dot.c; it keeps no
 * state. Any thread. */
#include <stddef.h>

#include <lithium/error.h>
#include <lithium/skel.h>
#include "lasterr.h"
#include "template.h"

LT_API char *lt_skel_dot(const lt_skel_t *s, int normal_form) {
  if (s == NULL) return lt__fail_null("lt_skel_dot", "s", 0), NULL;
  lt_template_t *t = NULL;
  int rc = lt__template_compile(&t, s, normal_form != 0);
  if (rc != LT_OK) {
    lt__fail(rc, "lt_skel_dot: s cannot be compiled: %s", lt_strerror(rc));
    return NULL;
  }
  char *dot = lt__template_dot(t);
  if (dot == NULL) lt__fail(LT_ENOMEM, "lt_skel_dot: out of memory");
  lt__template_free(t);
  return dot;
}
