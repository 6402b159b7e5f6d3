/* draw.c: what a seed runs (sim.h): the skeleton, drawn from shapes whose kernels are the
 * test modules' (tests/kernels/skelk.c) so that the sequential evaluator computes every
 * result; the options that change a path; the tasks and the waves they come in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "options.h"
#include "sim.h"

/* random_bytes makes an input of n bytes from a small alphabet ('z' is a poison for
 * fail_on, drawn only when the seed asks for poison). */
static lt_value_t *random_bytes(sim_world_t *w, size_t n, int poison) {
  lt_value_t *v = lt__value_new(n);
  unsigned char *b = v->data;
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)('a' + sim_below(&w->rng, poison ? 26 : 25));
  return v;
}

static lt_value_t *int_input(int64_t n) {
  unsigned char b[8];
  uint64_t x = (uint64_t)n;
  for (int i = 0; i < 8; i++, x >>= 8)
    b[i] = (unsigned char)(x & 0xff);
  return lt__value_copy(b, 8);
}

/* A dc over bytes: halves until at most `cut` bytes, each base reversed, parts concatenated
 * (a merge sort's shape: divide, base, combine). */
static lt_skel_t *dc_bytes(const char *cut) {
  lt_skel_t *d = lt_dc("skelk:small", "skelk:halves", lt_seq("skelk:rev"), "skelk:cat");
  return lt_skel_param(d, "cond", cut, strlen(cut));
}

enum {
  SH_FARM,
  SH_PIPE,
  SH_DC,
  SH_FIB,
  SH_MAP,
  SH_NESTED,
  SH_POISON,
  SH_DRAW1, /* the shapes of draw 1 are those above; draw 2 adds these: */
  SH_WHILE = SH_DRAW1,
  SH_IF,
  SH_REDUCE,
  SH_NSHAPES
};

static const char *const shape_names[SH_NSHAPES] = {
    "farm(seq(rev))",
    "pipeline(seq(rev), seq(xor k), seq(app !))",
    "farm(dc(small, halves, seq(rev), cat))",
    "dc(fib_cut, fib_div, seq(fib_seq), add)",
    "map(chunks, seq(rev), cat)",
    "pipeline(farm(seq(rev)), dc(small, halves, seq(rev), cat))",
    "pipeline(seq(rev), seq(fail_on z), seq(app !))",
    "farm(while(long 3, seq(shrink)))",
    "if(small 16, seq(rev), pipeline(seq(xor k), seq(app !)))",
    "map_reduce(chunks 4, seq(rev), reduce(cat2))"};

static lt_skel_t *shape(int k) {
  switch (k) {
  case SH_FARM:
    return lt_farm(lt_seq("skelk:rev"));
  case SH_PIPE:
    return lt_pipeline(lt_seq("skelk:rev"), lt_seq_with("skelk:xor", "k", 1),
                       lt_seq_with("skelk:app", "!", 1), NULL);
  case SH_DC:
    return lt_farm(dc_bytes("8"));
  case SH_FIB:
    return lt_skel_param(
        lt_dc("skelk:fib_cut", "skelk:fib_div", lt_seq("skelk:fib_seq"), "skelk:add"), "cond", "6",
        1);
  case SH_MAP:
    return lt_skel_param(lt_map("skelk:chunks", lt_seq("skelk:rev"), "skelk:cat"), "split", "5", 1);
  case SH_NESTED:
    return lt_pipeline(lt_farm(lt_seq("skelk:rev")), dc_bytes("16"), NULL);
  case SH_POISON:
    return lt_pipeline(lt_seq("skelk:rev"), lt_seq_with("skelk:fail_on", "z", 1),
                       lt_seq_with("skelk:app", "!", 1), NULL);
  case SH_WHILE:
    return lt_farm(lt_skel_param(lt_while("skelk:long", lt_seq("skelk:shrink")), "cond", "3", 1));
  case SH_IF:
    return lt_skel_param(lt_if("skelk:small", lt_seq("skelk:rev"),
                               lt_pipeline(lt_seq_with("skelk:xor", "k", 1),
                                           lt_seq_with("skelk:app", "!", 1), NULL)),
                         "cond", "16", 2);
  default:
    return lt_skel_param(
        lt_map_reduce("skelk:chunks", lt_seq("skelk:rev"), lt_reduce("skelk:cat2")), "split", "4",
        1);
  }
}

