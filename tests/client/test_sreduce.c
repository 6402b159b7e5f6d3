/* test_sreduce.c: the reduce of a task stream (client/sreduce.c) driven by hand: results
 * arriving in random orders, combines run at random times, always giving the in-order
 * combination; only neighbours are combined; a failure is the earliest one; nothing before
 * the stream is closed; a reducer with no part has no result. The combine here is string
 * concatenation, which is associative and not commutative, so order mistakes show. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "buf.h"
#include "sreduce.h"

static uint32_t rng = 7;
static uint32_t rnd(uint32_t n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) % n;
}

static lt_buf_t *text_buf(const char *s) {
  lt_value_t *v = lt__value_copy(s, strlen(s));
  lt_buf_t *b = lt__buf_ok(v);
  lt__value_unref(v);
  return b;
}

/* last_part returns the last part a concatenation of `len` bytes at `p` lists. */
static int last_part(const char *p, size_t len) {
  size_t i = len - 1; /* the final ',' */
  while (i > 0 && p[i - 1] != ',')
    i--;
  return atoi(p + i);
}

/* run_combine concatenates a combine task's two inputs, checking that they are
 * neighbours: the left one ends with part k, the right one starts with part k + 1. */
static lt_buf_t *run_combine(const lt_task_t *t) {
  size_t a = t->input->len, b = t->input2->len;
  char *s = malloc(a + b + 1);
  memcpy(s, t->input->data, a);
  memcpy(s + a, t->input2->data, b);
  s[a + b] = '\0';
  cr_assert_eq(last_part(s, a) + 1, atoi(s + a), "not neighbours: %s", s);
  lt_buf_t *r = text_buf(s);
  free(s);
  return r;
}

/* part_text is part i's result: "i," (so any concatenation lists the parts it holds). */
static lt_buf_t *part(int i) {
  char s[16];
  snprintf(s, sizeof s, "%d,", i);
  return text_buf(s);
}

Test(sreduce, random_orders_give_the_in_order_result) {
  for (int round = 0; round < 200; round++) {
    int n = 1 + (int)rnd(40);
    lt_sreduce_t *r = NULL;
    cr_assert_eq(lt__sreduce_new(&r), LT_OK);
    for (int i = 0; i < n; i++)
      cr_assert_eq(lt__sreduce_add(r), LT_OK);
    int *order = malloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++)
      order[i] = i;
    for (int i = n - 1; i > 0; i--) { /* shuffle */
      int j = (int)rnd((uint32_t)i + 1), tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
    lt_task_t *pending[64];
    int npending = 0, next = 0, combines = 0;
    while (next < n || npending > 0) {
      lt_task_t *head = NULL, *tail = NULL;
      cr_assert_null(lt__sreduce_take(r, 1), "a result before every part arrived");
      if (next < n && (npending == 0 || rnd(2))) {
        int i = order[next++];
        cr_assert_eq(lt__sreduce_arrive(r, (uint64_t)i, part(i), &head, &tail), LT_OK);
      } else {
        int k = (int)rnd((uint32_t)npending);
        lt_task_t *t = pending[k];
        pending[k] = pending[--npending];
        lt_buf_t *b = run_combine(t);
        cr_assert_eq(lt__sreduce_arrive(r, t->seg, b, &head, &tail), LT_OK);
        lt__task_free(t);
        combines++;
      }
      for (lt_task_t *t = head, *nx; t != NULL; t = nx) {
        nx = t->next;
        t->next = NULL;
        cr_assert(t->combine);
        cr_assert_lt(npending, 64);
        pending[npending++] = t;
      }
    }
    cr_assert_null(lt__sreduce_take(r, 0), "a result before the stream was closed");
    lt_buf_t *b = lt__sreduce_take(r, 1);
    cr_assert_not_null(b);
    char want[512] = "";
    for (int i = 0; i < n; i++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%d,", i);
    cr_assert_eq(lt_buf_len(b), strlen(want));
    cr_assert_eq(memcmp(lt_buf_data(b), want, strlen(want)), 0, "round %d", round);
    cr_assert_eq(combines, n - 1, "a reduce of n parts runs n - 1 combines");
    cr_assert_null(lt__sreduce_take(r, 1), "the result is taken once");
    lt_buf_free(b);
    free(order);
    lt__sreduce_free(r);
  }
}

Test(sreduce, the_earliest_failure_is_the_result) {
  lt_sreduce_t *r = NULL;
  cr_assert_eq(lt__sreduce_new(&r), LT_OK);
  for (int i = 0; i < 5; i++)
    cr_assert_eq(lt__sreduce_add(r), LT_OK);
  lt_task_t *head = NULL, *tail = NULL;
  cr_assert_eq(lt__sreduce_arrive(r, 3, lt__buf_fail(LT_EKERNEL, "three"), &head, &tail), LT_OK);
  cr_assert_eq(lt__sreduce_arrive(r, 4, part(4), &head, &tail), LT_OK);
  cr_assert_null(head, "a failure joins its neighbour without a combine");
  cr_assert_eq(lt__sreduce_arrive(r, 1, lt__buf_fail(LT_EKERNEL, "one"), &head, &tail), LT_OK);
  cr_assert_eq(lt__sreduce_arrive(r, 0, part(0), &head, &tail), LT_OK);
  cr_assert_eq(lt__sreduce_arrive(r, 2, part(2), &head, &tail), LT_OK);
  cr_assert_null(head);
  lt_buf_t *b = lt__sreduce_take(r, 1);
  cr_assert_not_null(b);
  cr_assert_eq(lt_buf_error(b), LT_EKERNEL);
  cr_assert_str_eq(lt_buf_errmsg(b), "one");
  lt_buf_free(b);
  /* A part the reducer does not have is refused, and its result freed. */
  cr_assert_eq(lt__sreduce_arrive(r, 7, part(7), &head, &tail), LT_EPROTO);
  lt__sreduce_free(r);
  /* No part: no result. */
  cr_assert_eq(lt__sreduce_new(&r), LT_OK);
  cr_assert_null(lt__sreduce_take(r, 1));
  lt__sreduce_free(r);
}
