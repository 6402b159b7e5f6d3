/* sreduce.h: the reduce of a stream, for a program whose last stage is reduce(m:combine)
 * (pipe(S, reduce(m:combine))): the results of its tasks, in submission order, are combined
 * two neighbours at a time as they are ready, and the stream has one result. A part is a
 * task's result; a segment is a run of neighbouring parts combined (or being combined) into
 * one, named by its first part. The reducer only decides: it hands out the combines to run
 * (tasks of two inputs, run by the backend like any task, see lt__instance_feed_pair) and
 * takes their results back. A task that failed makes the stream's result its failure, the
 * earliest in submission order. Under the evaluator's lock (eval_results.c). */
#ifndef LT_SREDUCE_H
#define LT_SREDUCE_H

#include <stdint.h>
#include "eval.h"

typedef struct lt_sreduce lt_sreduce_t;

/* lt__sreduce_new makes an empty reducer. LT_OK, LT_ENOMEM. */
int lt__sreduce_new(lt_sreduce_t **out);

/* lt__sreduce_add makes room for the next part (task seq = the number of parts so far),
 * at submission. LT_OK, LT_ENOMEM. */
int lt__sreduce_add(lt_sreduce_t *r);

/* lt__sreduce_arrive takes result `b` of segment `seg` (a task's result, seg its submission
 * index; or a combine's, seg its left segment). Combines that can run now are appended to
 * the list at *head / *tail (lt_task_t with `input`, `input2` and `seg`; the caller queues
 * them). LT_OK, LT_ENOMEM (the reducer then fails the stream with it). */
int lt__sreduce_arrive(lt_sreduce_t *r, uint64_t seg, lt_buf_t *b, lt_task_t **head,
                       lt_task_t **tail);

/* lt__sreduce_take returns the stream's one result (taken) once every part arrived and was
 * combined into one and `closed` says no part can come; NULL before, or when there were
 * no parts. */
lt_buf_t *lt__sreduce_take(lt_sreduce_t *r, int closed);

/* lt__sreduce_parts returns how many parts were added. */
uint64_t lt__sreduce_parts(const lt_sreduce_t *r);

/* lt__sreduce_free frees the reducer and the results it holds; accepts NULL. */
void lt__sreduce_free(lt_sreduce_t *r);

#endif
