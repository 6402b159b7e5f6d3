/* dispatch.c: execute batches. Each loop turn, fireable instructions go to the servers the
 * placement policy chooses (placement.c; a successor fired by its predecessor's dispatch
 * counts in its server's window, as the rest of the task it belongs to), packed into one
 * `execute` per server. Instructions of one chain much shorter than an instruction's own cost
 * follow their leader to its server as a group (option `grain`), which the server runs on one
 * worker back to back: one hand-off for the group, while each keeps its own record, result
 * and error. Inputs travel inline when the client holds them and as references
 * otherwise; when the binding (binding.c) says so, an instruction's output is passed on as a
 * reference as soon as it is dispatched. It owns the batches; it may call the records, the
 * server table, placement, pacing and the jobs' settle (lt__sched_end), never the links or
 * a policy's state: a server that fails a send is only marked. Dispatcher thread only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "oid.h"
#include "exec.h"
#include "placement.h"
#include "queue.h"
#include "sched_jobs.h"
#include "sched_loop.h"
#include "sched_records.h"
#include "sched_servers.h"
#include "vec.h"

/* An execute message being assembled for one server. Inputs, further stages and outputs of
 * all its instructions live in flat arrays; an instruction's pointer fields hold offsets
 * until batch_send turns them into pointers. */
typedef struct batch {
  lt_instr_t *instrs;
  uint32_t n;
  size_t cap;
  lt_input_t *inputs;
  uint32_t ninputs;
  size_t capinputs;
  lt_stage_t *stages;
  uint32_t nstages;
  size_t capstages;
  lt_oid_t *outputs;
  size_t capoutputs;
  lt_value_t **values;
  size_t capvalues;
  lt_bytes_t *frames;
  uint32_t nframes;
  size_t capframes;
  uint64_t header; /* an upper estimate of the encoded header's size */
} batch_t;

/* The encoded size of one instruction is at most this plus its parameters and holder names
 * (an input: kind, a 2 x 64-bit id, its size, the holder string and the framing). */
#define INSTR_BYTES 64
#define INPUT_BYTES 40
#define STAGE_BYTES 16
/* A server decodes headers up to its frame limit and at most HEADER_MAX (its codec's
 * default); a batch is sent once it is half of that, so that one instruction always fits. */
#define HEADER_MAX ((uint64_t)4 << 20)

/* grain: a group holds at most LT_GRAIN_MAX instructions. grain=auto sizes it so that its
 * kernels take at least LT_GRAIN_COST_X times what an instruction costs besides its kernel
 * (client and server together, from the dispatcher's own CPU per hand-off as measured in
 * this run, own_cost.h; LT_INSTR_COST_US, the CPU per empty task of bench_overhead with
 * grain=1 on a 2-core VM, only until then), and at most LT_GRAIN_HOLD_US together, so that a
 * group holds back the results after it for no longer than that; and so that the server's
 * admitted instructions make at least two groups per thread of its window, lest lookahead
 * starve it. */
#define LT_GRAIN_MAX     64
#define LT_INSTR_COST_US 5.0
#define LT_GRAIN_COST_X  10.0
#define LT_GRAIN_HOLD_US 2000.0

/* keep_inputs copies the instruction's input tokens into the record (value references
 * included): they outlive the frame, which may go on at once. */
static int keep_inputs(lt_instr_rec_t *r, const lt_fire_t *fi) {
  r->ins = lt__rec_ins_alloc(r, fi->ninputs);
  if (r->ins == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < fi->ninputs; i++) {
    r->ins[i] = fi->inputs[i];
    if (r->ins[i].value != NULL) lt__value_ref(r->ins[i].value);
  }
  r->nins = fi->ninputs;
  return LT_OK;
}

