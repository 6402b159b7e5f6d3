/* benchlib.c: the shared plumbing of the benchmark programs (benchlib.h): clock, medians,
 * JSON lines, evaluator set-up, the streaming run, the raw ZeroMQ echo baseline and the task
 * streams several programs feed (index, empty and touch-chain tasks). Nothing here knows what
 * a benchmark measures. Evaluator helpers belong to the evaluator's thread;
 * the echo runs its server on a thread of its own. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "benchlib.h"

#define MAX_RUNS     1000
#define MAX_TASKS    100000000L
#define ENDPOINT_MAX 256

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_json(const char *bench, const char *metric, double value, double baseline,
                const char *unit) {
  char ratio[64];
  if (baseline != 0)
    snprintf(ratio, sizeof ratio, "%.4g", value / baseline);
  else
    snprintf(ratio, sizeof ratio, "null");
  printf("{\"bench\": \"%s\", \"metric\": \"%s\", \"value\": %.10g, \"baseline\": %.10g, "
         "\"ratio\": %s, \"unit\": \"%s\"}\n",
         bench, metric, value, baseline, ratio, unit);
  fflush(stdout);
}

static int parse_long(const char *prog, const char *flag, const char *text, long min, long max,
                      long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max) {
    fprintf(stderr, "%s: %s needs a number from %ld to %ld, not '%s'\n", prog, flag, min, max,
            text);
    return -1;
  }
  *out = v;
  return 0;
}

int bench_parse_args(int argc, char **argv, const char *usage, int *runs, long *tasks) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long v;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      printf("%s", usage);
      return 1;
    } else if (runs != NULL && strcmp(a, "--runs") == 0 && i + 1 < argc) {
      if (parse_long(argv[0], a, argv[++i], 1, MAX_RUNS, &v) != 0) return -1;
      *runs = (int)v;
    } else if (tasks != NULL && strcmp(a, "--tasks") == 0 && i + 1 < argc) {
      if (parse_long(argv[0], a, argv[++i], 1, MAX_TASKS, &v) != 0) return -1;
      *tasks = v;
    } else {
      fprintf(stderr, "%s: bad argument '%s'\n%s", argv[0], a, usage);
      return -1;
    }
  }
  return 0;
}

lt_eval_t *bench_eval_open(const char *prog, lt_skel_t *program, const char *const *kv,
                           int nservers) {
  ex_opts_t o;
  ex_opts_init(&o, prog);
  o.servers = nservers;
  /* BENCH_HOSTS: running servers instead of spawned ones, as host strings ("EP [KEY]",
   * comma-separated), e.g. to measure CURVE (with LITHIUM_CURVE_KEY). */
  o.hosts = getenv("BENCH_HOSTS");
  return ex_eval_open_with(&o, program, 0, kv);
}

typedef struct feeder {
  const char *prog;
  lt_eval_t *ev;
  long tasks;
  size_t size;
  bench_make_fn make;
  void *arg;
  int owned;       /* each task in a buffer of its own, handed over (lt_eval_submit_owned) */
  atomic_int stop; /* set by the reader when it gives up */
  int rc;          /* first error of lt_eval_submit / lt_eval_close */
} feeder_t;

static void free_task(void *data, void *hint) {
  (void)hint;
  free(data);
}

/* submit_next makes task i and submits it: copied from the feeder's one buffer `buf`, or in a
 * buffer of its own that the evaluator takes. */
static int submit_next(feeder_t *f, long i, unsigned char *buf) {
  if (!f->owned) {
    f->make(i, buf, f->arg);
    return lt_eval_submit(f->ev, buf, f->size, NULL);
  }
  unsigned char *own = malloc(f->size > 0 ? f->size : 1);
  if (own == NULL) return LT_ENOMEM;
  f->make(i, own, f->arg);
  return lt_eval_submit_owned(f->ev, own, f->size, free_task, NULL, NULL);
}

/* feed runs on its own thread: lt_eval_submit blocks while `max_pending` tasks are
 * unfinished, so the caller must be reading results meanwhile. */
static void *feed(void *p) {
  feeder_t *f = p;
  unsigned char *buf = f->owned ? NULL : malloc(f->size > 0 ? f->size : 1);
  if (!f->owned && buf == NULL) {
    f->rc = LT_ENOMEM;
    fprintf(stderr, "%s: out of memory\n", f->prog);
  }
  for (long i = 0; f->rc == LT_OK && i < f->tasks && !atomic_load(&f->stop); i++) {
    int rc = submit_next(f, i, buf);
    if (rc != LT_OK) {
      f->rc = rc;
      fprintf(stderr, "%s: lt_eval_submit(task %ld): %s\n", f->prog, i, lt_strerror(rc));
      break;
    }
  }
  free(buf);
  int rc = lt_eval_close(f->ev);
  if (rc != LT_OK && f->rc == LT_OK) {
    f->rc = rc;
    fprintf(stderr, "%s: lt_eval_close: %s\n", f->prog, lt_strerror(rc));
  }
  return NULL;
}

