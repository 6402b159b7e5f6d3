/* runner.c: the shared plumbing of the map and divide-and-conquer examples (runner.h):
 * options, evaluator set-up, running one task and reporting. Nothing here knows what the
 * tasks mean. The thread that owns the evaluator calls it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner.h"

#ifndef LT_EXAMPLE_SERVER
#define LT_EXAMPLE_SERVER "lithium-server"
#endif
#ifndef LT_EXAMPLE_MODULES
#define LT_EXAMPLE_MODULES "."
#endif

#define MAX_SERVERS 1024

void ex_opts_init(ex_opts_t *o, const char *prog) {
  *o = (ex_opts_t){.prog = prog, .servers = 2};
}

void ex_opts_usage(FILE *f) {
  fprintf(f,
          "  --servers N   spawn N local lithium-server processes (default 2)\n"
          "  --hosts LIST  use running servers instead, e.g. tcp://127.0.0.1:5555,tcp://...\n"
          "  --local       run with the sequential evaluator in this process, no servers\n"
          "  --stats       print the evaluator's statistics (JSON) at the end\n"
          "Environment: LITHIUM_SERVER (server program, default %s),\n"
          "             LITHIUM_MODULES (kernel module directory, default %s), LITHIUM_*.\n",
          LT_EXAMPLE_SERVER, LT_EXAMPLE_MODULES);
}

int ex_parse_num(const ex_opts_t *o, const char *flag, const char *text, long long min,
                 long long max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max) {
    fprintf(stderr, "%s: %s needs a number from %lld to %lld, not '%s'\n", o->prog, flag, min, max,
            text);
    return -1;
  }
  *out = v;
  return 0;
}

/* num_flag parses argv[*i] when it is one of `flags` (advancing *i past its value): 1 when it
 * took it, 0 when it is none of them, -1 on a bad value. */
static int num_flag(const ex_opts_t *o, int argc, char **argv, int *i, const ex_num_flag_t *flags,
                    size_t nflags) {
  for (size_t k = 0; k < nflags; k++) {
    if (strcmp(argv[*i], flags[k].name) != 0 || *i + 1 >= argc) continue;
    *i += 1;
    return ex_parse_num(o, flags[k].name, argv[*i], flags[k].min, flags[k].max, flags[k].value) == 0
               ? 1
               : -1;
  }
  return 0;
}

int ex_args_parse(ex_opts_t *o, int argc, char **argv, const ex_num_flag_t *flags, size_t nflags,
                  ex_usage_fn usage) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout, argv[0]);
      exit(0);
    }
    int rc = ex_opts_parse(o, argc, argv, &i);
    if (rc == 0) rc = num_flag(o, argc, argv, &i, flags, nflags);
    if (rc < 0) return -1;
    if (rc == 0) {
      fprintf(stderr, "%s: bad argument '%s'\n", o->prog, a);
      usage(stderr, argv[0]);
      return -1;
    }
  }
  return 0;
}

int ex_opts_parse(ex_opts_t *o, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  long long v;
  if (strcmp(a, "--local") == 0) {
    o->local = 1;
  } else if (strcmp(a, "--stats") == 0) {
    o->stats = 1;
  } else if (strcmp(a, "--servers") == 0 && *i + 1 < argc) {
    if (ex_parse_num(o, a, argv[++*i], 1, MAX_SERVERS, &v) != 0) return -1;
    o->servers = (int)v;
  } else if (strcmp(a, "--hosts") == 0 && *i + 1 < argc) {
    o->hosts = argv[++*i];
  } else {
    return 0;
  }
  return 1;
}

/* add_hosts adds every endpoint of the comma-separated list. */
static int add_hosts(const ex_opts_t *o, lt_eval_t *ev) {
  char *list = strdup(o->hosts);
  if (list == NULL) return LT_ENOMEM;
  int rc = LT_OK, n = 0;
  char *save = NULL;
  for (char *ep = strtok_r(list, ",", &save); ep != NULL; ep = strtok_r(NULL, ",", &save)) {
    rc = lt_eval_add_host(ev, ep);
    if (rc != LT_OK) {
      fprintf(stderr, "%s: bad host '%s': %s\n", o->prog, ep, lt_strerror(rc));
      break;
    }
    n++;
  }
  free(list);
  if (rc == LT_OK && n == 0) {
    fprintf(stderr, "%s: --hosts lists no endpoint\n", o->prog);
    rc = LT_EINVAL;
  }
  return rc;
}

/* configure points the evaluator at this build's server program and modules unless the
 * environment says otherwise. */
static int configure(const ex_opts_t *o, lt_eval_t *ev) {
  int rc = LT_OK;
  if (getenv("LITHIUM_SERVER") == NULL && (rc = lt_eval_set(ev, "server", LT_EXAMPLE_SERVER)))
    fprintf(stderr, "%s: option server: %s\n", o->prog, lt_strerror(rc));
  else if (getenv("LITHIUM_MODULES") == NULL &&
           (rc = lt_eval_set(ev, "modules", LT_EXAMPLE_MODULES)))
    fprintf(stderr, "%s: option modules: %s\n", o->prog, lt_strerror(rc));
  return rc;
}

