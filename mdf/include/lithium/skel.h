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

/* lt_skel_parse parses an expression (README.md, "Expressions") into *out (caller frees).
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