/* batch_add appends r's instruction for server `idx`. */
static int batch_add(lt_sched_t *s, batch_t *b, int idx, lt_instr_rec_t *r, const lt_fire_t *fi,
                     uint32_t flags) {
  uint32_t more = fi->nstages - 1;
  size_t n = (size_t)b->n + 1, nframes = (size_t)b->nframes + r->nins;
  if (LT_VEC_RESERVE(b->instrs, b->cap, n) != LT_OK ||
      LT_VEC_RESERVE(b->outputs, b->capoutputs, n) != LT_OK ||
      LT_VEC_RESERVE(b->inputs, b->capinputs, (size_t)b->ninputs + r->nins) != LT_OK ||
      LT_VEC_RESERVE(b->stages, b->capstages, (size_t)b->nstages + more) != LT_OK ||
      LT_VEC_RESERVE(b->frames, b->capframes, nframes) != LT_OK ||
      LT_VEC_RESERVE(b->values, b->capvalues, nframes) != LT_OK)
    return LT_ENOMEM;
  lt_instr_t *ins = &b->instrs[b->n];
  memset(ins, 0, sizeof *ins);
  ins->seq = r->seq;
  ins->op = fi->op;
  ins->kernel = fi->stages[0].kernel;
  ins->param.data = fi->stages[0].param;
  ins->param.len = fi->stages[0].param_len;
  ins->more = (lt_stage_t *)(uintptr_t)b->nstages;
  ins->nmore = more;
  for (uint32_t k = 1; k < fi->nstages; k++) {
    lt_stage_t *st = &b->stages[b->nstages++];
    st->kernel = fi->stages[k].kernel;
    st->param.data = fi->stages[k].param;
    st->param.len = fi->stages[k].param_len;
  }
  ins->inputs = (lt_input_t *)(uintptr_t)b->ninputs;
  ins->ninputs = r->nins;
  for (uint32_t k = 0; k < r->nins; k++) {
    const lt_token_t *t = &r->ins[k];
    lt_input_t *inp = &b->inputs[b->ninputs++];
    memset(inp, 0, sizeof *inp);
    inp->holder = "";
    if (t->value != NULL) {
      /* The client has the value: it travels inline, and the server copy of a small
       * output that came back is no longer needed. */
      if (lt__holder(s, t) >= 0) lt__server_release(s, lt__holder(s, t), t->id);
      inp->kind = LT_INPUT_INLINE;
      inp->frame = b->nframes;
      b->frames[b->nframes].data = t->value->data;
      b->frames[b->nframes].len = t->value->len;
      b->values[b->nframes++] = t->value;
    } else {
      inp->kind = LT_INPUT_REF;
      inp->id = t->id;
      inp->size = t->size;
      if (lt__holder(s, t) != idx) inp->holder = s->srv[lt__holder(s, t)].conn.endpoint;
    }
  }
  b->outputs[b->n] = (lt_oid_t){s->client_id, r->seq};
  ins->noutputs = 1;
  ins->flags = flags;
  b->n++;
  return LT_OK;
}

/* batch_finish turns the batch's offsets into pointers and each pack (gather) into one
 * instruction: its members' inputs and outputs lie next to each other in the flat arrays, so
 * the first member's entry takes them all, and the others' entries go. */
static void batch_finish(batch_t *b) {
  uint32_t w = 0;
  for (uint32_t i = 0; i < b->n; w++) {
    lt_instr_t *ins = &b->instrs[w];
    if (w != i) *ins = b->instrs[i];
    ins->inputs = b->inputs + (uintptr_t)ins->inputs;
    ins->more = ins->nmore ? b->stages + (uintptr_t)ins->more : NULL;
    ins->outputs = &b->outputs[i];
    uint32_t k = ins->pack > 1 ? ins->pack : 1;
    if (k > 1) {
      ins->ninputs *= k;
      ins->noutputs = k;
      ins->group = 0;
    }
    i += k;
  }
  b->n = w;
}

static void batch_send(lt_sched_t *s, size_t idx, batch_t *b) {
  batch_finish(b);
  lt_msg_t m = {.type = LT_MSG_EXECUTE};
  m.u.execute.max_active = s->opts->throttle ? s->srv[idx].pace.window : 0;
  m.u.execute.timeout_ms = s->opts->task_timeout_ms;
  m.u.execute.ninstrs = b->n;
  m.u.execute.instrs = b->instrs;
  m.nframes = b->nframes;
  m.frames = b->frames;
  /* A server found dead while sending is only marked: the loop's reap phase takes its
   * records back, these included (they are out on it already). */
  if (lt__server_gone(s, idx)) return;
  int rc = lt__conn_send(&s->srv[idx].conn, &m, b->values, lt__clock_ms());
  if (rc != LT_OK) lt__server_mark_dead(s, idx, lt_strerror(rc), 0);
}

