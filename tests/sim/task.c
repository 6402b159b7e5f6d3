/* task.c: the simulated server's tasks once taken in (execute.c), as task.c of the server:
 * parked until their inputs exist, queued, run at most the threads and the session's window
 * at once, and finished into one DONE each (a pack: its members' completions as one entry)
 * with the outputs stored (kept) and returned (asked for, or small); a member over its
 * deadline is answered then, a poison input crashes the server. Inputs of the last reader
 * go once it ran; a cancelled or stopped one keeps them for its retry. The kernels run for
 * real (lt__exec_run), in no time; the time they take is virtual: their cost times a
 * jitter, over the server's speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "server.h"
#include "codec.h"

/* ---- tasks ---------------------------------------------------------------------------------- */

void sv_task_free(stask_t *t) {
  for (uint32_t i = 0; i < t->nst; i++)
    lt__value_unref(t->param[i]);
  for (uint32_t i = 0; i < t->nin; i++)
    lt__value_unref(t->in[i].val);
  if (t->res != NULL)
    for (uint32_t i = 0; i < (t->pack > 1 ? t->pack : 1); i++)
      lt__exec_result_clear(&t->res[i]);
  free(t->res);
  free(t->in);
  free(t->outs);
  free(t);
}

void sv_task_unlink(sim_server_t *v, stask_t *t) {
  for (stask_t **p = &v->tasks; *p != NULL; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      return;
    }
}

/* unread lets go of input i: a copy loses a reader; the last reader's local value goes. */
static void unread(sim_server_t *v, stask_t *t, uint32_t i, int release) {
  sin_t *in = &t->in[i];
  if (in->kind != LT_INPUT_REF) return;
  sval_t *e = sv_find(v, in->id);
  if (in->holder >= 0) {
    if (e != NULL && e->copy && e->readers > 0 && --e->readers == 0) sv_drop(v, e);
  } else if (release && e != NULL) {
    sv_drop(v, e);
  }
}

/* One member's outcome, to be sent. */
typedef struct outc {
  int status;
  int keep; /* it never ran: its inputs stay for its retry */
  char err[ERRLEN];
} outc_t;

/* complete sends t's completions (one DONE) with outcome o[i] per member (ran: from its
 * results), stores or fails its outputs, lets go of its inputs and frees it. */