/* One option and the values the seed picks from. */
typedef struct choice {
  const char *key;
  const char *values[4];
} choice_t;

static const choice_t choices[] = {
    {"mode", {"optimized", "optimized", "plain", NULL}},
    {"lookahead", {"on", "off", NULL}},
    {"lazy", {"on", "on", "off", NULL}},
    {"max_threads", {"1", "2", "6", NULL}},
    {"throttle", {"off", "on", NULL}},
    {"placement", {"eft", "rr", NULL}},
    {"migrate", {"on", "off", NULL}},
    {"backup", {"on", "off", NULL}},
    {"grain", {"auto", "1", "4", NULL}},
    {"pack", {"on", "off", NULL}},
    {"ordered", {"on", "off", NULL}},
    {"normal_form", {"off", "on", NULL}},
    {"inline_max", {"65536", "0", "16", NULL}},
    {"max_retries", {"3", "1000", NULL}},
};

int sim_prog_set(sim_prog_t *p, const char *key, const char *value) {
  int rc = lt__options_set(&p->opts, key, value);
  if (rc != LT_OK) {
    fprintf(stderr, "sim: option %s=%s: %s\n", key, value, p->opts.error);
    return rc;
  }
  size_t n = strlen(p->options);
  snprintf(p->options + n, sizeof p->options - n, "%s%s=%s", n ? " " : "", key, value);
  return LT_OK;
}

/* set_key writes the KEY of the --set override `set` (KEY=VALUE) into key and returns its
 * VALUE, or NULL when it is not of that shape. */
static const char *set_key(const char *set, char *key, size_t len) {
  const char *eq = strchr(set, '=');
  if (eq == NULL || (size_t)(eq - set) >= len) return NULL;
  snprintf(key, len, "%.*s", (int)(eq - set), set);
  return eq + 1;
}

int sim_prog_overrides(const sim_world_t *w, sim_prog_t *p) {
  int rc = LT_OK;
  for (uint32_t i = 0; rc == LT_OK && i < w->p.nset; i++) {
    char key[64];
    const char *value = set_key(w->p.set[i], key, sizeof key);
    if (value == NULL) {
      fprintf(stderr, "sim: --set %s: expected KEY=VALUE\n", w->p.set[i]);
      return LT_EINVAL;
    }
    rc = sim_prog_set(p, key, value);
  }
  return rc;
}

/* set_names tells whether one of the seed's --set overrides names option `key`. */
static int set_names(const sim_world_t *w, const char *key) {
  for (uint32_t i = 0; i < w->p.nset; i++) {
    char k[64];
    if (set_key(w->p.set[i], k, sizeof k) == NULL) continue;
    if (lt__option_find(k) != NULL && lt__option_find(k) == lt__option_find(key)) return 1;
  }
  return 0;
}

/* drawn_set sets a drawn option, except a switch that follows the mode when --set gives the
 * mode (and not the switch): `--set mode=plain` runs the original Lithium, its switches all
 * the mode's, as a mode leaves a switch set itself alone. The draw is made either way, so
 * the rest of the seed is the same. */
static int drawn_set(const sim_world_t *w, sim_prog_t *p, const char *key, const char *value) {
  if (set_names(w, "mode") && lt__option_follows_mode(key) && !set_names(w, key)) return LT_OK;
  return sim_prog_set(p, key, value);
}