/* batch_reset empties a sent batch, keeping its arrays. */
static void batch_reset(batch_t *b) {
  b->n = b->ninputs = b->nstages = b->nframes = 0;
  b->header = 0;
}

static void batch_free(batch_t *b) {
  free(b->instrs);
  free(b->inputs);
  free(b->stages);
  free(b->outputs);
  free(b->values);
  free(b->frames);
}

/* inputs_lost tells whether an input is a reference to a value on a dead server. */
static int inputs_lost(const lt_sched_t *s, const lt_fire_t *fi) {
  for (uint32_t i = 0; i < fi->ninputs; i++) {
    const lt_token_t *t = &fi->inputs[i];
    if (t->value == NULL && (lt__holder(s, t) < 0 || lt__server_gone(s, (size_t)lt__holder(s, t))))
      return 1;
  }
  return 0;
}

/* instr_bytes estimates from above what r's instruction adds to an execute header. */
static uint64_t instr_bytes(const lt_sched_t *s, const lt_instr_rec_t *r, const lt_fire_t *fi) {
  uint64_t n = INSTR_BYTES;
  for (uint32_t k = 0; k < fi->nstages; k++)
    n += STAGE_BYTES + fi->stages[k].param_len;
  for (uint32_t k = 0; k < r->nins; k++) {
    n += INPUT_BYTES;
    if (r->ins[k].value == NULL && lt__holder(s, &r->ins[k]) >= 0)
      n += strlen(s->srv[lt__holder(s, &r->ins[k])].conn.endpoint);
  }
  return n;
}

/* header_cap returns the most header bytes an execute to server idx may carry. */
static uint64_t header_cap(const lt_sched_t *s, size_t idx) {
  uint64_t lim = s->srv[idx].conn.max_frame;
  return lim == 0 || lim > HEADER_MAX ? HEADER_MAX : lim;
}

/* too_big fails r's task when no live server takes frames as large as it needs (an input
 * sent or fetched, or the instruction itself in the header), and none is still connecting;
 * 1 when it did. */
static int too_big(lt_sched_t *s, lt_instr_rec_t *r, const lt_fire_t *fi) {
  uint64_t most = 0, hdr = instr_bytes(s, r, fi);
  size_t best = 0;
  int live = 0;
  for (size_t i = 0; i < s->nsrv; i++) {
    if (s->srv[i].conn.state == LT_CONN_HELLO) return 0; /* it may take it: wait for its welcome */
    if (!lt__server_takes(s, i)) continue;
    if (s->srv[i].conn.max_frame == 0 || (lt__server_fits(s, i, fi) && hdr <= header_cap(s, i)))
      return 0;
    if (!live || s->srv[i].conn.max_frame > most) {
      most = s->srv[i].conn.max_frame;
      best = i;
    }
    live = 1;
  }
  if (!live) return 0; /* it waits for a server */
  uint64_t need = lt__server_frame_need(s, fi, -1);
  char msg[256];
  if (need > most)
    snprintf(msg, sizeof msg,
             "an input of %llu bytes is over the frame limit of %llu bytes of server %s "
             "(the largest of the live servers)",
             (unsigned long long)need, (unsigned long long)most, s->srv[best].conn.endpoint);
  else
    snprintf(msg, sizeof msg,
             "the instruction takes about %llu bytes, over what the frame limit of %llu bytes "
             "of server %s lets an execute carry",
             (unsigned long long)hdr, (unsigned long long)most, s->srv[best].conn.endpoint);
  lt__sched_end(s, r, LT_END_ABORTED, NULL, NULL, LT_ETOOBIG, msg);
  return 1;
}

/* fits_on tells whether server `idx` takes r's instruction and its inputs within its frame
 * limit. */
static int fits_on(lt_sched_t *s, const lt_instr_rec_t *r, const lt_fire_t *fi, int idx) {
  return s->srv[idx].conn.max_frame == 0 || (lt__server_fits(s, (size_t)idx, fi) &&
                                             instr_bytes(s, r, fi) <= header_cap(s, (size_t)idx));
}

