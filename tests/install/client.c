/* tests/install/client.c: a client built out of tree against an installed Lithium-C (with
 * pkg-config, and again with CMake's find_package). It runs pipe(farm(itest:rev),
 * seq(itest:tag, "!")) on the server given as argv[1] (or on N servers it spawns itself with
 * lt_eval_spawn_local, which must find the lithium-server of the library's own prefix),
 * checks every result (also one read through a future) and checks that a failing kernel's
 * message reaches the client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#define NTASKS 64

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "itest_client: " __VA_ARGS__);                                               \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* CALL runs an API call; on failure it reports and jumps to the function's `out` label. */
#define CALL(expr)                                                                                 \
  do {                                                                                             \
    int rc_ = (expr);                                                                              \
    if (rc_ != LT_OK) {                                                                            \
      fprintf(stderr, "itest_client: %s: %s\n", #expr, lt_strerror(rc_));                          \
      failures++;                                                                                  \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

static const char *endpoint;    /* a running server, or NULL: spawn */
static int nspawn;              /* --spawn N */
static const char *modules_dir; /* --spawn's module directory */

/* add_servers gives `ev` its servers: the endpoint, or N local ones. */
static int add_servers(lt_eval_t *ev) {
  if (endpoint != NULL) return lt_eval_add_host(ev, endpoint);
  int rc = lt_eval_set(ev, "modules", modules_dir);
  return rc != LT_OK ? rc : lt_eval_spawn_local(ev, nspawn);
}

static void expected(int i, char *buf, size_t size) {
  char text[32];
  int n = snprintf(text, sizeof text, "task-%d", i);
  for (int k = 0; k < n; k++)
    buf[k] = text[n - 1 - k];
  snprintf(buf + n, size - (size_t)n, "!");
}

static int same(const lt_buf_t *b, const char *want) {
  return lt_buf_error(b) == LT_OK && lt_buf_len(b) == strlen(want) &&
         memcmp(lt_buf_data(b), want, strlen(want)) == 0;
}

static void run_pipeline(void) {
  lt_eval_t *ev = NULL;
  lt_future_t *fut = NULL;
  lt_buf_t *b = NULL;
  char text[32], want[40];
  lt_skel_t *prog =
      lt_pipeline(lt_farm(lt_seq("itest:rev")), lt_seq_with("itest:tag", "!", 1), NULL);
  CHECK(prog != NULL, "cannot build the program");
  if (prog == NULL) return;
  CALL(lt_eval_new(&ev, prog));
  CALL(add_servers(ev));
  CALL(lt_eval_start(ev));
  for (int i = 0; i < NTASKS; i++) {
    int n = snprintf(text, sizeof text, "task-%d", i);
    CALL(lt_eval_submit(ev, text, (size_t)n, NULL));
  }
  CALL(lt_eval_submit(ev, "task-1000", 9, &fut));
  CALL(lt_eval_close(ev));
  for (int i = 0; i < NTASKS; i++) {
    CALL(lt_eval_next(ev, &b));
    expected(i, want, sizeof want);
    CHECK(same(b, want), "result %d: got '%.*s' (error %d: %s), want '%s'", i, (int)lt_buf_len(b),
          (const char *)lt_buf_data(b), lt_buf_error(b), lt_buf_errmsg(b), want);
    lt_buf_free(b);
    b = NULL;
  }
  int rc = lt_eval_next(ev, &b);
  CHECK(rc == LT_ECLOSED, "lt_eval_next after the last result: %s, want LT_ECLOSED",
        lt_strerror(rc));
  lt_buf_free(b);
  b = NULL;
  CALL(lt_future_wait(fut, 30000, &b));
  expected(1000, want, sizeof want);
  CHECK(same(b, want), "future result: got '%.*s', want '%s'", (int)lt_buf_len(b),
        (const char *)lt_buf_data(b), want);
out:
  lt_buf_free(b);
  lt_future_release(fut);
  lt_eval_free(ev);
}

static void run_failing(void) {
  lt_eval_t *ev = NULL;
  lt_buf_t *b = NULL;
  CALL(lt_eval_new(&ev, lt_seq("itest:fail")));
  CALL(add_servers(ev));
  CALL(lt_eval_start(ev));
  CALL(lt_eval_submit(ev, "x", 1, NULL));
  CALL(lt_eval_close(ev));
  CALL(lt_eval_next(ev, &b));
  CHECK(lt_buf_error(b) != LT_OK, "itest:fail gave no error");
  CHECK(strstr(lt_buf_errmsg(b), "called on 1 input(s)") != NULL,
        "error message '%s' lacks the kernel's text", lt_buf_errmsg(b));
out:
  lt_buf_free(b);
  lt_eval_free(ev);
}

int main(int argc, char **argv) {
  if (argc == 2) {
    endpoint = argv[1];
  } else if (argc == 4 && strcmp(argv[1], "--spawn") == 0 && atoi(argv[2]) > 0) {
    nspawn = atoi(argv[2]);
    modules_dir = argv[3];
  } else {
    fprintf(stderr, "usage: %s tcp://HOST:PORT | --spawn N MODULES_DIR\n", argv[0]);
    return 2;
  }
  run_pipeline();
  run_failing();
  if (failures == 0)
    printf("itest_client: ok (%d tasks, one future, one failing kernel; %s)\n", NTASKS + 1,
           endpoint != NULL ? "running server" : "spawned servers");
  return failures == 0 ? 0 : 1;
}
