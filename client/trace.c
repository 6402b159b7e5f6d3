/* trace.c: the trace file (trace.h). Events are streamed through a stdio buffer as they
 * happen, one JSON object per line, so memory stays bounded however long the run; each is
 * built with the stats' JSON writer (json.c), which escapes the strings. When the dispatcher
 * is idle the file is flushed with the closing brackets written and the position moved back
 * before them, so a regular file is valid JSON from then on even if the process dies; the
 * next event overwrites them. Dispatcher thread only, apart from open and close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lithium/error.h>
#include "json.h"
#include "log.h"
#include "exec.h"
#include "sched_state.h"
#include "trace.h"
#include "vec.h"

#define CLIENT_PID     1 /* the client process; server i is process i + SERVER_PID0 */
#define SERVER_PID0    2
#define DISPATCHER_TID 1
#define FLUSH_US       100000 /* idle flushes at most this often */
#define MAX_RTT_US     (10 * 1000000LL)
#define FOOTER         "\n]}\n"

/* What the trace knows of one server. */
typedef struct trace_server {
  int named;      /* process_name written: 1 with the endpoint, 2 with the server id */
  int has_window; /* a window event was written; window/cap are its values */
  uint32_t window, cap;
  int has_load; /* a load event was written; active/queued/parked are its values */
  uint32_t active, queued, parked;
  int has_clock;     /* offset_us holds the sample with the smallest round trip */
  int64_t offset_us; /* client time = server time + offset */
  int64_t best_rtt_us;
  unsigned char *named_workers; /* bitmap: thread_name written for worker i */
  size_t named_bytes;
} trace_server_t;

struct lt_trace {
  FILE *f;
  char *path;
  int seekable;    /* a regular file: idle flushes leave it valid JSON */
  int failed;      /* a write failed: logged once, nothing more is written */
  int dirty;       /* events since the last flush */
  uint64_t events; /* written so far: all but the first are preceded by a comma */
  int64_t t0_us;   /* time 0 of the trace (client CLOCK_MONOTONIC) */
  int64_t recv_us; /* arrival of the message being handled */
  int64_t last_flush_us;
  trace_server_t *srv; /* by connection index, nsrv of them allocated (zeroed until used) */
  size_t nsrv;
  lt_json_t j; /* the event being built; its buffer is reused */
};

/* ---- writing events --------------------------------------------------------------------- */

static void write_failed(lt_trace_t *t, int err) {
  if (t->failed) return;
  t->failed = 1;
  lt__log(LT_LOG_ERROR, "trace %s: write failed (%s); the trace stops here", t->path,
          strerror(err != 0 ? err : EIO));
}

/* ev_begin starts an event: phase, name, process and thread. */
static void ev_begin(lt_trace_t *t, const char *ph, const char *name, uint64_t pid, uint64_t tid) {
  lt__json_clear(&t->j);
  lt__json_object_open(&t->j, NULL);
  lt__json_str(&t->j, "ph", ph);
  lt__json_str(&t->j, "name", name);
  lt__json_u64(&t->j, "pid", pid);
  lt__json_u64(&t->j, "tid", tid);
}

static void ev_ts(lt_trace_t *t, int64_t ts_us) {
  lt__json_u64(&t->j, "ts", ts_us > 0 ? (uint64_t)ts_us : 0);
}

/* ev_end closes the event and appends it to the file. */
static void ev_end(lt_trace_t *t) {
  lt__json_object_close(&t->j);
  if (t->j.out.failed) return; /* out of memory: this event is left out */
  if (fputs(t->events > 0 ? ",\n" : "\n", t->f) == EOF ||
      fwrite(t->j.out.data, 1, t->j.out.len, t->f) != t->j.out.len) {
    write_failed(t, errno);
    return;
  }
  t->events++;
  t->dirty = 1;
}

/* meta writes a metadata event whose args are {key: value}. */
static void meta(lt_trace_t *t, const char *name, uint64_t pid, uint64_t tid, const char *key,
                 const char *str, uint64_t num) {
  ev_begin(t, "M", name, pid, tid);
  lt__json_object_open(&t->j, "args");
  if (str != NULL)
    lt__json_str(&t->j, key, str);
  else
    lt__json_u64(&t->j, key, num);
  lt__json_object_close(&t->j);
  ev_end(t);
}

/* flush writes what is buffered; a regular file gets the footer, and the position goes back
 * before it, so the file on disk is complete JSON. */
