/* examples/newton/newton.c: the `newton` kernel module, square roots by Newton's iteration,
 * an example of `while` and `if`:
 *
 *   pipe(newton:parse, if(newton:negative, newton:refuse,
 *                         pipe(while(newton:far "1e-12", newton:step), newton:show)))
 *
 * A task is a number as text. parse makes the state {a, x} (x the guess of sqrt(a)); a
 * negative number is refused; others are stepped, x = (x + a/x) / 2, while x*x is farther
 * from a than the relative tolerance; show prints the root to 12 digits. Kernels run on a server
 * worker thread (or the client's, in local mode) and touch nothing but their own call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/kernel.h>

typedef struct state {
  double a; /* the number */
  double x; /* the guess of its square root */
} state_t;

/* get_state reads the one input as a state; NULL (after failing the call) when it is not. */
static const state_t *get_state(lt_call_t *call, const char *k) {
  size_t len;
  const state_t *s = lt_call_input(call, 0, &len);
  if (lt_call_ninputs(call) != 1 || len != sizeof *s) {
    lt_call_fail(call, "newton:%s: expects one state of %zu bytes", k, sizeof *s);
    return NULL;
  }
  return s;
}

static int put_state(lt_call_t *call, const state_t *s) {
  void *out = lt_call_output(call, sizeof *s);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  memcpy(out, s, sizeof *s);
  return 0;
}

/* parse: a number as text -> the state {a, first guess}. */
LT_KERNEL(parse, call) {
  size_t len;
  const char *in = lt_call_input(call, 0, &len);
  char buf[64];
  if (len == 0 || len >= sizeof buf) return lt_call_fail(call, "newton:parse: not a number");
  memcpy(buf, in, len);
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\r'))
    len--;
  buf[len] = '\0';
  char *end;
  state_t s = {.a = strtod(buf, &end)};
  if (end == buf || *end != '\0' || !isfinite(s.a))
    return lt_call_fail(call, "newton:parse: not a number: '%s'", buf);
  s.x = s.a > 1 ? s.a : s.a == 0 ? 0 : 1; /* sqrt(0) is 0 already */
  return put_state(call, &s);
}

/* negative: answers a < 0. */
LT_KERNEL(negative, call) {
  const state_t *s = get_state(call, "negative");
  return s == NULL ? 1 : lt_call_answer(call, s->a < 0);
}

/* far: answers |x*x - a| > tolerance * a (param: the relative tolerance, default 1e-12). */
LT_KERNEL(far, call) {
  const state_t *s = get_state(call, "far");
  if (s == NULL) return 1;
  size_t len;
  const char *p = lt_call_param(call, &len);
  char buf[32] = "1e-12";
  if (p != NULL && len > 0 && len < sizeof buf) {
    memcpy(buf, p, len);
    buf[len] = '\0';
  }
  double tol = strtod(buf, NULL);
  return lt_call_answer(call, fabs(s->x * s->x - s->a) > tol * s->a);
}

/* step: one Newton step, x = (x + a/x) / 2. */
LT_KERNEL(step, call) {
  const state_t *s = get_state(call, "step");
  if (s == NULL) return 1;
  state_t next = {s->a, s->x == 0 ? 0 : (s->x + s->a / s->x) / 2};
  return put_state(call, &next);
}

/* emit_text makes the output the text `t`. */
static int emit_text(lt_call_t *call, const char *t) {
  size_t n = strlen(t);
  void *out = lt_call_output(call, n);
  if (out == NULL) return lt_call_fail(call, "out of memory");
  memcpy(out, t, n);
  return 0;
}

/* show: a state -> "sqrt(a) = x\n". */
LT_KERNEL(show, call) {
  const state_t *s = get_state(call, "show");
  if (s == NULL) return 1;
  char t[96];
  snprintf(t, sizeof t, "sqrt(%.12g) = %.12g\n", s->a, s->x);
  return emit_text(call, t);
}

/* refuse: a state of a negative number -> "sqrt(a): not a real number\n". */
LT_KERNEL(refuse, call) {
  const state_t *s = get_state(call, "refuse");
  if (s == NULL) return 1;
  char t[96];
  snprintf(t, sizeof t, "sqrt(%.12g): not a real number\n", s->a);
  return emit_text(call, t);
}