static void sv_complete(sim_world_t *w, sim_server_t *v, stask_t *t, outc_t *o, int ran) {
  /* What its outputs wake is looked at once it is sent (recheck). */
  int outer = !v->in_recheck;
  v->in_recheck = 1;
  uint32_t k = sv_members(t), n_in = t->nin / k;
  sess_t *s = t->link >= 0 ? sv_session(v, t->link) : NULL;
  lt_completion_t *cp = calloc(k, sizeof *cp);
  lt_output_info_t *infos[k];
  lt_value_t **vals = NULL;
  lt_bytes_t *frames = NULL;
  uint32_t nframes = 0, capframes = 0;
  for (uint32_t i = 0; i < k; i++) {
    lt_exec_result_t *r = ran ? &t->res[i] : NULL;
    int status = o[i].status;
    const char *err = o[i].err;
    uint32_t n = status == LT_OK && r != NULL ? r->nout : 0;
    if (status == LT_OK && sv_one_output(t) && n != 1) {
      status = LT_EKERNEL;
      snprintf(o[i].err, sizeof o[i].err, "kernel made %u outputs, expected 1", n);
      n = 0;
    }
    infos[i] = calloc(n ? n : 1, sizeof *infos[i]);
    cp[i] = (lt_completion_t){.seq = t->outs[i].seq,
                              .status = status,
                              .errmsg = status == LT_OK ? "" : err,
                              .noutputs = n,
                              .outputs = infos[i],
                              .answer = -1,
                              .start_us = ran ? t->start_us : 0,
                              .service_us = ran ? (uint64_t)(w->now - (int64_t)t->start_us) : 0};
    cp[i].cpu_us = cp[i].service_us;
    if (status == LT_OK && r != NULL && lt__op(t->op)->answers) cp[i].answer = r->answer;
    if (status != LT_OK) {
      if (sv_one_output(t) && sv_kept(t)) {
        sval_t *e = sv_find(v, t->outs[i]);
        if (e != NULL && !e->copy) {
          /* Its readers see the failure first; a cancelled or stopped one then goes: the
           * client runs it again under the same id (task.c, complete). */
          sv_fail(w, v, e, status, err);
          if (status == LT_ECANCELED || status == LT_ESHUTDOWN) {
            e->doomed = 1;
            v->ndoomed++;
          }
        }
      }
      continue;
    }
    for (uint32_t j = 0; j < n; j++) {
      lt_value_t *val = lt__value_pooled(r->out[j], r->outlen[j]);
      r->out[j] = NULL;
      lt_oid_t id = {t->outs[i].client, t->outs[i].seq + j};
      if (sv_kept(t) && s != NULL) sv_set(w, v, sv_put(v, id), val);
      infos[i][j].size = val->len;
      infos[i][j].frame = -1;
      int small =
          s != NULL && s->inline_max > 0 && val->len <= s->inline_max && n <= DONE_MAX_FRAMES;
      if ((t->flags & LT_INSTR_RETURN) || small) {
        if (nframes == capframes) {
          capframes = capframes ? 2 * capframes : 8;
          vals = realloc(vals, capframes * sizeof *vals);
          frames = realloc(frames, capframes * sizeof *frames);
        }
        infos[i][j].frame = (int32_t)nframes;
        frames[nframes] = (lt_bytes_t){val->data, val->len};
        vals[nframes++] = lt__value_ref(val);
      }
      lt__value_unref(val);
    }
  }
  if (k > 1) cp[0].pack = k;
  /* Inputs: a run, or an input that failed it, lets go of them; a cancel, a stop or a cut
   * pack's member never run keeps them for the retry (copies only lose their reader). */
  int release = (t->flags & LT_INSTR_RELEASE_INPUTS) != 0;
  for (uint32_t i = 0; i < k; i++) {
    int gone = !o[i].keep;
    for (uint32_t j = i * n_in; j < i * n_in + n_in; j++)
      unread(v, t, j, release && gone);
  }
  sim_note(w, "server %d: done %llu (%s%s)%s", v->idx, ID(t->seq), lt_strerror(cp[0].status),
           k > 1 ? ", a pack" : "", s == NULL ? ", no session" : "");
  if (s != NULL && w->links[t->link]->open) {
    lt_msg_t m = {.type = LT_MSG_DONE};
    m.u.done.ncompl = k;
    m.u.done.compl = cp;
    m.frames = frames;
    m.nframes = nframes;
    m.u.done.batch = ++s->dones;
    if (w->lose_dones[v->idx] > 0) { /* a lose fault: sent, never arrives */
      w->lose_dones[v->idx]--;
      sim_note(w, "server %d: done %llu lost on the way", v->idx,
               (unsigned long long)m.u.done.batch);
    } else {
      sv_send(w, v, t->link, &m, vals);
    }
  }
  for (uint32_t i = 0; i < nframes; i++)
    lt__value_unref(vals[i]);
  for (uint32_t i = 0; i < k; i++)
    free(infos[i]);
  free(vals);
  free(frames);
  free(cp);
  sv_task_unlink(v, t);
  sv_task_free(t);
  if (outer) {
    v->in_recheck = 0;
    sv_recheck(w, v);
  }
}

/* fail_all completes every member of t with one status. */
void sv_fail_all(sim_world_t *w, sim_server_t *v, stask_t *t, int status, const char *err) {
  uint32_t k = sv_members(t);
  outc_t *o = calloc(k, sizeof *o);
  for (uint32_t i = 0; i < k; i++) {
    o[i].status = status;
    o[i].keep = status == LT_ECANCELED || status == LT_ESHUTDOWN;
    sv_set_err(o[i].err, sizeof o[i].err, err);
  }
  sv_complete(w, v, t, o, 0);
  free(o);
}

typedef struct fin {
  int srv;
  uint64_t gen, tid;
  uint32_t member; /* on_deadline: the member over it */
} fin_t;

static stask_t *by_tid(sim_server_t *v, uint64_t tid) {
  for (stask_t *t = v->tasks; t != NULL; t = t->next)
    if (t->tid == tid) return t;
  return NULL;
}