static void flush(lt_trace_t *t) {
  if (t->failed) return;
  if (t->seekable) {
    if (fputs(FOOTER, t->f) == EOF || fflush(t->f) != 0 ||
        fseek(t->f, -(long)strlen(FOOTER), SEEK_CUR) != 0) {
      write_failed(t, errno);
      return;
    }
  } else if (fflush(t->f) != 0) {
    write_failed(t, errno);
    return;
  }
  t->dirty = 0;
}

/* ---- open and close ------------------------------------------------------------------- */

int lt__trace_open(lt_trace_t **out, const char *path) {
  *out = NULL;
  lt_trace_t *t = calloc(1, sizeof *t);
  if (t == NULL || (t->path = strdup(path)) == NULL) {
    free(t);
    return LT_ENOMEM;
  }
  t->f = fopen(path, "w");
  if (t->f == NULL) {
    lt__log(LT_LOG_ERROR, "trace %s: cannot open: %s", path, strerror(errno));
    free(t->path);
    free(t);
    return LT_EIO;
  }
  struct stat st;
  t->seekable = fstat(fileno(t->f), &st) == 0 && S_ISREG(st.st_mode);
  setvbuf(t->f, NULL, _IOFBF, 64 * 1024);
  t->t0_us = lt__clock_us();
  t->last_flush_us = t->t0_us;
  fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"Lithium-C\",\"clock\":"
        "\"us since lt_eval_start, client CLOCK_MONOTONIC\"},\"traceEvents\":[",
        t->f);
  meta(t, "process_name", CLIENT_PID, 0, "name", "lithium client", 0);
  meta(t, "process_sort_index", CLIENT_PID, 0, "sort_index", NULL, 0);
  meta(t, "thread_name", CLIENT_PID, DISPATCHER_TID, "name", "dispatcher", 0);
  *out = t;
  return LT_OK;
}

void lt__trace_close(lt_trace_t *t) {
  if (t == NULL) return;
  if (!t->failed && fputs(FOOTER, t->f) == EOF) write_failed(t, errno);
  if (fclose(t->f) != 0) write_failed(t, errno);
  for (size_t i = 0; i < t->nsrv; i++)
    free(t->srv[i].named_workers);
  free(t->srv);
  lt__strbuf_reset(&t->j.out);
  free(t->path);
  free(t);
}

/* ---- servers ---------------------------------------------------------------------------- */

/* server returns the state of server `idx`, growing the array; NULL when out of memory. */
static trace_server_t *server(lt_trace_t *t, size_t idx) {
  if (LT_VEC_RESERVE(t->srv, t->nsrv, idx + 1) != LT_OK) return NULL;
  return &t->srv[idx];
}

static uint64_t server_pid(size_t idx) {
  return (uint64_t)idx + SERVER_PID0;
}

/* name_server writes the process name of server `idx`: its endpoint, with its id once known. */
static void name_server(lt_trace_t *t, trace_server_t *ts, size_t idx, const char *endpoint,
                        const char *server_id) {
  char name[600];
  if (server_id != NULL && server_id[0] != '\0')
    snprintf(name, sizeof name, "%s (%s)", endpoint, server_id);
  else
    snprintf(name, sizeof name, "%s", endpoint);
  meta(t, "process_name", server_pid(idx), 0, "name", name, 0);
  if (!ts->named) meta(t, "process_sort_index", server_pid(idx), 0, "sort_index", NULL, idx + 1);
  ts->named = server_id != NULL ? 2 : 1;
}

/* clock_sample keeps the offset of the sample with the smallest round trip: the server read
 * its clock about half way through it. */
static void clock_sample(trace_server_t *ts, int64_t sent_us, int64_t recv_us, uint64_t server_us) {
  int64_t rtt = recv_us - sent_us;
  if (server_us == 0 || server_us > (uint64_t)INT64_MAX / 2 || rtt < 0 || rtt > MAX_RTT_US) return;
  if (ts->has_clock && rtt >= ts->best_rtt_us) return;
  ts->has_clock = 1;
  ts->best_rtt_us = rtt;
  ts->offset_us = recv_us - rtt / 2 - (int64_t)server_us;
}

