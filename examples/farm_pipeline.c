/* examples/farm_pipeline.c: the smallest complete Lithium-C program. It runs
 * pipe(farm(arith:square), farm(seq(arith:add, "1"))) on local servers it spawns (or on
 * running ones given with --hosts), feeds integers from a second thread while the main thread
 * reads the results, and checks every result: i -> i*i + 1.
 * Run `farm_pipeline --help` for the options. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lithium.h>

#ifndef LT_EXAMPLE_SERVER
#define LT_EXAMPLE_SERVER "lithium-server"
#endif
#ifndef LT_EXAMPLE_MODULES
#define LT_EXAMPLE_MODULES "."
#endif

#define TOKEN_SIZE 8
#define MAX_TASKS  1000000000LL /* (1e9)^2 + 1 still fits in an int64 */
#define MAX_REPORT 5            /* bad results printed in full */

typedef struct options {
  int servers;
  const char *hosts; /* comma-separated endpoints, or NULL to spawn servers */
  long long tasks;
  int stats;
  int collatz; /* first stage arith:collatz instead of arith:square */
} options_t;

typedef struct feeder {
  lt_eval_t *ev;
  const options_t *opt;
  atomic_int stop; /* set by the reader when it gives up */
  int rc;          /* first error of lt_eval_submit / lt_eval_close */
  long long submitted;
} feeder_t;

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [--servers N | --hosts EP,EP,...] [--tasks N] [--collatz] [--stats]\n"
          "  --servers N   spawn N local lithium-server processes (default 2)\n"
          "  --hosts LIST  use running servers instead, e.g. tcp://127.0.0.1:5555,tcp://...\n"
          "  --tasks N     number of input integers (default 1000)\n"
          "  --collatz     first stage arith:collatz (CPU-bound) instead of arith:square\n"
          "  --stats       print the evaluator's statistics (JSON) at the end\n"
          "Environment: LITHIUM_SERVER (server program, default %s),\n"
          "             LITHIUM_MODULES (kernel module directory, default %s), LITHIUM_*.\n",
          prog, LT_EXAMPLE_SERVER, LT_EXAMPLE_MODULES);
}

static int parse_count(const char *text, long long min, long long max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, options_t *opt) {
  *opt = (options_t){.servers = 2, .tasks = 1000};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long long v;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout, argv[0]);
      exit(0);
    } else if (strcmp(a, "--stats") == 0) {
      opt->stats = 1;
    } else if (strcmp(a, "--collatz") == 0) {
      opt->collatz = 1;
    } else if (strcmp(a, "--servers") == 0 && i + 1 < argc) {
      if (parse_count(argv[++i], 1, 1024, &v) != 0) {
        fprintf(stderr, "%s: --servers needs a number from 1 to 1024\n", argv[0]);
        return -1;
      }
      opt->servers = (int)v;
    } else if (strcmp(a, "--tasks") == 0 && i + 1 < argc) {
      if (parse_count(argv[++i], 1, MAX_TASKS, &v) != 0) {
        fprintf(stderr, "%s: --tasks needs a number from 1 to %lld\n", argv[0], MAX_TASKS);
        return -1;
      }
      opt->tasks = v;
    } else if (strcmp(a, "--hosts") == 0 && i + 1 < argc) {
      opt->hosts = argv[++i];
    } else {
      fprintf(stderr, "%s: bad argument '%s'\n", argv[0], a);
      usage(stderr, argv[0]);
      return -1;
    }
  }
  return 0;
}

static void store_le64(unsigned char *p, int64_t value) {
  uint64_t v = (uint64_t)value;
  for (int i = 0; i < TOKEN_SIZE; i++) {
    p[i] = (unsigned char)(v & 0xff);
    v >>= 8;
  }
}

static int64_t load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = TOKEN_SIZE - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return (int64_t)v;
}

static int64_t collatz_steps(int64_t x) {
  uint64_t v = (uint64_t)x;
  int64_t steps = 0;
  for (; v != 1; steps++)
    v = (v % 2 == 0) ? v / 2 : 3 * v + 1;
  return steps;
}

/* input_of and expected_of define the check: task i carries input_of(i), and its result must
 * be expected_of(i). */
static int64_t input_of(const options_t *opt, long long i) {
  return opt->collatz ? i + 1 : i;
}

static int64_t expected_of(const options_t *opt, long long i) {
  return opt->collatz ? collatz_steps(i + 1) + 1 : (int64_t)i * i + 1;
}

/* feed runs on its own thread: lt_eval_submit blocks while `max_pending` tasks are
 * unfinished, so the main thread must be reading results meanwhile. */
