/* scale.c: a scale run of the simulator (sim.h; docs/benchmarks.md, "Scale by simulation"):
 * what the 2-core machine cannot show. Hundreds or thousands of servers of speeds 1, 2, 4
 * and 8, each of `cores` threads and a window of 3 x cores, run a farm or a 3-stage lazy
 * pipeline of 100 000 tasks whose kernels take 1 to 10 ms (on a server of speed 1); no
 * faults. The run's makespan (virtual) against the ideal (the work over the total speed)
 * is the dispatcher's placement efficiency; the CPU time of its turns (real) is its own
 * cost per task. A task's cost comes from a hash of what its kernels read, so it is the
 * same on every server, fused into one instruction or not, and the ideal is exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium/error.h>
#include "options.h"
#include "sim.h"
#include "template.h"

#define SCALE_TASKS    100000
#define SCALE_MIN_US   1000.0 /* a kernel's cost on a server of speed 1 */
#define SCALE_SPAN_US  9000   /* ... up to SCALE_MIN_US + this */
#define SCALE_IN_BYTES 32     /* each task's input: bytes from a small alphabet */

/* fnv1a hashes n bytes into h. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* stage_cost: one kernel run's cost, from the kernel and the bytes it reads. */
static double stage_cost(uint32_t kidx, const lt_bytes_t *in, uint32_t nin) {
  uint64_t h = fnv1a(0xcbf29ce484222325ull, &kidx, sizeof kidx);
  for (uint32_t i = 0; i < nin; i++)
    h = fnv1a(h, in[i].data, in[i].len);
  h ^= h >> 31;
  return SCALE_MIN_US + (double)(h % (SCALE_SPAN_US + 1));
}

double sim_scale_cost(sim_world_t *w, const lt_exec_stage_t *st, const uint32_t *kidx, uint32_t nst,
                      const lt_bytes_t *in, uint32_t nin) {
  (void)w;
  double cost = 0;
  lt_exec_result_t r = {0};
  lt_bytes_t one;
  for (uint32_t j = 0; j < nst; j++) {
    cost += stage_cost(kidx[j], in, nin);
    if (j + 1 == nst) break;
    /* The next stage reads this one's output: run it alone (kernels are cheap here). */
    lt_exec_result_t next = {0};
    lt__exec_run(LT_OP_SEQ, &st[j], 1, in, nin, &next);
    lt__exec_result_clear(&r);
    r = next;
    if (r.status != LT_OK || r.nout != 1) break;
    one = (lt_bytes_t){r.out[0], r.outlen[0]};
    in = &one;
    nin = 1;
  }
  lt__exec_result_clear(&r);
  return cost;
}

double sim_scale_ideal(sim_world_t *w, const sim_prog_t *p, const lt_template_t *t) {
  lt_exec_stage_t st[16];
  uint32_t kidx[16], nst = 0;
  for (int32_t n = (int32_t)t->blocks[0]; n >= 0; n = t->nodes[n].next) {
    const lt_tnode_t *node = &t->nodes[n];
    for (uint32_t j = 0; j < node->nstages && nst < 16; j++, nst++) {
      const lt_tstage_t *s = &node->stages[j];
      kidx[nst] = s->kernel;
      st[nst] = (lt_exec_stage_t){w->fns[s->kernel], "sim", {s->param, s->param_len}};
    }
  }
  double work = 0, speed = 0;
  for (uint32_t i = 0; i < p->ntasks; i++) {
    lt_bytes_t in = {p->inputs[i]->data, p->inputs[i]->len};
    work += sim_scale_cost(w, st, kidx, nst, &in, 1);
  }
  for (uint32_t i = 0; i < w->nsrv; i++)
    speed += sim_server_speed(w, (int)i) * (double)w->p.cores;
  w->work_us = work;
  w->speed = speed;
  return speed > 0 ? work / speed : 0;
}

int sim_scale_servers(sim_world_t *w) {
  static const double speeds[] = {1, 2, 4, 8};
  w->nsrv = w->p.servers ? w->p.servers : 256;
  if (w->nsrv > SIM_MAX_SERVERS) w->nsrv = SIM_MAX_SERVERS;
  w->nhosts = w->nsrv;
  int rc = LT_OK;
  for (uint32_t i = 0; rc == LT_OK && i < w->nsrv; i++) {
    snprintf(w->eps[i], sizeof w->eps[i], "tcp://sim%u:9000", i);
    rc = sim_server_new(w, (int)i, speeds[i % 4], w->p.cores);
  }
  w->delay_max = 50 + (int64_t)sim_below(&w->rng, 150); /* a LAN: 50 to 200 µs one way */
  return rc;
}

