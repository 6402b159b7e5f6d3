/* queue.h: the intrusive FIFO: a singly linked list kept as a head and a tail pointer, the
 * link being a pointer field of the element itself, so queuing allocates nothing. Any
 * struct with a `next`-like field can be queued; an element is in one queue per link field
 * at a time. Macros, each evaluating its arguments more than once: pass plain lvalues. The
 * caller locks. */
#ifndef LT_QUEUE_H
#define LT_QUEUE_H

#include <stddef.h>

/* LT_QUEUE_PUSH appends `node` at the tail of the queue (head, tail), linked by `link`. */
#define LT_QUEUE_PUSH(head, tail, node, link)                                                      \
  do {                                                                                             \
    (node)->link = NULL;                                                                           \
    if ((tail) != NULL)                                                                            \
      (tail)->link = (node);                                                                       \
    else                                                                                           \
      (head) = (node);                                                                             \
    (tail) = (node);                                                                               \
  } while (0)

/* LT_QUEUE_PUSH_FRONT puts `node` at the head of the queue, to be taken next. */
#define LT_QUEUE_PUSH_FRONT(head, tail, node, link)                                                \
  do {                                                                                             \
    (node)->link = (head);                                                                         \
    (head) = (node);                                                                               \
    if ((tail) == NULL) (tail) = (node);                                                           \
  } while (0)

/* LT_QUEUE_POP takes the head into `out` (NULL when the queue is empty) and clears its link. */
#define LT_QUEUE_POP(head, tail, out, link)                                                        \
  do {                                                                                             \
    (out) = (head);                                                                                \
    if ((out) != NULL) {                                                                           \
      (head) = (out)->link;                                                                        \
      if ((head) == NULL) (tail) = NULL;                                                           \
      (out)->link = NULL;                                                                          \
    }                                                                                              \
  } while (0)

/* LT_QUEUE_TAKE_AFTER takes the node after `prev` (the head when prev is NULL) into `out`
 * (NULL when there is none) and clears its link. */
#define LT_QUEUE_TAKE_AFTER(head, tail, prev, out, link)                                           \
  do {                                                                                             \
    if ((prev) == NULL) {                                                                          \
      LT_QUEUE_POP(head, tail, out, link);                                                         \
    } else {                                                                                       \
      (out) = (prev)->link;                                                                        \
      if ((out) != NULL) {                                                                         \
        (prev)->link = (out)->link;                                                                \
        if ((tail) == (out)) (tail) = (prev);                                                      \
        (out)->link = NULL;                                                                        \
      }                                                                                            \
    }                                                                                              \
  } while (0)

#endif
