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

/* lt_skel_free frees a tree; accepts NULL. */
LT_API void lt_skel_free(lt_skel_t *s);

#ifdef __cplusplus
}
#endif
#endif
