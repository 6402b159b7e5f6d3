/* server/main.c: not written yet. */