lt_eval_t *ex_eval_open(const ex_opts_t *o, lt_skel_t *program, int local) {
  return ex_eval_open_with(o, program, local, NULL);
}

lt_eval_t *ex_eval_open_with(const ex_opts_t *o, lt_skel_t *program, int local,
                             const char *const *kv) {
  if (program == NULL) {
    fprintf(stderr, "%s: cannot build the skeleton program\n", o->prog);
    return NULL;
  }
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, program);
  if (rc != LT_OK) {
    fprintf(stderr, "%s: lt_eval_new: %s\n", o->prog, lt_strerror(rc));
    return NULL;
  }
  if (configure(o, ev) != LT_OK) goto fail;
  for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2) {
    if ((rc = lt_eval_set(ev, kv[i], kv[i + 1])) != LT_OK) {
      fprintf(stderr, "%s: option %s=%s: %s\n", o->prog, kv[i], kv[i + 1], lt_strerror(rc));
      goto fail;
    }
  }
  if (local) {
    if ((rc = lt_eval_run_local(ev)) != LT_OK) {
      fprintf(stderr, "%s: lt_eval_run_local: %s\n", o->prog, lt_strerror(rc));
      goto fail;
    }
    return ev;
  }
  if (o->hosts != NULL) {
    if (add_hosts(o, ev) != LT_OK) goto fail;
  } else if ((rc = lt_eval_spawn_local(ev, o->servers)) != LT_OK) {
    fprintf(stderr, "%s: cannot spawn %d servers: %s\n", o->prog, o->servers, lt_strerror(rc));
    goto fail;
  }
  if ((rc = lt_eval_start(ev)) != LT_OK) {
    fprintf(stderr, "%s: lt_eval_start: %s\n", o->prog, lt_strerror(rc));
    goto fail;
  }
  return ev;
fail:
  lt_eval_free(ev);
  return NULL;
}

int ex_eval_run(const ex_opts_t *o, lt_eval_t *ev, const void *task, size_t len, lt_buf_t **out) {
  *out = NULL;
  int rc = lt_eval_submit(ev, task, len, NULL);
  if (rc != LT_OK) {
    fprintf(stderr, "%s: lt_eval_submit: %s\n", o->prog, lt_strerror(rc));
    return -1;
  }
  if ((rc = lt_eval_close(ev)) != LT_OK) {
    fprintf(stderr, "%s: lt_eval_close: %s\n", o->prog, lt_strerror(rc));
    return -1;
  }
  lt_buf_t *b = NULL;
  if ((rc = lt_eval_next(ev, &b)) != LT_OK) {
    fprintf(stderr, "%s: lt_eval_next: %s\n", o->prog, lt_strerror(rc));
    return -1;
  }
  if (lt_buf_error(b) != LT_OK) {
    fprintf(stderr, "%s: the task failed: %s: %s\n", o->prog, lt_strerror(lt_buf_error(b)),
            lt_buf_errmsg(b));
    lt_buf_free(b);
    return -1;
  }
  /* One task in, so the stream must end here. */
  lt_buf_t *extra = NULL;
  if ((rc = lt_eval_next(ev, &extra)) != LT_ECLOSED) {
    fprintf(stderr, "%s: expected the end of the results, got %s\n", o->prog,
            rc == LT_OK ? "another result" : lt_strerror(rc));
    lt_buf_free(extra);
    lt_buf_free(b);
    return -1;
  }
  *out = b;
  return 0;
}

/* stat_number finds the top-level counter `key` in the stats JSON; -1 when absent. The
 * counters come before the per-server objects, so the first match is the top-level one. */
static long long stat_number(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  if (p == NULL) return -1;
  return strtoll(p + strlen(pat), NULL, 10);
}

void ex_eval_where(const ex_opts_t *o, int local, char *buf, size_t len) {
  if (local)
    snprintf(buf, len, "the sequential evaluator");
  else if (o->hosts != NULL)
    snprintf(buf, len, "the given servers");
  else
    snprintf(buf, len, "%d spawned server%s", o->servers, o->servers == 1 ? "" : "s");
}

void ex_eval_report(const ex_opts_t *o, lt_eval_t *ev, int local, double seconds) {
  char where[64];
  ex_eval_where(o, local, where, sizeof where);
  char *json = NULL;
  int rc = lt_eval_stats_json(ev, &json);
  if (rc != LT_OK) {
    fprintf(stderr, "%s: lt_eval_stats_json: %s\n", o->prog, lt_strerror(rc));
    printf("%s: %.3f s on %s\n", o->prog, seconds, where);
    return;
  }
  printf("%s: %.3f s on %s, %lld instructions\n", o->prog, seconds, where,
         stat_number(json, "instructions"));
  if (o->stats) printf("%s\n", json);
  free(json);
}

double ex_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long ex_stat_u64(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

long long ex_stat_sum(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  long long sum = 0;
  for (const char *p = strstr(json, pat); p != NULL; p = strstr(p + 1, pat))
    sum += strtoll(p + strlen(pat), NULL, 10);
  return sum;
}
