/* run.h: the `run` command of the `lithium` tool: every input file is one task of the
 * program, evaluated on servers (given, or spawned locally) or by the sequential
 * evaluator. Main thread only. */
#ifndef LT_RUN_H
#define LT_RUN_H

#include <lithium.h>
#include "cli.h"

/* lt__run runs `program` (taken, also on failure) over the files of `cli` and returns the
 * tool's exit status: 0 when every task succeeded, 1 when one failed or the run could not
 * go on, 2 for bad input files or option values. `window` bounds the tasks submitted and
 * not yet written (at least 1). */
int lt__run(const lt_cli_t *cli, lt_skel_t *program, size_t window);

#endif
