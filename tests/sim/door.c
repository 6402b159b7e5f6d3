/* door.c: the evaluator's side of the dispatcher in the simulator (backend.h's door,
 * lt_eval_door_t): it hands out the tasks of the waves submitted so far and judges every
 * delivered result at once against what the sequential evaluator (client/local.c, run
 * first through the same door) made of the same task. A task ends exactly once, with that
 * result, or with an error its own kernel caused (the expected one); a fault may cost a
 * task only once its retries could have run out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "buf.h"
#include "sim.h"

struct sim_door {
  sim_world_t *w;
  const sim_prog_t *p;
  lt_task_t *intake, *tail;
  uint32_t submitted; /* tasks made so far (waves) */
  lt_buf_t **expected;
  uint8_t *done;
  uint64_t delivered;
  int expecting; /* the sequential evaluator's run: it stops once the intake is empty */
  int stop;
};

static sim_door_t *D(lt_eval_t *ev) {
  return (sim_door_t *)(void *)ev;
}

static void push(sim_door_t *d, uint32_t i) {
  lt_task_t *t = calloc(1, sizeof *t);
  t->seq = i;
  t->stream_seq = i;
  t->input = lt__value_ref(d->p->inputs[i]);
  if (d->tail != NULL)
    d->tail->next = t;
  else
    d->intake = t;
  d->tail = t;
}

static lt_task_t *take(lt_eval_t *ev, size_t max) {
  sim_door_t *d = D(ev);
  lt_task_t *head = d->intake, *last = NULL;
  size_t n = 0;
  for (lt_task_t *t = head; t != NULL && n < max; t = t->next, n++)
    last = t;
  if (last == NULL) return NULL;
  d->intake = last->next;
  if (d->intake == NULL) d->tail = NULL;
  last->next = NULL;
  return head;
}

/* judge checks the result of task t. */
static void judge(sim_door_t *d, const lt_task_t *t) {
  sim_world_t *w = d->w;
  const lt_buf_t *got = t->result, *want = d->expected[t->seq];
  if (got == NULL) {
    sim_violation(w, "task %llu delivered without a result", (unsigned long long)t->seq);
    return;
  }
  if (want->value != NULL && got->value != NULL) {
    if (want->value->len != got->value->len ||
        memcmp(want->value->data, got->value->data, want->value->len) != 0)
      sim_violation(w, "task %llu: a result of %zu bytes, not the sequential evaluator's %zu",
                    (unsigned long long)t->seq, got->value->len, want->value->len);
    return;
  }
  if (got->value == NULL && want->value == NULL && got->err == want->err) return;
  /* A poison or slow task fails of its own kernel: a crash, or its deadline. */
  int own = (d->p->poison[t->seq] || d->p->slow[t->seq]) && got->value == NULL;
  if (own && (got->err == LT_ECRASH || got->err == LT_ETIMEDOUT)) return;
  /* Faults may have used up a task's retries: only then is a loss its result. A deadline
   * missed on a paused server, or behind a stalled link, counts as a try (the client cannot
   * tell a late server from a slow kernel), so a run of such faults may end a task with
   * LT_ETIMEDOUT too. */
  int fault = got->err == LT_ELOST || got->err == LT_ENOSERVER || got->err == LT_ETIMEDOUT;
  if (got->value == NULL && fault && w->faults > w->max_retries) {
    sim_note(w, "task %llu lost after %llu faults (max_retries %u): %s", (unsigned long long)t->seq,
             (unsigned long long)w->faults, w->max_retries, got->errmsg);
    return;
  }
  if (got->value == NULL)
    sim_violation(w, "task %llu failed with %s (%s); the sequential evaluator: %s",
                  (unsigned long long)t->seq, lt_strerror(got->err), got->errmsg,
                  want->value != NULL ? "a result" : want->errmsg);
  else
    sim_violation(w, "task %llu has a result; the sequential evaluator failed it: %s",
                  (unsigned long long)t->seq, want->errmsg);
}

static void deliver(lt_eval_t *ev, lt_task_t *done, int sync) {
  (void)sync;
  sim_door_t *d = D(ev);
  while (done != NULL) {
    lt_task_t *t = done;
    done = t->next;
    if (t->seq >= d->p->ntasks) {
      sim_violation(d->w, "a result for task %llu, never submitted", (unsigned long long)t->seq);
    } else if (d->expecting) {
      d->expected[t->seq] = t->result;
      t->result = NULL;
    } else if (d->done[t->seq]++) {
      sim_violation(d->w, "task %llu ended twice", (unsigned long long)t->seq);
    } else {
      d->delivered++;
      judge(d, t);
    }
    lt__task_free(t);
  }
}

