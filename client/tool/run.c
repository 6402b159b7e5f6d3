/* run.c: `lithium run` (run.h). Each input is submitted with a future of its own, so a
 * result is always matched with its file whatever `ordered` says; a sliding window of
 * submitted tasks keeps the servers busy while results are written in input order, and
 * bounds the memory held (task count and input bytes). A program that reduces its stream
 * (pipe(..., reduce(m:c))) has one result, written to stdout. Main thread only; the evaluator runs
 * its own dispatcher thread. */
#include "run.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "progress.h"

/* Input bytes submitted and not yet written, beyond which no further task is read. */
#define MAX_INFLIGHT_BYTES ((size_t)256 << 20)

/* The local servers started when neither --hosts nor --servers nor --local is given. */
#define DEFAULT_SERVERS 2

typedef struct slot {
  lt_future_t *f; /* NULL when the task could not be submitted */
  size_t bytes;
} slot_t;

typedef struct run {
  const lt_cli_t *cli;
  lt_eval_t *ev;
  lt_input_t *ins;
  slot_t *slots;
  size_t n, window;
  size_t submitted, done, failed;
  size_t inflight_bytes;
  int stdout_tty;
  lt_progress_t progress;
} run_t;

/* report writes "lithium: ..." on stderr, first erasing the progress line. */
__attribute__((format(printf, 2, 3))) static void report(run_t *r, const char *fmt, ...) {
  lt__progress_clear(&r->progress);
  fputs("lithium: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* setup creates the evaluator, applies the options and starts the servers (or the
 * sequential evaluator). Returns -1 when ready, else the exit status. */
static int setup(run_t *r, lt_skel_t *program) {
  const lt_cli_t *cli = r->cli;
  int rc = lt_eval_new(&r->ev, program);
  if (rc != LT_OK) {
    report(r, "%s", lt_last_error());
    return rc == LT_EINVAL ? LT_EXIT_USAGE : LT_EXIT_FAILED;
  }
  for (size_t i = 0; i < cli->nopts; i++) {
    rc = lt_eval_set(r->ev, cli->opts[i].key, cli->opts[i].value);
    if (rc != LT_OK) {
      report(r, "option %s: %s", cli->opts[i].flag, lt_strerror(rc));
      return LT_EXIT_USAGE;
    }
  }
  for (size_t i = 0; i < cli->nhosts; i++) {
    rc = lt_eval_add_host(r->ev, cli->hosts[i]);
    if (rc != LT_OK) {
      report(r, "--hosts: bad endpoint '%s' (expected tcp://host:port)", cli->hosts[i]);
      return LT_EXIT_USAGE;
    }
  }
  if (cli->hosts_file != NULL && (rc = lt_eval_set(r->ev, "hosts", cli->hosts_file)) != LT_OK) {
    report(r, "--hosts-file: %s", lt_strerror(rc));
    return LT_EXIT_USAGE;
  }
  if (cli->local) {
    rc = lt_eval_run_local(r->ev);
    if (rc != LT_OK) report(r, "cannot run the sequential evaluator: %s", lt_eval_error(r->ev));
    return rc == LT_OK ? -1 : LT_EXIT_FAILED;
  }
  /* Local servers by default only when no servers are named anywhere. */
  int named = cli->nhosts > 0 || cli->hosts_file != NULL || getenv("LITHIUM_HOSTS") != NULL;
  for (size_t i = 0; i < cli->nopts; i++)
    named |= strcmp(cli->opts[i].key, "hosts") == 0;
  int spawn = cli->servers > 0 ? cli->servers : named ? 0 : DEFAULT_SERVERS;
  if (spawn > 0 && (rc = lt_eval_spawn_local(r->ev, spawn)) != LT_OK) {
    report(r, "cannot start %d local server%s: %s", spawn, spawn == 1 ? "" : "s",
           lt_eval_error(r->ev));
    return LT_EXIT_FAILED;
  }
  rc = lt_eval_start(r->ev);
  if (rc != LT_OK) {
    report(r, "cannot start the evaluator: %s (%s)", lt_eval_error(r->ev), lt_strerror(rc));
    return LT_EXIT_FAILED;
  }
  return -1;
}

/* submit_next reads the next input and submits it. A read or submit failure fails that
 * task only (its slot stays without future). */
static void submit_next(run_t *r) {
  size_t i = r->submitted++;
  slot_t *s = &r->slots[i];
  void *data;
  size_t len;
  char err[512];
  if (lt__files_read(&r->ins[i], &data, &len, err, sizeof err) != 0) {
    report(r, "%s", err);
    return;
  }
  int rc = lt_eval_submit(r->ev, data, len, &s->f);
  free(data);
  if (rc != LT_OK) {
    report(r, "%s: %s", r->ins[i].name, lt_strerror(rc));
    s->f = NULL;
    return;
  }
  s->bytes = len;
  r->inflight_bytes += len;
}

/* finish_next waits up to `timeout_ms` for the oldest unwritten task and writes its result.
 * Returns 1 when it was handled, 0 on timeout, -1 when the run cannot go on (stdout
 * failed). */
static int finish_next(run_t *r, int timeout_ms) {
  slot_t *s = &r->slots[r->done];
  const lt_input_t *in = &r->ins[r->done];
  int status = 1;
  if (s->f == NULL) {
    r->failed++; /* reported when it was submitted */
  } else {
    lt_buf_t *b = NULL;
    int rc = lt_future_wait(s->f, timeout_ms, &b);
    if (rc == LT_ETIMEDOUT) return 0;
    lt_future_release(s->f);
    s->f = NULL;
    r->inflight_bytes -= s->bytes;
    if (rc == LT_OK && b == NULL) rc = LT_ENOMEM;
    if (rc == LT_OK && lt_buf_error(b) != LT_OK) rc = lt_buf_error(b);
    if (rc != LT_OK) {
      const char *msg = b != NULL ? lt_buf_errmsg(b) : "";
      report(r, "%s: %s", in->name, msg[0] != '\0' ? msg : lt_strerror(rc));
      r->failed++;
    } else {
      char err[512];
      if (in->out_path == NULL && r->stdout_tty) lt__progress_clear(&r->progress);
      int e = lt__files_write(in, lt_buf_data(b), lt_buf_len(b), err, sizeof err);
      /* --sep, --lines: after each result written to stdout (a failed task writes none). */
      if (e == 0 && in->out_path == NULL && r->cli->sep != NULL)
        e = lt__files_write_stdout(r->cli->sep, r->cli->seplen, err, sizeof err);
      if (e != 0) {
        /* A reader that went away (`lithium run ... | head`) is no news to anyone. */
        if (e != EPIPE) report(r, "%s", err);
        r->failed++;
        if (in->out_path == NULL) status = -1;
      }
    }
    lt_buf_free(b);
  }
  r->done++;
  return status;
}

/* drive_reduce runs a program that reduces its stream: every input is submitted (the
 * evaluator's max_pending bounds what is held), and the one result goes to stdout. An input
 * that cannot be read or submitted stops the run: a result without it would be wrong.
 * Returns 0, or -1 when it stopped early. */
static int drive_reduce(run_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    void *data;
    size_t len;
    char err[512];
    if (lt__files_read(&r->ins[i], &data, &len, err, sizeof err) != 0) {
      report(r, "%s", err);
      r->failed++;
      return -1;
    }
    int rc = lt_eval_submit(r->ev, data, len, NULL);
    free(data);
    if (rc != LT_OK) {
      report(r, "%s: %s", r->ins[i].name, lt_strerror(rc));
      r->failed++;
      return -1;
    }
    lt__progress_update(&r->progress, i, 0, 0);
  }
  lt_eval_close(r->ev);
  lt_buf_t *b = NULL;
  int rc = lt_eval_next(r->ev, &b);
  if (rc == LT_ECLOSED) return 0; /* no input: nothing to reduce */
  if (rc == LT_OK && lt_buf_error(b) != LT_OK) rc = lt_buf_error(b);
  char err[512] = "";
  if (rc == LT_OK && lt__files_write_stdout(lt_buf_data(b), lt_buf_len(b), err, sizeof err) != 0)
    rc = LT_EIO;
  if (rc != LT_OK) {
    const char *msg = err[0] != '\0' ? err : b != NULL ? lt_buf_errmsg(b) : "";
    report(r, "reduce: %s", msg[0] != '\0' ? msg : lt_strerror(rc));
    r->failed++;
  } else if (r->cli->sep != NULL &&
             lt__files_write_stdout(r->cli->sep, r->cli->seplen, err, sizeof err) != 0) {
    report(r, "%s", err);
    r->failed++;
  }
  lt_buf_free(b);
  r->done = r->n;
  return rc == LT_OK ? 0 : -1;
}