/* stream is bench_eval_stream, the tasks handed over without a copy when `owned`. */
static int stream(const char *prog, lt_eval_t *ev, long tasks, size_t size, bench_make_fn make,
                  bench_check_fn check, void *arg, int owned, double *seconds) {
  feeder_t f = {.prog = prog,
                .ev = ev,
                .tasks = tasks,
                .size = size,
                .make = make,
                .arg = arg,
                .owned = owned};
  atomic_init(&f.stop, 0);
  pthread_t th;
  double t0 = ex_now();
  if (pthread_create(&th, NULL, feed, &f) != 0) {
    fprintf(stderr, "%s: cannot start the feeder thread\n", prog);
    return -1;
  }
  long got = 0;
  int failed = 0, rc;
  lt_buf_t *b = NULL;
  while ((rc = lt_eval_next(ev, &b)) == LT_OK) {
    if (!failed && lt_buf_error(b) != LT_OK) {
      fprintf(stderr, "%s: task %ld failed: %s: %s\n", prog, got, lt_strerror(lt_buf_error(b)),
              lt_buf_errmsg(b));
      failed = 1;
    } else if (!failed && check(got, lt_buf_data(b), lt_buf_len(b), arg) != 0) {
      fprintf(stderr, "%s: task %ld: wrong result (%zu bytes)\n", prog, got, lt_buf_len(b));
      failed = 1;
    }
    lt_buf_free(b);
    got++;
    if (failed) atomic_store(&f.stop, 1);
  }
  *seconds = ex_now() - t0;
  pthread_join(th, NULL);
  if (rc != LT_ECLOSED) {
    fprintf(stderr, "%s: lt_eval_next: %s\n", prog, lt_strerror(rc));
    return -1;
  }
  if (failed || f.rc != LT_OK) return -1;
  if (got != tasks) {
    fprintf(stderr, "%s: %ld results for %ld tasks\n", prog, got, tasks);
    return -1;
  }
  return 0;
}

int bench_eval_stream(const char *prog, lt_eval_t *ev, long tasks, size_t size, bench_make_fn make,
                      bench_check_fn check, void *arg, double *seconds) {
  return stream(prog, ev, tasks, size, make, check, arg, 0, seconds);
}

int bench_eval_stream_owned(const char *prog, lt_eval_t *ev, long tasks, size_t size,
                            bench_make_fn make, bench_check_fn check, void *arg, double *seconds) {
  return stream(prog, ev, tasks, size, make, check, arg, 1, seconds);
}

/* The echo server: a ROUTER that sends every message back to its sender until it receives an
 * empty payload. */
typedef struct echo_server {
  void *router;
  int rc;
} echo_server_t;

static void *echo_serve(void *p) {
  echo_server_t *s = p;
  zmq_msg_t id, body;
  zmq_msg_init(&id);
  zmq_msg_init(&body);
  for (;;) {
    if (zmq_msg_recv(&id, s->router, 0) < 0 || zmq_msg_recv(&body, s->router, 0) < 0) {
      s->rc = -1;
      break;
    }
    if (zmq_msg_size(&body) == 0) break;
    if (zmq_msg_send(&id, s->router, ZMQ_SNDMORE) < 0 || zmq_msg_send(&body, s->router, 0) < 0) {
      s->rc = -1;
      break;
    }
  }
  zmq_msg_close(&id);
  zmq_msg_close(&body);
  return NULL;
}

/* echo_client keeps `window` messages in flight over `dealer` until `count` replies came. */
static int echo_client(void *dealer, long count, int window, size_t size, double *seconds,
                       double *rtt_us) {
  unsigned char *msg = calloc(1, size > 0 ? size : 1);
  unsigned char *reply = malloc(size + 1);
  if (msg == NULL || reply == NULL) {
    free(msg);
    free(reply);
    return -1;
  }
  long sent = 0, got = 0;
  int rc = 0;
  double t0 = ex_now(), sent_at = t0;
  for (; sent < count && sent < window; sent++)
    if (zmq_send(dealer, msg, size, 0) < 0) rc = -1;
  while (rc == 0 && got < count) {
    int n = zmq_recv(dealer, reply, size + 1, 0);
    if (n < 0 || (size_t)n != size) {
      rc = -1;
      break;
    }
    double now = ex_now();
    if (rtt_us != NULL && window == 1) rtt_us[got] = (now - sent_at) * 1e6;
    got++;
    if (sent < count) {
      sent_at = now;
      if (zmq_send(dealer, msg, size, 0) < 0) rc = -1;
      sent++;
    }
  }
  *seconds = ex_now() - t0;
  free(msg);
  free(reply);
  return rc;
}

