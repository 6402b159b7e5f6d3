/* server/session.c: not written yet. */
