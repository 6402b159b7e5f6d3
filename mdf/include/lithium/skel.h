/* lithium/skel.h: skeleton programs. Builders take ownership of their children; a NULL
 * child makes the result NULL (the other children are freed), so a whole program stays one
 * expression. Trees are immutable once built. Any thread (one tree per thread at a time). */
#ifndef LITHIUM_SKEL_H
#define LITHIUM_SKEL_H

#include <stddef.h>
#include <lithium/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_skel lt_skel_t;

/* lt_seq returns a sequential stage running kernel "module:function"; NULL if the name is
 * malformed or memory runs out. Caller owns the result. */
LT_API lt_skel_t *lt_seq(const char *kernel);

/* lt_seq_with is lt_seq with a constant parameter (copied) the kernel reads with
 * lt_call_param. */
LT_API lt_skel_t *lt_seq_with(const char *kernel, const void *param, size_t len);

/* lt_farm replicates `worker` over the servers. Takes ownership of `worker`. */
LT_API lt_skel_t *lt_farm(lt_skel_t *worker);

/* lt_pipeline chains its stages (NULL-terminated list, at least one). Takes ownership of
 * every stage, also on failure. */
LT_API lt_skel_t *lt_pipeline(lt_skel_t *first, ...);

/* lt_map is data parallelism: kernel `split` makes k parts of a task (lt_call_output k
 * times, k >= 0), `body` runs on each part in parallel, kernel `merge` gets the k results as
 * its k inputs (in part order) and makes the map's one output. Takes ownership of `body`. */
LT_API lt_skel_t *lt_map(const char *split, lt_skel_t *body, const char *merge);

/* lt_dc is divide and conquer: condition kernel `cond` answers (lt_call_answer) whether a
 * task is a base case; base cases run `base`; others are cut by kernel `divide` into k parts
 * solved by the same dc recursively, and kernel `combine` gets the k solutions (in part
 * order) and makes the one result. Takes ownership of `base`. */
LT_API lt_skel_t *lt_dc(const char *cond, const char *divide, lt_skel_t *base, const char *combine);

/* lt_reduce is a tree reduction by the associative kernel `combine`, which gets two
 * neighbouring values as its two inputs (left, then right) and makes one. It stands as the
 * merge of a map (lt_map_reduce: the parts are combined pairwise as they are ready, each
 * combine where its inputs are, keeping part order), or as the last stage of a program's
 * pipeline, reducing the results of all its tasks (lt_skel_reduces). */
LT_API lt_skel_t *lt_reduce(const char *combine);

/* lt_map_reduce is lt_map whose merge is `reduce` (from lt_reduce): map-reduce. One part is
 * the result as it is; a split that makes no parts fails the task. Takes ownership of `body`
 * and `reduce`. */
LT_API lt_skel_t *lt_map_reduce(const char *split, lt_skel_t *body, lt_skel_t *reduce);

/* lt_skel_reduces tells whether `s` reduces its stream: a pipeline whose last stage is
 * lt_reduce(combine), e.g. lt_pipeline(lt_seq("wc:count"), lt_reduce("wc:merge"), NULL).
 * The results of all its tasks, in submission order, are then combined two neighbours at a
 * time as they are ready, and the evaluator has one result: lt_eval_next gives it after
 * lt_eval_close and when every task is done (none for no task), with lt_buf_task the index
 * of the last task; a failed task makes it that task's failure (the earliest). Such a
 * program takes no futures (lt_eval_submit: LT_EINVAL). */
LT_API int lt_skel_reduces(const lt_skel_t *s);

/* lt_while runs `body` on a task again and again while condition kernel `cond` answers
 * (lt_call_answer) true of it; the task goes on unchanged when it first answers false. The
 * graph grows at run time, one round at a time. Takes ownership of `body`. */
LT_API lt_skel_t *lt_while(const char *cond, lt_skel_t *body);

/* lt_if runs `then_branch` on a task when condition kernel `cond` answers true of it, else
 * `else_branch`. Takes ownership of both. */
LT_API lt_skel_t *lt_if(const char *cond, lt_skel_t *then_branch, lt_skel_t *else_branch);

/* lt_skel_param gives the kernel of `s` named by `role` a constant parameter (copied; `len`
 * 0 removes it) that the kernel reads with lt_call_param: role "kernel" for lt_seq, "split"
 * or "merge" for lt_map, "split" for lt_map_reduce, "combine" for lt_reduce, "cond",
 * "divide" or "combine" for lt_dc, "cond" for lt_while and lt_if. Returns `s`, or NULL (and
 * frees `s`) for a role the skeleton has not or out of memory, so calls nest like the
 * builders: lt_skel_param(lt_map("m:split", body, "m:merge"), "split", "8", 1). */
LT_API lt_skel_t *lt_skel_param(lt_skel_t *s, const char *role, const void *param, size_t len);

/* lt_skel_parse parses an expression (docs/guide.md, "Expressions") into *out (caller frees).
 * On a syntax error returns LT_EINVAL and writes "offset N: expected X, found Y" into err
 * (when errlen > 0). */
LT_API int lt_skel_parse(const char *expr, lt_skel_t **out, char *err, size_t errlen);

/* lt_skel_format returns the canonical expression of `s` (caller frees with free()); parsing
 * it gives the same tree. NULL on out of memory or a NULL tree. */
LT_API char *lt_skel_format(const lt_skel_t *s);

/* lt_skel_equal tells whether two trees are the same (kinds, kernels, parameters). */
LT_API int lt_skel_equal(const lt_skel_t *a, const lt_skel_t *b);

/* lt_skel_dot returns the MDF template `s` compiles to as a Graphviz digraph (`lithium
 * graph`): a cluster per block, a box per node labelled with its role and kernels (a map's
 * split and merge, a dc's cond, divide and combine). With `normal_form` non-zero, adjacent
 * seq stages are fused into one instruction first, as option normal_form does. The caller
 * frees the text with free(); NULL for a NULL tree or when memory runs out. */
LT_API char *lt_skel_dot(const lt_skel_t *s, int normal_form);

/* lt_skel_free frees a tree; accepts NULL. */
LT_API void lt_skel_free(lt_skel_t *s);

#ifdef __cplusplus
}
#endif
#endif
