/* execute.c: an EXECUTE on the simulated server (server.h), as task.c's lt__task_execute:
 * the message's window and deadline become the session's; each instruction is refused (a
 * kernel not in the program, a server stopping) or becomes a task: its expected output
 * registered in the store, its inline inputs copied, its references bound to values here or
 * fetched from their holder (a pending copy, store.c), and it parks until they exist. */
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "server.h"

void sv_execute(sim_world_t *w, sim_server_t *v, sess_t *s, const lt_msg_t *m) {
  s->max_active = m->u.execute.max_active;
  s->timeout_ms = m->u.execute.timeout_ms;
  for (uint32_t i = 0; i < m->u.execute.ninstrs; i++) {
    const lt_instr_t *ins = &m->u.execute.instrs[i];
    stask_t *t = calloc(1, sizeof *t);
    t->seq = ins->seq;
    t->tid = ++v->next_tid;
    t->timeout_us = (uint64_t)s->timeout_ms * 1000;
    t->link = s->link;
    t->op = ins->op;
    t->flags = ins->flags;
    t->pack = ins->pack;
    t->nst = 1 + ins->nmore;
    int bad = t->nst > MAX_STAGES;
    for (uint32_t j = 0; !bad && j < t->nst; j++) {
      uint32_t kx = j == 0 ? ins->kernel : ins->more[j - 1].kernel;
      lt_bytes_t p = j == 0 ? ins->param : ins->more[j - 1].param;
      bad |= kx >= w->nkernels;
      t->kidx[j] = kx;
      t->param[j] = p.len > 0 ? lt__value_copy(p.data, p.len) : NULL;
    }
    t->outs = calloc(ins->noutputs ? ins->noutputs : 1, sizeof *t->outs);
    memcpy(t->outs, ins->outputs, ins->noutputs * sizeof *t->outs);
    t->nin = ins->ninputs;
    t->in = calloc(t->nin ? t->nin : 1, sizeof *t->in);
    /* The tail of the list: the server runs a session's work in the order it came. */
    stask_t **tail = &v->tasks;
    while (*tail != NULL)
      tail = &(*tail)->next;
    *tail = t;
    if (bad || v->stopping) {
      t->state = T_QUEUED;
      sv_fail_all(w, v, t, bad ? LT_ENOKERNEL : LT_ESHUTDOWN,
                  bad ? "kernel index not in program" : "the server is shutting down");
      continue;
    }
    for (uint32_t j = 0; sv_one_output(t) && sv_kept(t) && j < sv_members(t); j++) {
      sval_t *e = sv_put(v, t->outs[j]);
      if (e->state == V_FAILED) e->state = V_PENDING;
      e->doomed = 0; /* run again under the same id */
    }
    for (uint32_t j = 0; j < t->nin; j++) {
      const lt_input_t *src = &ins->inputs[j];
      sin_t *in = &t->in[j];
      in->kind = src->kind;
      in->id = src->id;
      in->holder = -1;
      if (src->kind == LT_INPUT_INLINE) {
        const lt_bytes_t *f = &m->frames[src->frame];
        in->val = lt__value_copy(f->data, f->len);
        in->bound = 1;
        continue;
      }
      int h = src->holder[0] != '\0' ? sv_server_of(w, src->holder) : -1;
      if (h == v->idx) h = -1;
      in->holder = h;
      if (h < 0) continue;
      sval_t *e = sv_find(v, in->id);
      if (e != NULL && e->copy) {
        e->readers++;
        if (t->flags & LT_INSTR_RELEASE_INPUTS) sv_last_reader(w, v, e, s->secret);
      } else if (e != NULL) {
        in->holder = -1; /* made here: read here; the holder named drops its own (peer.c) */
        if (t->flags & LT_INSTR_RELEASE_INPUTS) sv_release_at(w, v, in->id, h, s->secret);
      } else
        sv_fetch_from(w, v, in->id, h, s->secret, (t->flags & LT_INSTR_RELEASE_INPUTS) != 0);
    }
    t->state = T_PARKED;
  }
  sv_recheck(w, v);
}
