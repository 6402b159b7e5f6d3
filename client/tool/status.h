/* status.h: `lithium status` (status.c). Main thread only. */
#ifndef LT_TOOL_STATUS_H
#define LT_TOOL_STATUS_H

/* lt__status_main runs `lithium status` with argv[0] = "status"; returns the exit status. */
int lt__status_main(int argc, char **argv);

#endif