/* drive runs the window until every task is written or the run cannot go on. Returns 0,
 * or -1 when it stopped early. */
static int drive(run_t *r) {
  while (r->done < r->n) {
    while (r->submitted < r->n && r->submitted - r->done < r->window &&
           (r->inflight_bytes < MAX_INFLIGHT_BYTES || r->submitted == r->done))
      submit_next(r);
    int rc = finish_next(r, r->progress.f != NULL ? 100 : -1);
    if (rc < 0) return -1;
    lt__progress_update(&r->progress, r->done, r->failed, 0);
  }
  return 0;
}

int lt__run(const lt_cli_t *cli, lt_skel_t *program, size_t window) {
  run_t r = {.cli = cli, .n = cli->nfiles, .window = window > 0 ? window : 1};
  lt__progress_init(&r.progress, NULL, r.n);
  int status = lt__files_plan(&r.ins, cli->files, cli->nfiles, cli->out_dir);
  if (status != LT_EXIT_OK) {
    lt_skel_free(program);
    return status;
  }
  int reduces = lt_skel_reduces(program);
  if (reduces && cli->out_dir != NULL) {
    lt_skel_free(program);
    lt__files_free(r.ins, r.n);
    report(&r, "--out: this program reduces its inputs to one result, which goes to stdout");
    return LT_EXIT_USAGE;
  }
  r.slots = calloc(r.n, sizeof *r.slots);
  if (r.slots == NULL) {
    lt_skel_free(program);
    lt__files_free(r.ins, r.n);
    report(&r, "out of memory");
    return LT_EXIT_FAILED;
  }
  status = setup(&r, program);
  if (status < 0) {
    r.stdout_tty = cli->out_dir == NULL && isatty(STDOUT_FILENO);
    lt__progress_init(&r.progress, isatty(STDERR_FILENO) ? stderr : NULL, r.n);
    int stopped = reduces ? drive_reduce(&r) : drive(&r);
    lt_eval_close(r.ev);
    if (stopped == 0) lt__progress_end(&r.progress, r.done, r.failed);
    if (fflush(stdout) != 0) {
      if (errno != EPIPE) report(&r, "stdout: %s", strerror(errno));
      stopped = -1;
    }
    if (cli->stats) {
      char *json = NULL;
      if (lt_eval_stats_json(r.ev, &json) == LT_OK) {
        lt__progress_clear(&r.progress);
        fprintf(stderr, "%s\n", json);
      }
      free(json);
    }
    status = stopped == 0 && r.failed == 0 ? LT_EXIT_OK : LT_EXIT_FAILED;
  }
  lt_eval_free(r.ev);
  for (size_t i = 0; i < r.n; i++)
    lt_future_release(r.slots[i].f);
  free(r.slots);
  lt__files_free(r.ins, r.n);
  return status;
}