void lt__trace_message_at(lt_trace_t *t, lt_sched_t *s, size_t idx, const lt_msg_t *m) {
  trace_server_t *ts;
  if (t->failed || idx >= s->nsrv || (ts = server(t, idx)) == NULL) return;
  const lt_conn_t *c = &s->srv[idx].conn;
  t->recv_us = lt__clock_us();
  if (m->type == LT_MSG_WELCOME && ts->named < 2) {
    name_server(t, ts, idx, c->endpoint, m->u.welcome.server_id);
    clock_sample(ts, c->opened_ms * 1000, t->recv_us, m->u.welcome.now_us);
  } else if (!ts->named) {
    name_server(t, ts, idx, c->endpoint, NULL);
  }
  if (m->type == LT_MSG_HEARTBEAT && m->u.heartbeat.seq != 0 &&
      m->u.heartbeat.seq <= (uint64_t)INT64_MAX)
    clock_sample(ts, (int64_t)m->u.heartbeat.seq, t->recv_us, m->u.heartbeat.now_us);
  if (!m->has_load) return;
  const lt_load_t *l = &m->load;
  if (ts->has_load && l->active == ts->active && l->queued == ts->queued && l->parked == ts->parked)
    return;
  ts->has_load = 1;
  ts->active = l->active;
  ts->queued = l->queued;
  ts->parked = l->parked;
  ev_begin(t, "C", "load", server_pid(idx), 0);
  ev_ts(t, t->recv_us - t->t0_us);
  lt__json_object_open(&t->j, "args");
  lt__json_u64(&t->j, "active", l->active);
  lt__json_u64(&t->j, "queued", l->queued);
  lt__json_u64(&t->j, "parked", l->parked);
  lt__json_object_close(&t->j);
  ev_end(t);
}

/* ---- instruction spans ------------------------------------------------------------------ */

/* span_name writes the kernels that ran: a fused chain as "a > b", a dc step as its
 * condition, followed by the divide when it divided. */
static void span_name(const lt_sched_t *s, const lt_instr_rec_t *r, const lt_completion_t *cp,
                      char *buf, size_t size) {
  const lt_template_t *tmpl = s->tmpl;
  uint32_t n = r->stages != NULL ? r->nstages : 0;
  if (lt__op(r->op)->answers && cp->answer != 0 && n > 1) n = 1; /* base case: no divide */
  size_t len = 0;
  buf[0] = '\0';
  for (uint32_t k = 0; k < n && len + 1 < size; k++) {
    uint32_t kernel = r->stages[k].kernel;
    const char *name = kernel < tmpl->nkernels ? tmpl->kernels[kernel] : "?";
    int w = snprintf(buf + len, size - len, "%s%s", k > 0 ? " > " : "", name);
    if (w < 0) break;
    len += (size_t)w;
  }
  if (buf[0] == '\0') snprintf(buf, size, "instruction");
}

/* worker_tid returns the track of a worker thread, naming it the first time. */
static uint64_t worker_tid(lt_trace_t *t, trace_server_t *ts, size_t idx, uint32_t worker) {
  size_t byte = worker / 8;
  /* Out of memory, the worker goes unnamed. */
  (void)LT_VEC_RESERVE(ts->named_workers, ts->named_bytes, byte + 1);
  uint64_t tid = (uint64_t)worker + 1; /* tid 0 is left to process-wide events */
  if (byte < ts->named_bytes && !(ts->named_workers[byte] & (1u << (worker % 8)))) {
    ts->named_workers[byte] |= (unsigned char)(1u << (worker % 8));
    char name[32];
    snprintf(name, sizeof name, "worker %u", worker);
    meta(t, "thread_name", server_pid(idx), tid, "name", name, 0);
    meta(t, "thread_sort_index", server_pid(idx), tid, "sort_index", NULL, worker);
  }
  return tid;
}

