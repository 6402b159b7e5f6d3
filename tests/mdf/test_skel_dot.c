/* test_skel_dot.c: lt_skel_dot, the public Graphviz view of a program's template: the roles
 * of a map's and a dc's kernels, a node per seq stage unless normal_form fuses them, NULL
 * for no program. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/skel.h>

static char *dot_of(const char *expr, int normal_form) {
  lt_skel_t *s = NULL;
  cr_assert_eq(lt_skel_parse(expr, &s, NULL, 0), 0, "%s", expr);
  char *dot = lt_skel_dot(s, normal_form);
  lt_skel_free(s);
  cr_assert_not_null(dot);
  return dot;
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what))
    n++;
  return n;
}

Test(skel_dot, map_shows_split_and_merge) {
  char *dot = dot_of("map(m:split, m:body, m:merge)", 0);
  cr_expect_eq(strncmp(dot, "digraph", 7), 0);
  cr_expect_neq(strstr(dot, "split m:split"), NULL, "%s", dot);
  cr_expect_neq(strstr(dot, "merge m:merge"), NULL, "%s", dot);
  cr_expect_neq(strstr(dot, "m:body"), NULL, "%s", dot);
  cr_expect_neq(strstr(dot, "each part"), NULL, "%s", dot);
  free(dot);
}

Test(skel_dot, dc_shows_cond_divide_combine) {
  char *dot = dot_of("dc(m:cond, m:divide, m:base, m:combine)", 0);
  cr_expect_neq(strstr(dot, "cond m:cond"), NULL, "%s", dot);
  cr_expect_neq(strstr(dot, "divide m:divide"), NULL, "%s", dot);
  cr_expect_neq(strstr(dot, "combine m:combine"), NULL, "%s", dot);
  free(dot);
}

Test(skel_dot, normal_form_fuses_seq_stages) {
  char *plain = dot_of("pipe(m:a, m:b, m:c)", 0);
  char *fused = dot_of("pipe(m:a, m:b, m:c)", 1);
  cr_expect_eq(count(plain, "[label=\"seq"), 3, "%s", plain);
  cr_expect_eq(count(fused, "[label=\""), 1, "%s", fused);
  free(plain);
  free(fused);
}

Test(skel_dot, null_program) {
  cr_expect_null(lt_skel_dot(NULL, 0));
}