static void on_finish(sim_world_t *w, void *arg) {
  fin_t *f = arg;
  sim_server_t *v = sv_of(w, f->srv);
  if (!v->up || v->gen != f->gen || w->tearing) {
    free(f);
    return;
  }
  if (w->now < v->paused_until) { /* a stopped process finishes nothing */
    sim_at(w, v->paused_until, on_finish, f);
    return;
  }
  stask_t *t = by_tid(v, f->tid);
  free(f);
  v->running--; /* its worker is free, whether or not its deadline answered it already */
  if (t == NULL) {
    sv_settle(w, v);
    return;
  }
  v->completed += sv_members(t);
  uint32_t k = sv_members(t);
  outc_t *o = calloc(k, sizeof *o);
  for (uint32_t i = 0; i < k; i++) {
    o[i].status = t->res[i].status;
    sv_set_err(o[i].err, sizeof o[i].err, t->res[i].errmsg);
  }
  if (t->link < 0) { /* an orphan: its session is gone */
    sv_task_unlink(v, t);
    sv_task_free(t);
  } else {
    sv_complete(w, v, t, o, 1);
  }
  free(o);
  sv_settle(w, v);
}

typedef struct crash {
  int srv;
  uint64_t gen, culprit;
} crash_t;

static void on_crash(sim_world_t *w, void *arg) {
  crash_t *c = arg;
  if (!w->tearing && sim_server_up(w, c->srv) && sv_of(w, c->srv)->gen == c->gen &&
      w->now >= sv_of(w, c->srv)->paused_until)
    sim_server_crash(w, c->srv, c->culprit);
  free(c);
}

/* on_deadline: member f->member of a task ran longer than its deadline (task.c, time_out):
 * the members before it keep their results, it fails LT_ETIMEDOUT, those after it never run
 * (LT_ECANCELED, their inputs kept); its worker stays busy until the kernel returns. */
static void on_deadline(sim_world_t *w, void *arg) {
  fin_t *f = arg;
  sim_server_t *v = sv_of(w, f->srv);
  stask_t *t = v->up && v->gen == f->gen && !w->tearing ? by_tid(v, f->tid) : NULL;
  if (t != NULL && w->now < v->paused_until) { /* a stopped process times nothing */
    sim_at(w, v->paused_until, on_deadline, f);
    return;
  }
  if (t == NULL || t->state != T_RUNNING || t->link < 0) {
    free(f);
    return;
  }
  uint32_t k = sv_members(t), m = f->member;
  unsigned long long ms = (unsigned long long)(t->timeout_us / 1000);
  outc_t *o = calloc(k, sizeof *o);
  for (uint32_t i = 0; i < k; i++) {
    if (i < m) {
      o[i].status = t->res[i].status;
      sv_set_err(o[i].err, sizeof o[i].err, t->res[i].errmsg);
    } else if (i == m) {
      o[i].status = LT_ETIMEDOUT;
      snprintf(o[i].err, sizeof o[i].err, "ran longer than %llu ms (task_timeout_ms)", ms);
    } else {
      o[i].status = LT_ECANCELED;
      o[i].keep = 1;
      snprintf(o[i].err, sizeof o[i].err, "not run: member %u of its pack ran longer than %llu ms",
               m, ms);
    }
  }
  sim_note(w, "server %d: %llu over its deadline", v->idx, ID(t->seq));
  free(f);
  sv_complete(w, v, t, o, 1);
  free(o);
  sv_settle(w, v);
}

/* slow_down adds SIM_SLOW_US to each member of t whose input holds SIM_SLOW, and when a
 * member then runs longer than its deadline, schedules the deadline's answer; returns the
 * time t holds its worker. Members share the run's time evenly otherwise. */
