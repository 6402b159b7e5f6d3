/* tests/base/test_queue.c: the intrusive FIFO (proto/base/queue.h): order, push to the
 * front, popping an empty queue, the tail kept right as the queue empties and refills, and
 * two queues over two link fields of one element. */
#include <criterion/criterion.h>

#include <stddef.h>

#include "queue.h"

typedef struct item {
  int v;
  struct item *next, *other;
} item_t;

Test(queue, fifo_order) {
  item_t it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
  item_t *head = NULL, *tail = NULL, *out;
  for (int i = 0; i < 4; i++)
    LT_QUEUE_PUSH(head, tail, &it[i], next);
  cr_assert_eq(tail, &it[3]);
  for (int i = 0; i < 4; i++) {
    LT_QUEUE_POP(head, tail, out, next);
    cr_assert_eq(out, &it[i]);
    cr_assert_null(out->next);
  }
  cr_assert_null(head);
  cr_assert_null(tail);
  LT_QUEUE_POP(head, tail, out, next);
  cr_assert_null(out);
}

Test(queue, push_front) {
  item_t a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
  item_t *head = NULL, *tail = NULL, *out;
  LT_QUEUE_PUSH_FRONT(head, tail, &a, next); /* into an empty queue: head and tail */
  cr_assert_eq(head, &a);
  cr_assert_eq(tail, &a);
  LT_QUEUE_PUSH(head, tail, &b, next);
  LT_QUEUE_PUSH_FRONT(head, tail, &c, next);
  int want[] = {3, 1, 2};
  for (int i = 0; i < 3; i++) {
    LT_QUEUE_POP(head, tail, out, next);
    cr_assert_eq(out->v, want[i]);
  }
  cr_assert_null(tail);
}

Test(queue, refill_after_empty) {
  item_t a = {.v = 1}, b = {.v = 2};
  item_t *head = NULL, *tail = NULL, *out;
  LT_QUEUE_PUSH(head, tail, &a, next);
  LT_QUEUE_POP(head, tail, out, next);
  LT_QUEUE_PUSH(head, tail, &b, next);
  cr_assert_eq(head, &b);
  cr_assert_eq(tail, &b);
  LT_QUEUE_PUSH(head, tail, &a, next);
  cr_assert_eq(head->next, &a);
}

Test(queue, two_links) {
  item_t a = {.v = 1}, b = {.v = 2};
  item_t *h1 = NULL, *t1 = NULL, *h2 = NULL, *t2 = NULL, *out;
  LT_QUEUE_PUSH(h1, t1, &a, next);
  LT_QUEUE_PUSH(h1, t1, &b, next);
  LT_QUEUE_PUSH(h2, t2, &b, other);
  LT_QUEUE_PUSH(h2, t2, &a, other);
  LT_QUEUE_POP(h2, t2, out, other);
  cr_assert_eq(out, &b);
  LT_QUEUE_POP(h1, t1, out, next);
  cr_assert_eq(out, &a);
}
