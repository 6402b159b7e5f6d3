/* top.h: `lithium top` (top.c: the command and the socket; top_screen.c: the screen). Main
 * thread only. */
#ifndef LT_TOOL_TOP_H
#define LT_TOOL_TOP_H

#include <stddef.h>
#include <stdio.h>

#include "jsonr.h"

/* lt__top_main runs `lithium top` with argv[0] = "top"; returns the exit status. */
int lt__top_main(int argc, char **argv);

/* What the screen remembers of the frame before, for rates (top_screen.c). */
typedef struct lt_top_prev {
  double elapsed_ms; /* of that snapshot; 0: no frame yet */
  double completed;  /* tasks_completed */
  char **endpoints;  /* each server's endpoint (owned) and its completed count */
  double *done;
  size_t n;
} lt_top_prev_t;

/* lt__top_screen writes one frame of snapshot `snap` (the stats of the evaluation at
 * `path`) to f, with the rates since `prev`, and makes `prev` this snapshot. */
void lt__top_screen(FILE *f, const char *path, const lt_jv_t *snap, lt_top_prev_t *prev);

/* lt__top_prev_free frees what prev holds. */
void lt__top_prev_free(lt_top_prev_t *prev);

#endif