/* move_on passes r's output on by name now that its server `idx` is known (lazy binding):
 * the frame goes on, and successors it fires are queued to go out in this turn. */
static void move_on(lt_sched_t *s, lt_instr_rec_t *r, int idx) {
  lt_job_rec_t *j = r->job;
  lt_token_t out = {.id = {s->client_id, r->seq}, .at = lt__holder_id(s, idx)};
  lt__entries_held_by(s, j);
  lt__instance_dispatched(j->inst, r->frame, &out, lt__sched_on_fire_chained, s);
  r->moved = 1;
  r->frame = NULL; /* it may have finished and been freed */
  if (j->inst->done && j->inst->result.value == NULL && lt__oid_eq(j->inst->result.id, out.id))
    r->final = 1;
}

/* fire_info describes r's instruction: from its frame, or, for a re-dispatch after its frame
 * went on, from the record, which has all it needs. */
static void fire_info(const lt_instr_rec_t *r, lt_fire_t *fi) {
  if (r->moved)
    *fi = (lt_fire_t){r->op, r->stages, r->nstages, r->ins, r->nins};
  else
    lt__frame_fire_info(r->frame, fi);
}

/* send_one places and encodes r (on server `force` when it is not -1); LT_EAGAIN when no
 * server has room. *to gets the server r went to, or -1 when it did not go (r may then be
 * freed). */
static int send_one(lt_sched_t *s, batch_t *batches, lt_instr_rec_t *r, int force, int *to) {
  *to = -1;
  lt_fire_t fi;
  fire_info(r, &fi);
  /* The record keeps its inputs first: a task's end (lost() in jobs.c) judges by them
   * whether the instruction can go elsewhere or the task must start again. */
  if (r->ins == NULL && keep_inputs(r, &fi) != LT_OK) return LT_ENOMEM;
  if (inputs_lost(s, &fi)) {
    if (r->backup) return LT_ESTATE; /* a copy never decides its task's fate */
    /* Its task is recomputed (the record goes before: its frame goes with the instance). */
    lt__sched_end(s, r, LT_END_LOST, NULL, NULL, LT_ELOST,
                  "a value the task needed was on a server that died");
    return LT_OK;
  }
  fi.inputs = r->ins; /* the record's copies: the frame may go on below */
  if (r->backup && !fits_on(s, r, &fi, force)) return LT_ESTATE;
  if (!r->backup && too_big(s, r, &fi)) return LT_OK;
  int idx = force >= 0 ? force : s->placement->place(s, &fi, r->chained);
  if (idx < 0) return LT_EAGAIN;
  r->op = fi.op;
  r->stages = fi.stages;
  r->nstages = fi.nstages;
  /* A batch stays within what the server decodes: a full one goes now. */
  uint64_t bytes = instr_bytes(s, r, &fi);
  if (batches[idx].n > 0 && batches[idx].header + bytes > header_cap(s, (size_t)idx) / 2) {
    batch_send(s, (size_t)idx, &batches[idx]);
    batch_reset(&batches[idx]);
    if (!lt__server_takes(s, (size_t)idx)) return LT_EAGAIN;
  }
  batches[idx].header += bytes;
  if (lt__binding(s, r).moves_on) move_on(s, r, idx);
  lt_binding_t b = lt__binding(s, r);
  uint32_t flags =
      (b.returns ? LT_INSTR_RETURN : 0) | (b.release_inputs ? LT_INSTR_RELEASE_INPUTS : 0);
  r->kept_inputs = b.keeps_inputs;
  if (batch_add(s, &batches[idx], idx, r, &fi, flags) != LT_OK) return LT_ENOMEM;
  r->sent_us = lt__clock_us();
  r->sent_ms = r->sent_us / 1000;
  r->cost_us = lt__pace_cost_us(s, (size_t)idx, r->stages);
  r->cost_known = lt__pace_known_us(s, r->stages) > 0;
  lt__sched_put_on(s, r, idx);
  lt__policies_dispatch(s, r, (size_t)idx);
  s->instructions++;
  *to = idx;
  return LT_OK;
}

