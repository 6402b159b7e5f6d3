/* test_kind.c: the tables of skeleton kinds (kind.h) and instruction ops (exec.h) are
 * consistent: every kind and op has one row, keywords find their row, arguments have the
 * shape the parser and printer rely on, and the op rows keep the rules the server checked
 * op by op before the table. */
#include <criterion/criterion.h>
#include <string.h>

#include "exec.h"
#include "kind.h"

Test(kind, every_kind_has_one_row_found_by_its_keywords) {
  int bare = 0;
  for (int k = LT_SKEL_SEQ; k <= LT_SKEL_IF; k++) {
    const lt_skel_kind_desc_t *d = lt__skel_kind((lt_skel_kind_t)k);
    cr_assert_not_null(d, "kind %d", k);
    cr_assert_eq(d->kind, (lt_skel_kind_t)k);
    cr_assert_not_null(d->compile, "%s", d->name);
    cr_assert_eq(lt__skel_kind_by_name(d->name, strlen(d->name)), d, "%s", d->name);
    if (d->alias != NULL)
      cr_assert_eq(lt__skel_kind_by_name(d->alias, strlen(d->alias)), d, "%s", d->alias);
    bare += d->bare;
  }
  cr_assert_eq(bare, 1);
  cr_assert_null(lt__skel_kind((lt_skel_kind_t)0));
  cr_assert_null(lt__skel_kind_by_name("farmer", 6));
  cr_assert_null(lt__skel_kind_by_name("far", 3));
}

/* has_block tells whether kind `d` runs a child skeleton as a block of its own. */
static int has_block(const lt_skel_kind_desc_t *d) {
  for (uint32_t i = 0; i < d->nargs; i++)
    if (d->args[i].kind == LT_ARG_SKEL && d->kind != LT_SKEL_FARM) return 1;
  return 0;
}

Test(kind, arguments_have_the_shape_parse_and_format_rely_on) {
  for (int k = LT_SKEL_SEQ; k <= LT_SKEL_IF; k++) {
    const lt_skel_kind_desc_t *d = lt__skel_kind((lt_skel_kind_t)k);
    cr_assert(d->nargs >= 1 && d->nargs <= LT_SKEL_MAX_ARGS, "%s", d->name);
    if (d->bare) cr_assert_eq(d->args[0].kind, LT_ARG_KERNEL, "%s", d->name);
    for (uint32_t i = 0; i < d->nargs; i++) {
      lt_skel_arg_kind_t a = d->args[i].kind;
      /* A list of children and an optional parameter can only end the arguments. */
      if (a == LT_ARG_SKELS || a == LT_ARG_PARAM) cr_assert_eq(i + 1, d->nargs, "%s", d->name);
      if (a == LT_ARG_PARAM) cr_assert(i > 0, "%s", d->name);
      /* A kind drawn with a child block names the role of each of its kernels and blocks. */
      if ((a == LT_ARG_KERNEL || a == LT_ARG_SKEL) && has_block(d))
        cr_assert_not_null(d->args[i].role, "%s", d->name);
      /* What stands instead of a kernel is a kind that stands nowhere else. */
      if (d->args[i].instead != 0) {
        cr_assert_eq(a, LT_ARG_KERNEL, "%s", d->name);
        cr_assert(lt__skel_kind(d->args[i].instead)->only_instead, "%s", d->name);
      }
    }
    cr_assert_eq(lt__skel_kind_variadic(d), k == LT_SKEL_PIPE);
  }
  char list[96];
  lt__skel_kind_list(list, sizeof list);
  cr_assert_str_eq(list, "seq, farm, pipe, map, dc, while or if");
}

Test(op, rows_keep_the_rules_of_each_op) {
  for (uint32_t op = 0; op <= LT_OP_LAST; op++) {
    const lt_op_desc_t *d = lt__op(op);
    cr_assert_not_null(d, "op %u", op);
    cr_assert_eq(d->op, op);
    cr_assert_not_null(d->run);
  }
  cr_assert_null(lt__op(LT_OP_LAST + 1));
  /* The server's check before the table: a split runs one stage, a dc step two (condition
   * and divide), a seq any number from one. */
  for (uint32_t n = 0; n < 4; n++) {
    cr_assert_eq(lt__op_valid(LT_OP_SEQ, n), n >= 1, "seq %u", n);
    cr_assert_eq(lt__op_valid(LT_OP_SPLIT, n), n == 1, "split %u", n);
    cr_assert_eq(lt__op_valid(LT_OP_DCSTEP, n), n == 2, "dcstep %u", n);
    cr_assert_eq(lt__op_valid(LT_OP_TEST, n), n == 1, "test %u", n);
    cr_assert(!lt__op_valid(LT_OP_LAST + 1, n));
  }
  cr_assert_eq(lt__op(LT_OP_SEQ)->outputs, LT_OP_OUT_ONE);
  cr_assert(lt__op(LT_OP_DCSTEP)->answers && lt__op(LT_OP_DCSTEP)->keeps_inputs);
  cr_assert(!lt__op(LT_OP_SPLIT)->answers && !lt__op(LT_OP_SPLIT)->keeps_inputs);
  cr_assert(lt__op(LT_OP_SPLIT)->grows && !lt__op(LT_OP_SEQ)->grows);
  /* Only a dc step's false answer replaces its input; a test keeps it either way. */
  cr_assert(lt__op(LT_OP_DCSTEP)->divides && !lt__op(LT_OP_TEST)->divides);
  cr_assert(lt__op(LT_OP_TEST)->answers && lt__op(LT_OP_TEST)->keeps_inputs);
}