void lt__trace_completion_at(lt_trace_t *t, lt_sched_t *s, size_t idx, const lt_instr_rec_t *r,
                             const lt_completion_t *cp) {
  trace_server_t *ts;
  if (t->failed || cp->start_us == 0 || (ts = server(t, idx)) == NULL) return; /* never ran */
  /* The span ends no later than its completion arrived and starts no earlier than the
   * trace: a clock offset off by up to half a round trip cannot put it outside the run. */
  int64_t recv = t->recv_us - t->t0_us;
  int64_t dur = cp->service_us < (uint64_t)recv ? (int64_t)cp->service_us : recv;
  int64_t start = recv - dur;
  if (ts->has_clock && cp->start_us <= (uint64_t)INT64_MAX / 2)
    start = (int64_t)cp->start_us + ts->offset_us - t->t0_us;
  if (start + dur > recv) start = recv - dur;
  if (start < 0) start = 0;
  uint64_t in = 0, out = 0;
  for (uint32_t i = 0; i < r->nins; i++)
    in += r->ins[i].value != NULL ? r->ins[i].value->len : r->ins[i].size;
  for (uint32_t i = 0; i < cp->noutputs; i++)
    out += cp->outputs[i].size;
  char name[512];
  span_name(s, r, cp, name, sizeof name);
  uint64_t tid = worker_tid(t, ts, idx, cp->worker);
  ev_begin(t, "X", name, server_pid(idx), tid);
  ev_ts(t, start);
  lt__json_u64(&t->j, "dur", (uint64_t)dur);
  lt__json_object_open(&t->j, "args");
  lt__json_u64(&t->j, "seq", r->seq);
  lt__json_u64(&t->j, "task", r->job->inst->task);
  lt__json_str(&t->j, "status", cp->status == LT_OK ? "ok" : lt_strerror(cp->status));
  lt__json_u64(&t->j, "input_bytes", in);
  lt__json_u64(&t->j, "output_bytes", out);
  /* When it was sent and when its completion arrived, on the trace's clock: with the span,
   * how long it took to reach a worker and how long its completion took to come back. */
  if (r->sent_us >= t->t0_us) lt__json_u64(&t->j, "sent", (uint64_t)(r->sent_us - t->t0_us));
  lt__json_u64(&t->j, "recv", (uint64_t)recv);
  lt__json_object_close(&t->j);
  ev_end(t);
}

/* ---- the loop turn: windows and idle flushes ------------------------------------------- */

void lt__trace_turn_at(lt_trace_t *t, lt_sched_t *s) {
  if (t->failed) return;
  int64_t now = lt__clock_us();
  for (size_t i = 0; i < s->nsrv; i++) {
    trace_server_t *ts;
    if (s->srv[i].conn.state == LT_CONN_DEAD || (ts = server(t, i)) == NULL) continue;
    const lt_pace_t *p = &s->srv[i].pace;
    if (ts->has_window && p->window == ts->window && p->cap == ts->cap) continue;
    ts->has_window = 1;
    ts->window = p->window;
    ts->cap = p->cap;
    ev_begin(t, "C", "window", server_pid(i), 0);
    ev_ts(t, now - t->t0_us);
    lt__json_object_open(&t->j, "args");
    lt__json_u64(&t->j, "threads", p->window);
    lt__json_u64(&t->j, "admitted", p->cap);
    lt__json_object_close(&t->j);
    ev_end(t);
  }
  if (t->dirty && s->inflight == NULL && s->fire_head == NULL &&
      now - t->last_flush_us >= FLUSH_US) {
    flush(t);
    t->last_flush_us = now;
  }
}

/* ---- the dispatcher's track --------------------------------------------------------------- */

/* instant_begin starts an instant event on the dispatcher's track, its args open. */
static void instant_begin(lt_trace_t *t, const char *name) {
  ev_begin(t, "i", name, CLIENT_PID, DISPATCHER_TID);
  lt__json_str(&t->j, "s", "t");
  ev_ts(t, lt__clock_us() - t->t0_us);
  lt__json_object_open(&t->j, "args");
}

static void instant_end(lt_trace_t *t) {
  lt__json_object_close(&t->j);
  ev_end(t);
}

void lt__trace_server_lost_at(lt_trace_t *t, lt_sched_t *s, size_t idx, const char *why) {
  if (t->failed || idx >= s->nsrv) return;
  instant_begin(t, "server lost");
  lt__json_str(&t->j, "server", s->srv[idx].conn.endpoint);
  lt__json_str(&t->j, "why", why != NULL ? why : "");
  instant_end(t);
}

void lt__trace_instr_lost_at(lt_trace_t *t, const lt_instr_rec_t *r, const char *endpoint,
                             const char *why) {
  if (t->failed) return;
  instant_begin(t, "instruction lost");
  lt__json_u64(&t->j, "seq", r->seq);
  lt__json_u64(&t->j, "task", r->job->inst->task);
  lt__json_str(&t->j, "server", endpoint != NULL ? endpoint : "");
  lt__json_str(&t->j, "why", why != NULL ? why : "");
  instant_end(t);
}

void lt__trace_recompute_at(lt_trace_t *t, uint64_t task, const char *why) {
  if (t->failed) return;
  instant_begin(t, "recompute");
  lt__json_u64(&t->j, "task", task);
  lt__json_str(&t->j, "why", why != NULL ? why : "");
  instant_end(t);
}
