/* run.c: one streaming pass of imgpipe (run.h). The feeder thread loads (a file's bytes, or a
 * synthetic image's pixels) and submits; the
 * caller's thread reads results in submission order and writes or checks them. The two share
 * a ring of the images between submit and result, under one lock; messages from both go
 * through the progress bar's lock. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "imgtoken.h"
#include "pngfile.h"
#include "progress.h"
#include "run.h"

#define MAX_INFLIGHT_BYTES (256u << 20)

typedef struct run {
  lt_eval_t *ev;
  const img_inputs_t *l;
  img_run_kind_t kind;
  unsigned char *status;
  img_progress_t progress;

  pthread_mutex_t mu;           /* guards the fields below */
  pthread_cond_t cv;            /* a slot was freed, or stop was set */
  size_t ring[IMG_RUN_WINDOW];  /* image of submitted task k, at k % IMG_RUN_WINDOW */
  size_t bytes[IMG_RUN_WINDOW]; /* its token size */
  size_t submitted, consumed, inflight_bytes;
  size_t load_failed;
  int stop;    /* the reader gave up: submit no more */
  int feed_rc; /* first lt_eval_submit / lt_eval_close error */
} run_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* take reports whether image i is part of this pass. */
static int take(const run_t *r, size_t i) {
  return r->kind == IMG_RUN_WRITE || r->status[i] == IMG_WRITTEN;
}

/* reserve waits for room for a token of len bytes and records image i as the next submitted
 * task. Returns 0, or -1 when the reader stopped the pass. */