int sim_draw(sim_world_t *w, sim_prog_t *p, const char *modules) {
  memset(p, 0, sizeof *p);
  lt__options_init(&p->opts);
  int k = (int)sim_below(&w->rng, SH_DRAW1);
  /* Draw 2, from a stream of its own: three tenths of the seeds run one of its shapes. */
  if (w->p.draw != 1 && sim_chance(&w->fourth, 3, 10))
    k = SH_DRAW1 + (int)sim_below(&w->fourth, SH_NSHAPES - SH_DRAW1);
  snprintf(p->shape, sizeof p->shape, "%s", shape_names[k]);
  p->skel = shape(k);
  if (p->skel == NULL) return LT_ENOMEM;
  int rc = lt__options_set(&p->opts, "modules", modules);
  /* Timings the simulated world can meet: a dead server is noticed within seconds. */
  if (rc == LT_OK) rc = sim_prog_set(p, "heartbeat_ms", sim_chance(&w->rng, 1, 2) ? "200" : "1000");
  if (rc == LT_OK) rc = sim_prog_set(p, "connect_timeout_ms", "5000");
  for (size_t i = 0; rc == LT_OK && i < sizeof choices / sizeof choices[0]; i++) {
    const choice_t *c = &choices[i];
    size_t n = 0;
    while (n < 4 && c->values[n] != NULL)
      n++;
    rc = drawn_set(w, p, c->key, c->values[sim_below(&w->rng, n)]);
  }
  /* Draw 2, from its stream: quarantine on or off whatever the mode, after 1 to 3 crashes
   * (the poison tasks of a seed are 1 or 2). */
  if (rc == LT_OK && w->p.draw != 1) {
    static const char *const crashes[] = {"1", "2", "3"};
    rc = drawn_set(w, p, "quarantine", sim_chance(&w->fourth, 1, 2) ? "on" : "off");
    if (rc == LT_OK) rc = sim_prog_set(p, "quarantine_crashes", crashes[sim_below(&w->fourth, 3)]);
  }
  if (rc == LT_OK) rc = sim_prog_overrides(w, p);
  /* LT_SIM_TRACE=FILE: the dispatcher's trace of the run (option trace), to read a seed. */
  if (rc == LT_OK && getenv("LT_SIM_TRACE") != NULL)
    rc = lt__options_set(&p->opts, "trace", getenv("LT_SIM_TRACE"));
  if (rc != LT_OK) return rc;
  w->max_retries = p->opts.max_retries;
  p->ntasks = w->p.tasks ? w->p.tasks : 1 + (uint32_t)sim_below(&w->rng, 60);
  p->waves = 1 + (uint32_t)sim_below(&w->rng, 4);
  p->inputs = calloc(p->ntasks, sizeof *p->inputs);
  for (uint32_t i = 0; i < p->ntasks; i++) {
    if (k == SH_FIB)
      p->inputs[i] = int_input((int64_t)sim_below(&w->rng, 16));
    else
      p->inputs[i] = random_bytes(w, 1 + sim_below(&w->rng, 48), k == SH_POISON);
  }
  /* From the second stream: in a third of the byte shapes, one or two tasks whose input
   * crashes whichever server runs a kernel on it (their task must fail LT_ECRASH, no other
   * task may pay for it). */
  p->poison = calloc(p->ntasks, 1);
  if (k != SH_FIB && sim_chance(&w->more, 1, 3)) {
    w->crashy = 1;
    for (uint32_t n = 1 + (uint32_t)sim_below(&w->more, 2); n > 0; n--) {
      uint32_t i = (uint32_t)sim_below(&w->more, p->ntasks);
      ((unsigned char *)p->inputs[i]->data)[sim_below(&w->more, p->inputs[i]->len)] = SIM_POISON;
      p->poison[i] = 1;
    }
  }
  /* From the third stream: in a third of the byte shapes, a deadline (task_timeout_ms) and
   * one or two tasks whose kernels run far over it (they must fail LT_ETIMEDOUT, nothing
   * else may). */
  p->slow = calloc(p->ntasks, 1);
  if (k != SH_FIB && sim_chance(&w->third, 1, 3)) {
    rc = sim_prog_set(p, "task_timeout_ms", sim_chance(&w->third, 1, 2) ? "200" : "500");
    if (rc != LT_OK) return rc;
    w->slowing = 1;
    for (uint32_t n = 1 + (uint32_t)sim_below(&w->third, 2); n > 0; n--) {
      uint32_t i = (uint32_t)sim_below(&w->third, p->ntasks);
      ((unsigned char *)p->inputs[i]->data)[sim_below(&w->third, p->inputs[i]->len)] = SIM_SLOW;
      p->slow[i] = 1;
    }
  }
  /* A shrunk seed: everything drawn as before, the tasks after the first `keep` left out. */
  while (w->p.keep > 0 && p->ntasks > w->p.keep)
    lt__value_unref(p->inputs[--p->ntasks]);
  return LT_OK;
}

void sim_prog_free(sim_prog_t *p) {
  for (uint32_t i = 0; p->inputs != NULL && i < p->ntasks; i++)
    lt__value_unref(p->inputs[i]);
  free(p->inputs);
  free(p->poison);
  free(p->slow);
  lt_skel_free(p->skel);
  lt__options_clear(&p->opts);
}