static void *feed(void *arg) {
  feeder_t *f = arg;
  unsigned char token[TOKEN_SIZE];
  for (long long i = 0; i < f->opt->tasks && !atomic_load(&f->stop); i++) {
    store_le64(token, input_of(f->opt, i));
    int rc = lt_eval_submit(f->ev, token, sizeof token, NULL);
    if (rc != LT_OK) {
      f->rc = rc;
      fprintf(stderr, "farm_pipeline: lt_eval_submit(task %lld): %s\n", i, lt_strerror(rc));
      break;
    }
    f->submitted++;
  }
  int rc = lt_eval_close(f->ev);
  if (rc != LT_OK) {
    fprintf(stderr, "farm_pipeline: lt_eval_close: %s\n", lt_strerror(rc));
    if (f->rc == LT_OK) f->rc = rc;
  }
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* setup_servers gives the evaluator its servers: the --hosts list, or spawned ones. */
static int setup_servers(lt_eval_t *ev, const options_t *opt, int *nservers) {
  int rc;
  if (opt->hosts == NULL) {
    rc = lt_eval_spawn_local(ev, opt->servers);
    if (rc != LT_OK)
      fprintf(stderr, "farm_pipeline: cannot spawn %d servers: %s\n", opt->servers,
              lt_strerror(rc));
    *nservers = opt->servers;
    return rc;
  }
  char *list = strdup(opt->hosts);
  if (list == NULL) return LT_ENOMEM;
  *nservers = 0;
  rc = LT_OK;
  char *save = NULL;
  for (char *ep = strtok_r(list, ",", &save); ep != NULL; ep = strtok_r(NULL, ",", &save)) {
    rc = lt_eval_add_host(ev, ep);
    if (rc != LT_OK) {
      fprintf(stderr, "farm_pipeline: bad host '%s': %s\n", ep, lt_strerror(rc));
      break;
    }
    (*nservers)++;
  }
  free(list);
  if (rc == LT_OK && *nservers == 0) {
    fprintf(stderr, "farm_pipeline: --hosts lists no endpoint\n");
    rc = LT_EINVAL;
  }
  return rc;
}

/* configure points the evaluator at this build's server program and modules unless the
 * environment (LITHIUM_SERVER, LITHIUM_MODULES) says otherwise. */
static int configure(lt_eval_t *ev) {
  int rc = LT_OK;
  if (getenv("LITHIUM_SERVER") == NULL && (rc = lt_eval_set(ev, "server", LT_EXAMPLE_SERVER)))
    fprintf(stderr, "farm_pipeline: option server: %s\n", lt_strerror(rc));
  else if (getenv("LITHIUM_MODULES") == NULL &&
           (rc = lt_eval_set(ev, "modules", LT_EXAMPLE_MODULES)))
    fprintf(stderr, "farm_pipeline: option modules: %s\n", lt_strerror(rc));
  return rc;
}

/* collect reads every result into got[] (in arrival order) and counts kernel failures. */
static long long collect(lt_eval_t *ev, feeder_t *f, int64_t *got, long long cap,
                         long long *nerrors) {
  long long n = 0;
  for (long long nread = 0;; nread++) {
    lt_buf_t *b = NULL;
    int rc = lt_eval_next(ev, &b);
    if (rc == LT_ECLOSED) break;
    if (rc != LT_OK) {
      fprintf(stderr, "farm_pipeline: lt_eval_next: %s\n", lt_strerror(rc));
      atomic_store(&f->stop, 1);
      (*nerrors)++;
      break;
    }
    if (lt_buf_error(b) != LT_OK) {
      if (*nerrors < MAX_REPORT)
        fprintf(stderr, "farm_pipeline: result %lld failed: %s: %s\n", nread,
                lt_strerror(lt_buf_error(b)), lt_buf_errmsg(b));
      (*nerrors)++;
    } else if (lt_buf_len(b) != TOKEN_SIZE) {
      if (*nerrors < MAX_REPORT)
        fprintf(stderr, "farm_pipeline: result %lld has %zu bytes, not %d\n", nread, lt_buf_len(b),
                TOKEN_SIZE);
      (*nerrors)++;
    } else if (n < cap) {
      got[n++] = load_le64(lt_buf_data(b));
    } else {
      if (*nerrors < MAX_REPORT) fprintf(stderr, "farm_pipeline: more results than tasks\n");
      (*nerrors)++;
    }
    lt_buf_free(b);
  }
  return n;
}

/* check compares the results with the expected values: in order (the `ordered` default),
 * else as a multiset. Returns the number of wrong or missing results. */
static long long check(const options_t *opt, int64_t *got, long long ngot) {
  long long n = opt->tasks, bad = 0, in_order = ngot == n;
  int64_t *want = malloc((size_t)n * sizeof *want);
  if (want == NULL) {
    fprintf(stderr, "farm_pipeline: out of memory\n");
    return n;
  }
  for (long long i = 0; i < n; i++) {
    want[i] = expected_of(opt, i);
    if (i < ngot && got[i] != want[i]) in_order = 0;
  }
  if (!in_order) {
    qsort(want, (size_t)n, sizeof *want, cmp_i64);
    qsort(got, (size_t)ngot, sizeof *got, cmp_i64);
    long long i = 0, j = 0;
    while (i < n && j < ngot) {
      if (want[i] == got[j]) {
        i++, j++;
      } else if (want[i] < got[j]) {
        if (bad < MAX_REPORT)
          fprintf(stderr, "farm_pipeline: missing result %" PRId64 "\n", want[i]);
        i++, bad++;
      } else {
        if (bad < MAX_REPORT)
          fprintf(stderr, "farm_pipeline: unexpected result %" PRId64 "\n", got[j]);
        j++, bad++;
      }
    }
    bad += (n - i) + (ngot - j);
    if (bad == 0) fprintf(stderr, "farm_pipeline: note: results arrived out of submission order\n");
  }
  free(want);
  return bad;
}

int main(int argc, char **argv) {
  options_t opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;

  lt_skel_t *program = opt.collatz ? lt_pipeline(lt_farm(lt_seq("arith:collatz")),
                                                 lt_farm(lt_seq_with("arith:add", "1", 1)), NULL)
                                   : lt_pipeline(lt_farm(lt_seq("arith:square")),
                                                 lt_farm(lt_seq_with("arith:add", "1", 1)), NULL);
  if (program == NULL) {
    fprintf(stderr, "farm_pipeline: cannot build the skeleton program\n");
    return 1;
  }
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, program);
  if (rc != LT_OK) {
    fprintf(stderr, "farm_pipeline: lt_eval_new: %s\n", lt_strerror(rc));
    return 1;
  }

  int nservers = 0, status = 1;
  int64_t *got = NULL;
  if (configure(ev) != LT_OK || setup_servers(ev, &opt, &nservers) != LT_OK) goto out;
  got = malloc((size_t)opt.tasks * sizeof *got);
  if (got == NULL) {
    fprintf(stderr, "farm_pipeline: out of memory for %lld results\n", opt.tasks);
    goto out;
  }

  double t0 = now_seconds();
  rc = lt_eval_start(ev);
  if (rc != LT_OK) {
    fprintf(stderr, "farm_pipeline: lt_eval_start: %s\n", lt_strerror(rc));
    goto out;
  }
  feeder_t feeder = {.ev = ev, .opt = &opt, .rc = LT_OK};
  atomic_init(&feeder.stop, 0);
  pthread_t thread;
  if ((errno = pthread_create(&thread, NULL, feed, &feeder)) != 0) {
    perror("farm_pipeline: pthread_create");
    goto out;
  }
  long long nerrors = 0;
  long long ngot = collect(ev, &feeder, got, opt.tasks, &nerrors);
  pthread_join(thread, NULL);
  double seconds = now_seconds() - t0;

  long long bad = check(&opt, got, ngot);
  const char *prog = opt.collatz ? "pipe(farm(arith:collatz), farm(seq(arith:add, \"1\")))"
                                 : "pipe(farm(arith:square), farm(seq(arith:add, \"1\")))";
  printf("farm_pipeline: %s\n", prog);
  printf("farm_pipeline: %lld tasks on %d %s servers in %.3f s (%.0f tasks/s)\n", opt.tasks,
         nservers, opt.hosts ? "remote" : "spawned", seconds,
         seconds > 0 ? (double)ngot / seconds : 0.0);
  if (opt.stats) {
    char *json = NULL;
    rc = lt_eval_stats_json(ev, &json);
    if (rc == LT_OK)
      printf("%s\n", json);
    else
      fprintf(stderr, "farm_pipeline: lt_eval_stats_json: %s\n", lt_strerror(rc));
    free(json);
  }
  if (bad == 0 && nerrors == 0 && feeder.rc == LT_OK) {
    printf("farm_pipeline: all %lld results correct\n", opt.tasks);
    status = 0;
  } else {
    printf("farm_pipeline: FAILED: %lld wrong or missing results, %lld errors\n", bad, nerrors);
  }

out:
  free(got);
  lt_eval_free(ev);
  return status;
}