static int reserve(run_t *r, size_t i, size_t len) {
  pthread_mutex_lock(&r->mu);
  /* One image is always allowed in, however large, or the pass could never end. */
  while (!r->stop && (r->submitted - r->consumed >= IMG_RUN_WINDOW ||
                      (r->inflight_bytes > 0 && r->inflight_bytes + len > MAX_INFLIGHT_BYTES)))
    pthread_cond_wait(&r->cv, &r->mu);
  int rc = r->stop ? -1 : 0;
  if (rc == 0) {
    r->ring[r->submitted % IMG_RUN_WINDOW] = i;
    r->bytes[r->submitted % IMG_RUN_WINDOW] = len;
    r->submitted++;
    r->inflight_bytes += len;
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

/* unreserve takes back the last reservation, whose submit failed: no result will come. */
static void unreserve(run_t *r, size_t len) {
  pthread_mutex_lock(&r->mu);
  r->submitted--;
  r->inflight_bytes -= len;
  pthread_mutex_unlock(&r->mu);
}

/* fail_load records an image that never reached the evaluator. */
static void fail_load(run_t *r, size_t i) {
  if (r->kind == IMG_RUN_WRITE) r->status[i] = IMG_FAILED;
  pthread_mutex_lock(&r->mu);
  r->load_failed++;
  pthread_mutex_unlock(&r->mu);
  img_progress_step(&r->progress, 1);
}

/* feed runs on its own thread: it must not wait for results itself, since lt_eval_submit
 * blocks while `max_pending` tasks are unfinished. */
static void *feed(void *p) {
  run_t *r = p;
  const img_inputs_t *l = r->l;
  for (size_t i = 0; i < l->n; i++) {
    if (!take(r, i)) continue;
    unsigned char *data = NULL;
    size_t len = 0;
    char err[512];
    if (img_inputs_load(l, i, &data, &len, err, sizeof err) != 0) {
      img_progress_say(&r->progress, "%s: %s", l->v[i].name, err);
      fail_load(r, i);
      continue;
    }
    if (reserve(r, i, len) != 0) {
      free(data);
      break;
    }
    int rc = lt_eval_submit(r->ev, data, len, NULL);
    free(data);
    if (rc != LT_OK) {
      unreserve(r, len);
      img_progress_say(&r->progress, "%s: lt_eval_submit: %s", l->v[i].name, lt_strerror(rc));
      fail_load(r, i);
      r->feed_rc = rc;
      break;
    }
  }
  int rc = lt_eval_close(r->ev);
  if (rc != LT_OK) {
    img_progress_say(&r->progress, "lt_eval_close: %s", lt_strerror(rc));
    if (r->feed_rc == LT_OK) r->feed_rc = rc;
  }
  return NULL;
}

/* tally counts the outcome rc of writing (0 or -1) or checking (0, 1 differs, -1) image `in`,
 * printing err when it is not 0. Returns 1 when the image failed. */
static int tally(run_t *r, const img_input_t *in, int rc, const char *err, img_run_result_t *res) {
  if (rc == 0) {
    res->ok++;
    return 0;
  }
  if (r->kind == IMG_RUN_WRITE) {
    img_progress_say(&r->progress, "%s: %s", in->name, err);
    res->failed++;
    return 1;
  }
  img_progress_say(&r->progress, "verify: %s: %s%s", in->name, rc > 0 ? "DIFFERS: " : "", err);
  if (rc > 0)
    res->differed++;
  else
    res->failed++;
  return 1;
}

/* finish_pixels writes or checks the result of a synthetic image: a token, written as a PNG
 * here. Returns 1 when the image failed. */
static int finish_pixels(run_t *r, const img_input_t *in, const lt_buf_t *b,
                         img_run_result_t *res) {
  const char *pass = r->kind == IMG_RUN_VERIFY ? "verify: " : "";
  const unsigned char *data = lt_buf_data(b);
  size_t len = lt_buf_len(b);
  uint32_t w, h, c;
  char err[512];
  if (img_token_check(data, len, &w, &h, &c, err, sizeof err) != 0) {
    img_progress_say(&r->progress, "%s%s: bad result: %s", pass, in->name, err);
    res->failed++;
    return 1;
  }
  int rc = r->kind == IMG_RUN_WRITE ? img_png_write(in->out_path, data, len, err, sizeof err)
                                    : img_png_compare(in->out_path, data, len, err, sizeof err);
  return tally(r, in, rc, err, res);
}

/* finish_file writes or checks the result of a file: the PNG file's bytes, encoded by the
 * servers (imgcodec:encode). Returns 1 when the image failed. */
static int finish_file(run_t *r, const img_input_t *in, const lt_buf_t *b, img_run_result_t *res) {
  static const unsigned char png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const char *pass = r->kind == IMG_RUN_VERIFY ? "verify: " : "";
  const unsigned char *data = lt_buf_data(b);
  size_t len = lt_buf_len(b);
  char err[512];
  if (len < sizeof png_signature || memcmp(data, png_signature, sizeof png_signature) != 0) {
    img_progress_say(&r->progress, "%s%s: bad result: not a PNG file (%zu bytes)", pass, in->name,
                     len);
    res->failed++;
    return 1;
  }
  int rc = r->kind == IMG_RUN_WRITE ? img_file_write(in->out_path, data, len, err, sizeof err)
                                    : img_file_compare(in->out_path, data, len, err, sizeof err);
  return tally(r, in, rc, err, res);
}

/* finish handles the result of image i: writes or checks it. Returns 1 when the image
 * failed. */
static int finish(run_t *r, size_t i, const lt_buf_t *b, img_run_result_t *res) {
  const img_input_t *in = &r->l->v[i];
  if (lt_buf_error(b) != LT_OK) {
    const char *msg = lt_buf_errmsg(b);
    img_progress_say(&r->progress, "%s%s: %s", r->kind == IMG_RUN_VERIFY ? "verify: " : "",
                     in->name, msg[0] != '\0' ? msg : lt_strerror(lt_buf_error(b)));
    res->failed++;
    return 1;
  }
  return in->path != NULL ? finish_file(r, in, b, res) : finish_pixels(r, in, b, res);
}

/* drain reads every result; returns the lt_eval_next status that ended it. */
static int drain(run_t *r, img_run_result_t *res) {
  int rc;
  lt_buf_t *b = NULL;
  while ((rc = lt_eval_next(r->ev, &b)) == LT_OK) {
    pthread_mutex_lock(&r->mu);
    size_t k = r->consumed;
    int known = k < r->submitted;
    size_t i = r->ring[k % IMG_RUN_WINDOW], len = r->bytes[k % IMG_RUN_WINDOW];
    pthread_mutex_unlock(&r->mu);
    if (!known) { /* results come only for submitted tasks: the evaluator broke its contract */
      lt_buf_free(b);
      img_progress_say(&r->progress, "a result came for a task never submitted");
      return LT_ESTATE;
    }
    int failed = finish(r, i, b, res);
    lt_buf_free(b);
    if (r->kind == IMG_RUN_WRITE) r->status[i] = failed ? IMG_FAILED : IMG_WRITTEN;
    pthread_mutex_lock(&r->mu);
    r->consumed++;
    r->inflight_bytes -= len;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    img_progress_step(&r->progress, failed);
  }
  return rc;
}

int img_run(lt_eval_t *ev, const img_inputs_t *l, img_run_kind_t kind, unsigned char *status,
            img_run_result_t *res) {
  *res = (img_run_result_t){0};
  run_t *r = calloc(1, sizeof *r);
  if (r == NULL) {
    fprintf(stderr, "imgpipe: out of memory\n");
    return -1;
  }
  *r = (run_t){.ev = ev, .l = l, .kind = kind, .status = status};
  for (size_t i = 0; i < l->n; i++)
    res->images += take(r, i);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  img_progress_init(&r->progress, res->images);
  double t0 = now_s();
  pthread_t th;
  int rc = -1;
  if (pthread_create(&th, NULL, feed, r) != 0) {
    fprintf(stderr, "imgpipe: cannot start the feeder thread\n");
    lt_eval_close(ev);
  } else {
    int next_rc = drain(r, res);
    if (next_rc != LT_ECLOSED) {
      /* The feeder may wait for a slot that no result will free. */
      pthread_mutex_lock(&r->mu);
      r->stop = 1;
      pthread_cond_broadcast(&r->cv);
      pthread_mutex_unlock(&r->mu);
      if (next_rc != LT_ESTATE)
        img_progress_say(&r->progress, "lt_eval_next: %s", lt_strerror(next_rc));
    }
    pthread_join(th, NULL);
    res->failed += r->load_failed;
    rc = next_rc == LT_ECLOSED && r->feed_rc == LT_OK ? 0 : -1;
  }
  res->seconds = now_s() - t0;
  img_progress_end(&r->progress);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
  return rc;
}