int sim_scale_draw(sim_world_t *w, sim_prog_t *p, const char *modules) {
  memset(p, 0, sizeof *p);
  lt__options_init(&p->opts);
  int pipe = w->p.scale == SIM_SCALE_PIPELINE;
  snprintf(p->shape, sizeof p->shape, "%s",
           pipe ? "pipeline(seq(rev), seq(xor k), seq(app !))" : "farm(seq(rev))");
  p->skel = pipe ? lt_pipeline(lt_seq("skelk:rev"), lt_seq_with("skelk:xor", "k", 1),
                               lt_seq_with("skelk:app", "!", 1), NULL)
                 : lt_farm(lt_seq("skelk:rev"));
  if (p->skel == NULL) return LT_ENOMEM;
  char window[16];
  snprintf(window, sizeof window, "%u", 3 * w->p.cores);
  int rc = lt__options_set(&p->opts, "modules", modules);
  if (rc == LT_OK) rc = sim_prog_set(p, "max_threads", window);
  if (rc == LT_OK && pipe) rc = sim_prog_set(p, "lazy", "on");
  if (rc == LT_OK) rc = sim_prog_overrides(w, p);
  if (rc == LT_OK && getenv("LT_SIM_TRACE") != NULL)
    rc = lt__options_set(&p->opts, "trace", getenv("LT_SIM_TRACE"));
  if (rc != LT_OK) return rc;
  w->max_retries = p->opts.max_retries;
  p->ntasks = w->p.tasks ? w->p.tasks : SCALE_TASKS;
  p->waves = 1;
  p->inputs = calloc(p->ntasks, sizeof *p->inputs);
  p->poison = calloc(p->ntasks, 1);
  p->slow = calloc(p->ntasks, 1);
  if (p->inputs == NULL || p->poison == NULL || p->slow == NULL) return LT_ENOMEM;
  for (uint32_t i = 0; i < p->ntasks; i++) {
    lt_value_t *v = lt__value_new(SCALE_IN_BYTES);
    if (v == NULL) return LT_ENOMEM;
    for (size_t j = 0; j < SCALE_IN_BYTES; j++)
      ((unsigned char *)v->data)[j] = (unsigned char)('a' + sim_below(&w->rng, 25));
    p->inputs[i] = v;
  }
  return LT_OK;
}

void sim_scale_busy(sim_world_t *w, int64_t us, double speed) {
  w->by_speed[speed >= 8 ? 3 : speed >= 4 ? 2 : speed >= 2 ? 1 : 0] += (double)us * speed;
  size_t last = (size_t)((w->now + us) / 1000) + 1;
  if (last > w->nbusy) {
    size_t n = last * 2;
    double *b = realloc(w->busy, n * sizeof *b);
    if (b == NULL) return;
    memset(b + w->nbusy, 0, (n - w->nbusy) * sizeof *b);
    w->busy = b;
    w->nbusy = n;
  }
  for (int64_t t = w->now; t < w->now + us;) {
    int64_t edge = (t / 1000 + 1) * 1000, end = edge < w->now + us ? edge : w->now + us;
    w->busy[t / 1000] += (double)(end - t) * speed;
    t = end;
  }
}

void sim_scale_profile(const sim_world_t *w, int64_t end) {
  fprintf(stderr, "sim-scale: use of the total speed in each tenth of the run:");
  for (int k = 0; k < 10; k++) {
    size_t from = (size_t)(end * k / 10 / 1000), to = (size_t)(end * (k + 1) / 10 / 1000);
    double done = 0;
    for (size_t b = from; b < to && b < w->nbusy; b++)
      done += w->busy[b];
    double could = (double)(to - from) * 1000.0 * w->speed;
    fprintf(stderr, " %.2f", could > 0 ? done / could : 0);
  }
  double use[4];
  sim_scale_use(w, end, use);
  fprintf(stderr, "\nsim-scale: use of each speed's servers (1, 2, 4, 8):");
  for (int k = 0; k < 4; k++)
    fprintf(stderr, " %.2f", use[k]);
  fprintf(stderr, "\n");
}

void sim_scale_use(const sim_world_t *w, int64_t end, double use[4]) {
  for (uint32_t k = 0; k < 4; k++) {
    double n = (double)((w->nsrv + 3 - k) / 4); /* servers k, k + 4, ... have speed 2^k */
    double could = (double)end * (double)(1u << k) * w->p.cores * n;
    use[k] = could > 0 ? w->by_speed[k] / could : 0;
  }
}