static void woken(lt_eval_t *ev) {
  (void)ev;
}

static int await_wake(lt_eval_t *ev) {
  (void)ev;
  return 0;
}

static int stopping(lt_eval_t *ev) {
  sim_door_t *d = D(ev);
  return d->expecting ? d->intake == NULL : d->stop;
}

static int input_closed(lt_eval_t *ev) {
  sim_door_t *d = D(ev);
  return d->intake == NULL && d->submitted == d->p->ntasks;
}

static long hosts(lt_eval_t *ev, lt_host_t **out) {
  sim_world_t *w = D(ev)->w;
  lt_host_t *h = calloc(w->nhosts, sizeof *h);
  for (uint32_t i = 0; i < w->nhosts; i++)
    h[i] = (lt_host_t){.endpoint = strdup(w->eps[i]), .fd = -1, .gone = w->gone[i]};
  *out = h;
  return (long)w->nhosts;
}

static void hosts_free(lt_host_t *h, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(h[i].endpoint);
  free(h);
}

static int poll_hosts(lt_eval_t *ev, int64_t now_ms) {
  (void)now_ms;
  return sim_hosts_poll(D(ev)->w);
}

static void host_answered(lt_eval_t *ev, int ready) {
  (void)ev;
  (void)ready;
}

static void host_auth_failed(lt_eval_t *ev) {
  (void)ev;
}

/* A simulated server always has the program's modules. */
static void host_lacks(lt_eval_t *ev, const char *endpoint, const char *modules) {
  (void)ev;
  (void)endpoint;
  (void)modules;
}

const lt_eval_door_t sim_door_calls = {
    .take = take,
    .deliver = deliver,
    .woken = woken,
    .await_wake = await_wake,
    .stopping = stopping,
    .input_closed = input_closed,
    .hosts = hosts,
    .hosts_free = hosts_free,
    .poll_hosts = poll_hosts,
    .host_answered = host_answered,
    .host_auth_failed = host_auth_failed,
    .host_lacks = host_lacks,
};

sim_door_t *sim_door_new(sim_world_t *w, const sim_prog_t *p) {
  sim_door_t *d = calloc(1, sizeof *d);
  d->w = w;
  d->p = p;
  d->expected = calloc(p->ntasks, sizeof *d->expected);
  d->done = calloc(p->ntasks, 1);
  return d;
}

void sim_door_free(sim_door_t *d) {
  if (d == NULL) return;
  while (d->intake != NULL) {
    lt_task_t *t = d->intake;
    d->intake = t->next;
    lt__task_free(t);
  }
  for (uint32_t i = 0; i < d->p->ntasks; i++)
    lt_buf_free(d->expected[i]);
  free(d->expected);
  free(d->done);
  free(d);
}

int sim_expect(sim_door_t *d, const lt_template_t *t, const lt_options_t *o) {
  lt_backend_env_t env = {
      .ev = (lt_eval_t *)(void *)d, .door = &sim_door_calls, .opts = o, .tmpl = t, .wake_fd = -1};
  void *l = NULL;
  int rc = lt__local_backend.create(&l, &env);
  if (rc != LT_OK) return rc;
  d->expecting = 1;
  for (uint32_t i = 0; i < d->p->ntasks; i++)
    push(d, i);
  lt__local_backend.run(l);
  lt__local_backend.destroy(l);
  d->expecting = 0;
  for (uint32_t i = 0; i < d->p->ntasks; i++)
    if (d->expected[i] == NULL) return LT_ESTATE;
  return LT_OK;
}

void sim_door_submit(sim_door_t *d, uint32_t k) {
  uint32_t upto = (uint32_t)((uint64_t)d->p->ntasks * (k + 1) / d->p->waves);
  while (d->submitted < upto)
    push(d, d->submitted++);
}

uint64_t sim_door_delivered(const sim_door_t *d) {
  return d->delivered;
}

int sim_door_waiting(const sim_door_t *d) {
  return d->intake != NULL;
}

void sim_door_stop(sim_door_t *d) {
  d->stop = 1;
}