static int64_t slow_down(sim_world_t *w, sim_server_t *v, stask_t *t, int64_t us) {
  uint32_t k = sv_members(t), n_in = t->nin / k;
  int64_t each = us / k, at = 0, total = us;
  int cut = 0;
  for (uint32_t i = 0; i < k; i++) {
    int64_t d = each;
    for (uint32_t j = i * n_in; j < i * n_in + n_in; j++) {
      const lt_value_t *val = t->in[j].val;
      if (val != NULL && memchr(val->data, SIM_SLOW, val->len) != NULL) {
        d += SIM_SLOW_US;
        total += SIM_SLOW_US;
        break;
      }
    }
    if (!cut && t->timeout_us > 0 && (uint64_t)d > t->timeout_us) {
      cut = 1;
      fin_t *f = malloc(sizeof *f);
      *f = (fin_t){v->idx, v->gen, t->tid, i};
      sim_at(w, w->now + at + (int64_t)t->timeout_us, on_deadline, f);
    }
    at += d;
  }
  return total;
}

/* scale_cost is what t's members cost in a scale run (scale.c), summed. */
static double scale_cost(sim_world_t *w, const stask_t *t, const lt_exec_stage_t *st) {
  uint32_t k = sv_members(t), n_in = t->nin / k;
  double cost = 0;
  for (uint32_t i = 0; i < k; i++) {
    lt_bytes_t in[n_in ? n_in : 1];
    for (uint32_t j = 0; j < n_in; j++) {
      lt_value_t *val = t->in[i * n_in + j].val;
      in[j] = (lt_bytes_t){val != NULL ? val->data : NULL, val != NULL ? val->len : 0};
    }
    cost += sim_scale_cost(w, st, t->kidx, t->nst, in, n_in);
  }
  w->work_run_us += cost;
  return cost;
}

/* start runs t's kernels now (their time is virtual: it finishes later). */
static void start(sim_world_t *w, sim_server_t *v, stask_t *t) {
  uint32_t k = sv_members(t), n_in = t->nin / k;
  t->state = T_RUNNING;
  t->start_us = (uint64_t)w->now;
  t->res = calloc(k, sizeof *t->res);
  v->running++;
  double cost = 0;
  lt_exec_stage_t st[MAX_STAGES];
  int missing = 0;
  for (uint32_t j = 0; j < t->nst; j++) {
    lt_value_t *p = t->param[j];
    st[j] = (lt_exec_stage_t){w->fns[t->kidx[j]], "sim", {p ? p->data : NULL, p ? p->len : 0}};
    missing |= st[j].fn == NULL;
    cost += w->kcost[t->kidx[j]];
  }
  for (uint32_t i = 0; i < k; i++) {
    lt_bytes_t in[n_in ? n_in : 1];
    size_t bytes = 0;
    for (uint32_t j = 0; j < n_in; j++) {
      lt_value_t *val = t->in[i * n_in + j].val;
      in[j] = (lt_bytes_t){val != NULL ? val->data : NULL, val != NULL ? val->len : 0};
      bytes += in[j].len;
    }
    const sin_t *bad = NULL;
    for (uint32_t j = 0; j < n_in && bad == NULL; j++)
      if (t->in[i * n_in + j].failed) bad = &t->in[i * n_in + j];
    if (missing || bad != NULL) { /* a pack's member that an input failed: alone */
      t->res[i].status = missing ? LT_ENOKERNEL : bad->failed;
      t->res[i].answer = -1;
      sv_set_err(t->res[i].errmsg, sizeof t->res[i].errmsg,
                 missing ? "kernel did not resolve" : bad->err);
      continue;
    }
    lt__exec_run(t->op, st, t->nst, in, n_in, &t->res[i]);
    cost += cost * (double)bytes / 65536.0;
  }
  for (uint32_t i = 0; w->crashy && i < k; i++) {
    int bad = 0;
    for (uint32_t j = i * n_in; j < i * n_in + n_in; j++)
      bad |= t->in[j].val != NULL && memchr(t->in[j].val->data, SIM_POISON, t->in[j].val->len);
    if (bad) {
      crash_t *c = malloc(sizeof *c);
      *c = (crash_t){v->idx, v->gen, t->outs[i].seq};
      sim_at(w, w->now + 50, on_crash, c);
      break;
    }
  }
  double jitter = 0.7 + 0.6 * (double)sim_below(&w->rng, 1000) / 1000.0;
  int64_t us = (int64_t)(cost * (double)k * jitter / v->speed) + 1;
  if (w->p.scale) { /* no jitter: a task costs the same wherever it runs */
    us = (int64_t)(scale_cost(w, t, st) / v->speed) + 1;
    sim_scale_busy(w, us, v->speed);
  }
  if (w->slowing) us = slow_down(w, v, t, us);
  fin_t *f = malloc(sizeof *f);
  *f = (fin_t){v->idx, v->gen, t->tid, 0};
  sim_at(w, w->now + us, on_finish, f);
}