/* fail_dispatch fails r's task when r could not be sent (out of memory) and frees r. */
static void fail_dispatch(lt_sched_t *s, lt_instr_rec_t *r, int rc) {
  lt__sched_end(s, r, LT_END_ABORTED, NULL, NULL, rc, "out of memory dispatching");
}

/* grain_for returns how many instructions of `chain` may go to server idx as one group. */
static uint32_t grain_for(const lt_sched_t *s, const lt_tstage_t *chain, size_t idx) {
  if (s->opts->grain != 0) return s->opts->grain;
  /* Its time on this server: a group that takes 2 ms on a fast one takes 16 on one 8 times
   * slower, which would hold the last tasks of a run there. */
  double svc = lt__pace_service_us(s, idx, chain);
  if (svc <= 0) return 1; /* never ran: its cost is unknown */
  double cost = lt__own_cost_instr_us(&s->own_cost, LT_INSTR_COST_US);
  double want = ceil(LT_GRAIN_COST_X * cost / svc);
  double hold = floor(LT_GRAIN_HOLD_US / svc);
  const lt_pace_t *p = &s->srv[idx].pace;
  double starve = floor((double)p->cap / (2.0 * lt__pace_parallel(p)));
  if (want > hold) want = hold;
  if (want > starve) want = starve;
  return want <= 1 ? 1 : want >= LT_GRAIN_MAX ? LT_GRAIN_MAX : (uint32_t)want;
}

/* joins tells whether queued record m may ride with a group of `chain` to server idx: the
 * same chain, not a copy, and inputs the client holds or idx holds, within its limits. */
static int joins(const lt_sched_t *s, lt_instr_rec_t *m, const lt_tstage_t *chain, int idx) {
  if (m->backup || lt__rec_stale(m)) return 0;
  lt_fire_t fi;
  fire_info(m, &fi);
  if (fi.stages != chain) return 0;
  for (uint32_t i = 0; i < fi.ninputs; i++)
    if (fi.inputs[i].value == NULL && lt__holder(s, &fi.inputs[i]) != idx) return 0;
  return lt__server_fits(s, (size_t)idx, &fi);
}

/* packable tells whether instruction `ins` of record m may share the packed entry of `lead`:
 * a seq of the same chain (gather's joins) with as many inputs and the same flags. A pack
 * runs once every input of every member is there, so a member must not wait for an input
 * that another pack, or its own, makes: in a program whose chains may run after themselves
 * (divide and conquer, while, a reduce) its inputs must exist already; elsewhere a chain runs
 * once a task, after the same chains in every task, so packs never wait for one another. */
static int packable(const lt_sched_t *s, const lt_instr_t *lead, const lt_instr_t *ins,
                    const lt_instr_rec_t *m) {
  if (ins->op != LT_OP_SEQ || ins->ninputs != lead->ninputs || ins->flags != lead->flags) return 0;
  if (!s->tmpl_recurs) return 1;
  for (uint32_t i = 0; i < m->nins; i++)
    if (!lt__token_made(s, &m->ins[i])) return 0;
  return 1;
}

/* pack marks the group of n records `mem` that starts at instruction `lead` of batch b as
 * one packed instruction, when option `pack` is on and every member can share its entry
 * (batch_finish merges them as the batch goes). */
static void pack(lt_sched_t *s, batch_t *b, uint32_t lead, lt_instr_rec_t **mem, uint32_t n) {
  if (!s->opts->pack || n < 2) return;
  for (uint32_t i = 0; i < n; i++)
    if (!packable(s, &b->instrs[lead], &b->instrs[lead + i], mem[i])) return;
  b->instrs[lead].pack = n;
  for (uint32_t i = 0; i < n; i++) {
    mem[i]->packed = 1;
    mem[i]->pack_lead = mem[0]->seq; /* what its completion must match (done_check.c) */
    mem[i]->pack_i = i;
    mem[i]->pack_n = n;
  }
  s->packs++;
  s->packed += n;
}

/* next_member takes from the fireable queue the first record among its first `scan` that may
 * ride with a group of `chain` to server idx, or returns NULL. The records it passes stay
 * where they are: successors that the group's own dispatch fired go to the queue's front. */
