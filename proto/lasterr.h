/* lasterr.h: the thread's last failure text behind lt_last_error (lithium.h). Every public
 * call that fails sets it, naming the argument and why, so that no older text survives a
 * later failure. A skeleton builder's failure is remembered as such: a builder given the
 * NULL it made quotes its reason (lt__fail_null), so that lt_eval_new(&ev, lt_seq("a b"))
 * says what was wrong with "a b". Any thread; the text is the calling thread's. */
#ifndef LT_LASTERR_H
#define LT_LASTERR_H

/* LT_LASTERR_MAX bounds the text, terminator included. */
#define LT_LASTERR_MAX 2048

/* lt__fail sets the thread's text to the printf-style message and returns `err`. The
 * arguments may point into the current text. */
int lt__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* lt__fail_skel is lt__fail for a skeleton builder's own failure. */
int lt__fail_skel(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* lt__fail_null sets "FN: ARG is NULL" for a NULL argument of call `fn`, followed by the
 * reason of the builder failure that made it when the thread's last failure was a
 * builder's; `skel` marks this failure as a builder's too. Returns LT_EINVAL. */
int lt__fail_null(const char *fn, const char *arg, int skel);

#endif