static void on_exited(sim_world_t *w, void *arg) {
  uint64_t *a = arg;
  sim_server_t *v = sv_of(w, (int)a[0]);
  if (v->up && v->gen == a[1] && !w->tearing) {
    sim_note(w, "server %d: stopped, nothing running: it exits", v->idx);
    sim_server_kill(w, v->idx);
  }
  free(a);
}

/* settle starts queued tasks while threads and windows allow, and answers fetches. */
void sv_settle(sim_world_t *w, sim_server_t *v) {
  if (!v->up || w->now < v->paused_until) return;
  for (stask_t *t = v->tasks; t != NULL;) {
    stask_t *next = t->next;
    if (t->state == T_QUEUED) {
      sess_t *s = t->link >= 0 ? sv_session(v, t->link) : NULL;
      uint32_t cap = v->threads;
      if (s != NULL && s->max_active > 0 && s->max_active < cap) cap = s->max_active;
      if (v->running < cap) start(w, v, t);
    }
    t = next;
  }
  if (v->stopping && v->running == 0 && !v->exiting) { /* a stop ends once idle */
    uint64_t *a = malloc(2 * sizeof *a);
    a[0] = (uint64_t)v->idx;
    a[1] = v->gen;
    v->exiting = 1;
    sim_at(w, w->now, on_exited, a);
  }
}

static int bind(sim_server_t *v, stask_t *t) {
  uint32_t k = sv_members(t), n_in = t->nin / k, wait = 0, dead = 0;
  for (uint32_t i = 0; i < t->nin; i++) {
    sin_t *in = &t->in[i];
    if (in->bound || in->failed) continue;
    sval_t *e = sv_find(v, in->id);
    if (e != NULL && e->state == V_PENDING) {
      wait++;
    } else if (e != NULL && e->state == V_SET) {
      in->val = lt__value_ref(e->v);
      in->bound = 1;
    } else {
      in->failed = e != NULL ? e->status : LT_ENOENT;
      if (e != NULL)
        snprintf(in->err, sizeof in->err, "input %u: %.600s", i % n_in, e->err);
      else
        snprintf(in->err, sizeof in->err, "input %u: no object %llu:%llu on this server", i % n_in,
                 (unsigned long long)in->id.client, (unsigned long long)in->id.seq);
    }
  }
  for (uint32_t m = 0; m < k; m++) {
    int bad = 0;
    for (uint32_t j = m * n_in; j < m * n_in + n_in; j++)
      bad |= t->in[j].failed != 0;
    dead += bad;
  }
  if (dead == k) return -1;
  return wait == 0 ? 1 : 0;
}

void sv_recheck(sim_world_t *w, sim_server_t *v) {
  if (v->in_recheck) {
    v->again = 1;
    return;
  }
  v->in_recheck = 1;
  do {
    v->again = 0;
    for (stask_t *t = v->tasks; t != NULL;) {
      stask_t *next = t->next;
      if (t->state == T_PARKED) {
        int b = bind(v, t);
        if (b > 0) t->state = T_QUEUED;
        if (b < 0) {
          const sin_t *bad = t->in;
          while (!bad->failed)
            bad++;
          char err[ERRLEN];
          sv_set_err(err, sizeof err, bad->err);
          t->state = T_QUEUED;
          if (sv_members(t) == 1) sv_fail_all(w, v, t, bad->failed, err);
        }
      }
      t = next;
    }
  } while (v->again);
  v->in_recheck = 0;
  sv_wake(w, v);
  if (v->ndoomed > 0) {
    sval_t *e, *tmp;
    HASH_ITER(hh, v->store, e, tmp) {
      if (e->doomed) sv_drop(v, e);
    }
    v->ndoomed = 0;
  }
  sv_settle(w, v);
}
