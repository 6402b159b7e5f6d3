/* up.h: `lithium up` and `lithium down` (up.c). Main thread only. */
#ifndef LT_TOOL_UP_H
#define LT_TOOL_UP_H

/* lt__up_main runs `lithium up` (down = 0) or `lithium down` (down = 1) with argv[0] the
 * command; returns the exit status. */
int lt__up_main(int argc, char **argv, int down);

#endif