static lt_instr_rec_t *next_member(lt_sched_t *s, const lt_tstage_t *chain, int idx,
                                   uint32_t scan) {
  lt_instr_rec_t *prev = NULL, *m = s->fire_head;
  for (; m != NULL && scan > 0 && !joins(s, m, chain, idx); scan--) {
    prev = m;
    m = m->next;
  }
  if (m == NULL || scan == 0) return NULL;
  LT_QUEUE_TAKE_AFTER(s->fire_head, s->fire_tail, prev, m, next);
  s->nfire--;
  return m;
}

/* gather sends the queued records of leader's chain that follow it in the fireable queue
 * with it to server idx, up to its grain, and marks them one group in the batch (a batch
 * sent for its size in between starts a new group), packed when they can be (pack). */
static void gather(lt_sched_t *s, batch_t *batches, lt_instr_rec_t *leader, int idx) {
  batch_t *b = &batches[idx];
  const lt_tstage_t *chain = leader->stages;
  uint32_t g = grain_for(s, chain, (size_t)idx), lead = b->n - 1, n = 1;
  lt_instr_rec_t *mem[LT_MAX_PACK];     /* the group's records, from its first in this batch */
  if (g > LT_MAX_PACK) g = LT_MAX_PACK; /* the option's most (1024) is no more */
  mem[0] = leader;
  for (uint32_t total = 1; total < g && lt__server_has_room(s, (size_t)idx); total++) {
    /* Past the successors the members sent so far fired (one each), and a few others. */
    lt_instr_rec_t *m = next_member(s, chain, idx, 2 * total + 8);
    if (m == NULL) break;
    int to, rc = send_one(s, batches, m, idx, &to);
    if (rc == LT_EAGAIN) {
      lt__sched_push_fireable(s, m, 1);
      break;
    }
    if (rc != LT_OK) {
      fail_dispatch(s, m, rc);
      break;
    }
    if (to != idx) break;
    if (b->n == 1) { /* the batch before m went for its size: m leads the rest */
      lead = 0;
      n = 1;
      mem[0] = m;
      continue;
    }
    mem[n] = m;
    b->instrs[lead].group = ++n;
    s->grouped += n == 2 ? 2 : 1;
    s->groups += n == 2;
  }
  pack(s, b, lead, mem, n);
}

/* note_full tells the throttle of every server without room that work waited for it. */
static void note_full(lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++)
    if (lt__server_takes(s, i) && !lt__server_has_room(s, i)) lt__pace_full(&s->srv[i].pace);
}

int lt__sched_dispatch_to(lt_sched_t *s, lt_instr_rec_t *r, int idx) {
  batch_t *batches = calloc(s->nsrv, sizeof *batches);
  if (batches == NULL) return LT_ENOMEM;
  int to, rc = send_one(s, batches, r, idx, &to);
  for (size_t i = 0; i < s->nsrv; i++) {
    if (batches[i].n > 0) batch_send(s, i, &batches[i]);
    batch_free(&batches[i]);
  }
  free(batches);
  return rc;
}

void lt__sched_dispatch(lt_sched_t *s) {
  lt__own_cost_look(&s->own_cost, s->instructions + s->completions);
  if (s->fire_head == NULL || s->nsrv == 0) return;
  batch_t *batches = calloc(s->nsrv, sizeof *batches);
  if (batches == NULL) return;
  lt_instr_rec_t *r;
  while ((r = lt__sched_pop_fireable(s)) != NULL) {
    if (lt__rec_stale(r)) { /* its task was recomputed or ended: it never runs */
      lt__sched_end(s, r, LT_END_NOT_RUN, NULL, NULL, LT_ECANCELED, NULL);
      continue;
    }
    int to, rc = send_one(s, batches, r, -1, &to);
    if (rc == LT_OK && to >= 0) gather(s, batches, r, to);
    if (rc == LT_EAGAIN) {
      lt__sched_push_fireable(s, r, 1);
      note_full(s);
      break;
    }
    if (rc != LT_OK) fail_dispatch(s, r, rc);
  }
  for (size_t i = 0; i < s->nsrv; i++) {
    if (batches[i].n > 0) batch_send(s, i, &batches[i]);
    batch_free(&batches[i]);
  }
  free(batches);
}
