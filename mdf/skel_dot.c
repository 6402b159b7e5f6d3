/* skel_dot.c: lt_skel_dot, the public door to a program's compiled template as Graphviz DOT
 * (`lithium graph`). It only compiles and prints, with template.c and dot.c; it keeps no
 * state. Any thread. */
#include <stddef.h>

#include <lithium/error.h>
#include <lithium/skel.h>
#include "template.h"

LT_API char *lt_skel_dot(const lt_skel_t *s, int normal_form) {
  if (s == NULL) return NULL;
  lt_template_t *t = NULL;
  if (lt__template_compile(&t, s, normal_form != 0) != LT_OK) return NULL;
  char *dot = lt__template_dot(t);
  lt__template_free(t);
  return dot;
}