int bench_echo_run(long count, int window, size_t size, double *seconds, double *rtt_us) {
  if (size == 0 || window < 1) return -1; /* an empty payload stops the server */
  int rc = -1, linger = 0;
  pthread_t th;
  int started = 0;
  echo_server_t srv = {0};
  void *dealer = NULL;
  /* Two contexts, so that each side has its own I/O thread, as a client and a server process
   * would. */
  void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new();
  if (sctx == NULL || cctx == NULL) goto out;
  srv.router = zmq_socket(sctx, ZMQ_ROUTER);
  dealer = zmq_socket(cctx, ZMQ_DEALER);
  if (srv.router == NULL || dealer == NULL) goto out;
  zmq_setsockopt(srv.router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
  /* The window may be larger than ZeroMQ's default high-water marks (1000 a pipe), past
   * which a ROUTER drops what it sends: no limit here (the window bounds what is in flight),
   * and a reply that still never comes ends the run after 30 s instead of hanging it. */
  int unlimited = 0, wait_ms = 30000;
  zmq_setsockopt(srv.router, ZMQ_SNDHWM, &unlimited, sizeof unlimited);
  zmq_setsockopt(srv.router, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
  zmq_setsockopt(dealer, ZMQ_SNDHWM, &unlimited, sizeof unlimited);
  zmq_setsockopt(dealer, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
  zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
  char ep[ENDPOINT_MAX];
  size_t eplen = sizeof ep;
  if (zmq_bind(srv.router, "tcp://127.0.0.1:*") != 0 ||
      zmq_getsockopt(srv.router, ZMQ_LAST_ENDPOINT, ep, &eplen) != 0 || zmq_connect(dealer, ep))
    goto out;
  if (pthread_create(&th, NULL, echo_serve, &srv) != 0) goto out;
  started = 1;
  rc = echo_client(dealer, count, window, size, seconds, rtt_us);
  /* The empty message stops the server; when the run failed the server may wait for a
   * message that never comes, and shutting its context down wakes it. */
  if (rc != 0 || zmq_send(dealer, "", 0, 0) < 0) zmq_ctx_shutdown(sctx);
out:
  if (rc != 0) fprintf(stderr, "raw echo: %s\n", zmq_strerror(zmq_errno()));
  if (started) pthread_join(th, NULL);
  if (started && srv.rc != 0) rc = -1;
  if (dealer != NULL) zmq_close(dealer);
  if (srv.router != NULL) zmq_close(srv.router);
  if (cctx != NULL) zmq_ctx_term(cctx);
  if (sctx != NULL) zmq_ctx_term(sctx);
  return rc;
}

void bench_index_make(long i, unsigned char *buf, void *arg) {
  (void)arg;
  memcpy(buf, &i, BENCH_INDEX_SIZE);
}

int bench_index_check(long i, const unsigned char *data, size_t len, void *arg) {
  unsigned char want[BENCH_INDEX_SIZE];
  bench_index_make(i, want, arg);
  return len == BENCH_INDEX_SIZE && memcmp(data, want, BENCH_INDEX_SIZE) == 0 ? 0 : -1;
}

void bench_noop_make(long i, unsigned char *buf, void *arg) {
  (void)arg;
  memset(buf, 0xa5, BENCH_NOOP_SIZE);
  memcpy(buf, &i, sizeof i);
}

int bench_noop_check(long i, const unsigned char *data, size_t len, void *arg) {
  unsigned char want[BENCH_NOOP_SIZE];
  bench_noop_make(i, want, arg);
  return len == BENCH_NOOP_SIZE && memcmp(data, want, BENCH_NOOP_SIZE) == 0 ? 0 : -1;
}

lt_skel_t *bench_chain_program(void) {
  _Static_assert(BENCH_CHAIN_STAGES == 4, "the pipeline below has 4 stages");
  return lt_pipeline(lt_seq("bench:touch"), lt_seq("bench:touch"), lt_seq("bench:touch"),
                     lt_seq("bench:touch"), NULL);
}

void bench_chain_make(long i, unsigned char *buf, void *arg) {
  (void)arg;
  for (size_t k = 0; k < BENCH_CHAIN_SIZE; k += 4096)
    memset(buf + k, (int)((i * 7 + (long)(k / 4096)) & 0xff), 4096);
}

/* After the touch stages the first byte is BENCH_CHAIN_STAGES more than the task's, the rest
 * is unchanged. */
int bench_chain_check(long i, const unsigned char *data, size_t len, void *arg) {
  unsigned char *want = arg;
  if (len != BENCH_CHAIN_SIZE) return -1;
  bench_chain_make(i, want, NULL);
  want[0] = (unsigned char)(want[0] + BENCH_CHAIN_STAGES);
  return memcmp(data, want, BENCH_CHAIN_SIZE) == 0 ? 0 : -1;
}
