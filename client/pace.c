/* pace.c: how much work one server gets (lt_pace_t in sched_state.h; its calls in
 * sched_servers.h, its figures in policy_view.h), from what it reports.
 *  - Costs: for each instruction chain of the template on this server (DESIGN.md 7: per
 *    kernel per server), EWMAs of its service time and of the CPU time it used, refined from
 *    every completion, and how many of the chain the server has been given. The server's
 *    cores — the CPU it really gets — are learnt from the CPU use it reports while
 *    saturated (a CPU quota or a hog shows there). Its time per instruction when busy is the
 *    CPU time over the cores or the service time over the window, whichever binds; a chain
 *    never run here is costed from another server's times. The backlog, what it has been
 *    given costed at today's estimates, plus one more is when a new instruction would finish.
 *  - The thread window (throttle, seed 003 5.3): how many instructions run at once on the
 *    server, kept between min_threads and max_threads. Each chain keeps a reference cost,
 *    the lowest its EWMA reached (slowly forgotten); every LT_CONTROL_MS the mean slowdown of
 *    the period's completions against their references decides: clearly slower (the server
 *    saturated, a hog on its host, its CPU quota cut) shrinks the window by one; as fast as
 *    the reference while the window is the limit (work waits for it) grows it: doubling
 *    until the first shrink (a slow start), by one after. A grow that is undone at once
 *    backs off, so a server at its knee does not oscillate. Every change is recorded.
 *    Servers enforce the window (execute.max_active).
 *  - The lookahead depth on top: RTT / time per instruction more (Little's law), so a server
 *    never idles waiting for the client and tiny tasks are not held to window / RTT. The
 *    ping's round trip is not what a refill takes: a completion wakes the server's loop,
 *    ZeroMQ's threads and the dispatcher, and the next instruction the loop and a worker, each
 *    behind kernels spinning on every core (a woken thread may wait out the running one's
 *    scheduler slice, 1.4 ms on 2 cores), and completions come in bursts when kernels that
 *    shared a core end together. So the depth also learns from starvation: a report that a
 *    thread of the window was free with nothing queued while work waited at the client for
 *    room there adds one (`spare`, at most one per thread and LT_SPARE_US of its time);
 *    LT_SPARE_QUIET control periods without one take one back.
 * Pure arithmetic over the reports: it calls nothing of the dispatcher. Dispatcher thread. */
#include <math.h>

#include "sched_servers.h"

#define SMOOTH  0.2   /* weight of a new RTT or service-time sample */
#define FORGET  1.002 /* a reference cost rises by this each period: a lucky sample fades */
#define SLOWER  1.5   /* mean slowdown above this shrinks the window */
#define KEEPUP  1.15  /* mean slowdown below this lets a full window grow */
#define BACKOFF 3     /* periods without growing after a grow was undone, doubled each time */

static void recompute(lt_pace_t *p) {
  if (!p->paced || p->per_us <= 0) return;                     /* plain Lithium: one at a time */
  double rtt_us = p->rtt_us > 0 ? p->rtt_us : LT_RTT_GUESS_US; /* until the first ping */
  /* Little's law: the server finishes one every per_us when busy, so rtt / per_us more
   * instructions cover the round trip. They hold no thread while they wait. */
  double want = rtt_us / p->per_us + p->spare;
  uint32_t depth = want >= LT_MAX_DEPTH ? LT_MAX_DEPTH : (uint32_t)want + 1; /* rounded up */
  /* Until the server has shown its speed over a few windows of completions the estimates
   * are young (a CPU quota lets the first instructions run at full speed): no more than a
   * window more, so that a slow server is not given a deep queue it cannot drain. */
  if (p->completed < 2 * (uint64_t)p->window && depth > p->window) depth = p->window;
  p->cap = p->window + depth;
}

static void record(lt_pace_t *p, int64_t t_ms) {
  uint32_t i = p->changes % LT_HISTORY;
  p->hist_ms[i] = t_ms;
  p->hist_w[i] = p->window;
  p->changes++;
}

void lt__pace_init(lt_pace_t *p, uint32_t first_cap, const lt_options_t *o, int64_t now_ms) {
  *p = (lt_pace_t){0};
  p->cores = 1; /* until the welcome says how many the host has */
  /* Under throttle a server's window starts at the minimum and grows as it earns it;
   * otherwise every server's window is max_threads. */
  p->window = o->throttle ? o->min_threads : o->max_threads;
  if (p->window > o->max_threads) p->window = o->max_threads;
  p->cap = first_cap;
  p->paced = o->lookahead;
  p->period_ms = now_ms;
}

void lt__pace_welcome(lt_pace_t *p, uint32_t cores, double cpus) {
  if (cores > 0) p->cores = cores;
  /* A quota below the host's cores, as the server says: checked, since it comes from the
   * network (NaN, infinities and nonsense leave the host's count). */
  if (isfinite(cpus) && cpus >= 0.01 && cpus < p->cores) p->cores = cpus;
}

void lt__pace_rtt(lt_pace_t *p, double rtt_us) {
  p->rtt_us = p->rtt_us > 0 ? (1 - SMOOTH) * p->rtt_us + SMOOTH * rtt_us : rtt_us;
  recompute(p);
}

double lt__pace_noise_us(const lt_pace_t *p, int64_t now_ms) {
  if (p->noise_us <= 0 || now_ms <= p->noise_ms) return p->noise_us;
  return p->noise_us * exp2(-(double)(now_ms - p->noise_ms) / LT_NOISE_HALF_MS);
}

void lt__pace_noise(lt_pace_t *p, double us, int64_t now_ms) {
  double old = lt__pace_noise_us(p, now_ms);
  p->noise_us = us > old ? us : old;
  p->noise_ms = now_ms;
}

/* find_cost returns the cost entry of chain `key`, or NULL. */
static lt_cost_t *find_cost(const lt_pace_t *p, const void *key) {
  for (uint32_t i = 0; i < p->ncosts; i++)
    if (p->costs[i].key == key) return (lt_cost_t *)&p->costs[i];
  return NULL;
}

/* entry returns the cost entry of `key`, made when there is room; NULL when there is not. */
static lt_cost_t *entry(lt_pace_t *p, const void *key) {
  lt_cost_t *c = find_cost(p, key);
  if (c == NULL && p->ncosts < LT_COSTS) {
    c = &p->costs[p->ncosts++];
    *c = (lt_cost_t){.key = key};
  }
  return c;
}

static double ewma(double old, double sample) {
  return old > 0 ? (1 - SMOOTH) * old + SMOOTH * sample : sample;
}

void lt__pace_admit(lt_pace_t *p, const void *key) {
  lt_cost_t *c = entry(p, key);
  if (c != NULL)
    c->admitted++;
  else
    p->others++;
}

void lt__pace_unadmit(lt_pace_t *p, const void *key) {
  lt_cost_t *c = find_cost(p, key);
  if (c != NULL && c->admitted > 0)
    c->admitted--;
  else if (p->others > 0)
    p->others--;
}

/* per_of is the server's time per instruction when busy for a chain that takes cpu_us of
 * CPU and svc_us of wall time: the CPU it needs over the cores the server gets, or the wall
 * time over the instructions it runs at once, whichever binds. */
static double per_of(const lt_pace_t *p, double cpu_us, double svc_us) {
  double by_cpu = p->cores > 0 ? cpu_us / p->cores : 0;
  double by_threads = svc_us / lt__pace_parallel(p);
  return by_cpu > by_threads ? by_cpu : by_threads;
}

void lt__pace_service(lt_pace_t *p, const void *key, double svc_us, double cpu_us) {
  if (svc_us < 1) svc_us = 1; /* a clock tick: empty kernels still cost a dispatch */
  p->svc_us = ewma(p->svc_us, svc_us);
  p->svc_last[p->svc_n++ % LT_TAIL] = (float)svc_us;
  /* A slow mean, weighing each instruction alike: a burst of cheap ones between expensive
   * ones must not make the server look fast (the depth would queue seconds of work). */
  double per = per_of(p, cpu_us, svc_us);
  double w = p->completed < LT_PER_SPAN ? 1.0 / (double)(p->completed + 1) : 1.0 / LT_PER_SPAN;
  p->per_us = p->per_us > 0 ? (1 - w) * p->per_us + w * per : per;
  p->completed++;
  lt_cost_t *c = entry(p, key);
  if (c == NULL) return;
  c->cpu = ewma(c->cpu, cpu_us);
  c->raw = ewma(c->raw, svc_us);
  if (c->ref <= 0 || c->raw < c->ref) c->ref = c->raw;
  p->slow_sum += svc_us / c->ref;
  p->slow_n++;
  recompute(p);
}

/* memo_of returns the memo slot of chain `key`: its own, or the one taken longest ago,
 * cleared (never where the chain lies in memory: the simulator's runs must not depend on
 * it); NULL without a memo. */
static lt_pace_memo_slot_t *memo_of(const lt_sched_t *s, const void *key) {
  lt_pace_memo_t *memo = s->pace_memo;
  if (memo == NULL) return NULL;
  for (size_t k = 0; k < LT_PACE_MEMO; k++)
    if (memo->slot[k].key == key) return &memo->slot[k];
  lt_pace_memo_slot_t *m = &memo->slot[memo->next++ % LT_PACE_MEMO];
  *m = (lt_pace_memo_slot_t){.key = key, .idx = SIZE_MAX};
  return m;
}

/* other_cost returns the cost of chain `key` on a server other than i that has run it, or
 * NULL. The server found last for the key is tried first (a cache, not state: any server
 * that ran the chain will do), so that costing a chain on a thousand servers that never ran
 * it is not a thousand scans. */
static const lt_cost_t *other_cost(const lt_sched_t *s, size_t i, const void *key) {
  lt_pace_memo_slot_t *m = memo_of(s, key);
  if (m != NULL && m->idx != i && m->idx < s->nsrv) {
    const lt_cost_t *o = find_cost(&s->srv[m->idx].pace, key);
    if (o != NULL && o->raw > 0) return o;
  }
  /* None had, this millisecond: none has yet (a first completion is seen a tick late). */
  int64_t now = lt__clock_ms();
  if (m != NULL && m->miss_ms == now) return NULL;
  for (size_t k = 0; k < s->nsrv; k++) {
    const lt_cost_t *o = k != i ? find_cost(&s->srv[k].pace, key) : NULL;
    if (o == NULL || o->raw <= 0) continue;
    if (m != NULL) m->idx = k;
    return o;
  }
  const lt_cost_t *own = i < s->nsrv ? find_cost(&s->srv[i].pace, key) : NULL;
  if (m != NULL && (own == NULL || own->raw <= 0)) m->miss_ms = now; /* nobody at all */
  return NULL;
}

/* other_mean returns the time per instruction of a server other than i that has completed
 * something, over its cores, or 0; the one found last is tried first (as other_cost). */
static double other_mean(const lt_sched_t *s, size_t i) {
  lt_pace_memo_t *m = s->pace_memo;
  int64_t now = lt__clock_ms();
  if (m != NULL && m->mean_miss_ms == now) return 0; /* none had, this millisecond */
  size_t from = m != NULL && m->mean_idx < s->nsrv ? m->mean_idx : 0;
  for (size_t n = 0; n < s->nsrv; n++) {
    size_t k = (from + n) % s->nsrv;
    const lt_pace_t *o = &s->srv[k].pace;
    if (k == i || o->per_us <= 0) continue;
    if (m != NULL) m->mean_idx = k;
    return o->per_us * (o->cores > 0.01 ? o->cores : 0.01);
  }
  if (m != NULL && (i >= s->nsrv || s->srv[i].pace.per_us <= 0)) m->mean_miss_ms = now;
  return 0;
}

double lt__pace_cost_us(const lt_sched_t *s, size_t i, const void *key) {
  const lt_pace_t *p = &s->srv[i].pace;
  const lt_cost_t *c = find_cost(p, key);
  if (c != NULL && c->raw > 0) return per_of(p, c->cpu, c->raw);
  /* Never run here: another server's CPU and wall time, on this server's cores. */
  const lt_cost_t *o = other_cost(s, i, key);
  if (o != NULL) return per_of(p, o->cpu, o->raw);
  /* Nothing known of the chain: the server's mean; before its first completion, another
   * server's mean scaled by their cores (a tick over its cores when none has completed
   * anything), so that a server with a third of the CPU of another gets a third of the
   * first work, and a fresh server does not look free beside one whose costs are known. */
  if (p->per_us > 0) return p->per_us;
  double cores = p->cores > 0.01 ? p->cores : 0.01;
  double mean = other_mean(s, i);
  return (mean > 0 ? mean : 1.0) / cores;
}

double lt__pace_backlog_us(const lt_sched_t *s, size_t i) {
  const lt_pace_t *p = &s->srv[i].pace;
  double us = p->others * (p->per_us > 0 ? p->per_us : 1);
  for (uint32_t k = 0; k < p->ncosts; k++)
    if (p->costs[k].admitted > 0)
      us += p->costs[k].admitted * lt__pace_cost_us(s, i, p->costs[k].key);
  return us;
}

/* starve counts a report of a free thread and nothing queued while work waited at the
 * client for room on the server: the depth did not cover the refill. */
static void starve(lt_pace_t *p, const lt_load_t *load) {
  if (!p->paced || !p->held || load->queued > 0 || (double)load->active >= lt__pace_parallel(p))
    return;
  p->starved++;
  p->starved_now = 1;
  /* At most one per thread, and at most LT_SPARE_US of the server's time (one at least): a
   * refill is late by milliseconds, and long kernels lose little to it but would leave a
   * deep queue on a server that slows down. */
  double most = p->per_us > 0 ? floor(LT_SPARE_US / p->per_us) : 1;
  if (most > lt__pace_parallel(p)) most = lt__pace_parallel(p);
  if (most < 1) most = 1;
  if (p->spare < (uint32_t)most) {
    p->spare++;
    recompute(p);
  }
}

/* share_of is the share, 0..1, of the CPU the report's running instructions would use (a
 * core each, at most the server's cores) that its CPU use is; below 0 when none runs. */
static double share_of(const lt_pace_t *p, const lt_load_t *load) {
  double active = (double)load->active;
  double want = active < p->cores ? active : p->cores;
  if (want <= 0) return -1;
  double share = (double)load->cpu / want;
  return share < 0 ? 0 : share > 1 ? 1 : share;
}

void lt__pace_load(lt_pace_t *p, const lt_load_t *load) {
  double share = share_of(p, load);
  p->share_now = share < 0 ? 0 : share;
  if (share >= 0) p->share = p->share > 0 ? (1 - SMOOTH) * p->share + SMOOTH * share : share;
  p->active_sum += load->active;
  p->active_n++;
  if (load->queued > 0) p->waited = 1;
  p->load_cpu = load->cpu;
  p->parked = load->parked;
  starve(p, load);
  p->held = 0; /* the dispatcher's next turn says whether work still waits */
}

void lt__pace_full(lt_pace_t *p) {
  p->waited = 1;
  p->held = 1;
}

/* unspare takes one spare back after LT_SPARE_QUIET control periods without a starvation. */
static void unspare(lt_pace_t *p) {
  p->quiet = p->starved_now ? 0 : p->quiet + 1;
  p->starved_now = 0;
  if (p->quiet < LT_SPARE_QUIET || p->spare == 0) return;
  p->quiet = 0;
  p->spare--;
  recompute(p);
}

/* learn_cores updates the cores the server gets from the CPU use it reports (the process's
 * utilisation over its last sample): while it had more work than it ran (saturated) that is
 * its capacity, so the estimate follows it, down too (a quota cut, a hog); otherwise it is a
 * lower bound. The reports, not the CPU time of completions, because those arrive lumpily:
 * long instructions running now have not reported theirs. */
static void learn_cores(lt_pace_t *p, int saturated) {
  double used = p->load_cpu;
  if (used <= 0) return; /* no sample yet */
  if (saturated)
    p->cores = 0.5 * p->cores + 0.5 * (used > 0.01 ? used : 0.01);
  else if (used > p->cores)
    p->cores = used;
}

/* decide returns the window for the period just ended: one step at most. */
static uint32_t decide(lt_pace_t *p, const lt_options_t *o, double slowdown, double active,
                       int waited) {
  uint32_t w = p->window;
  if (slowdown > SLOWER) {
    if (w > o->min_threads) {
      /* A grow undone at once: the server is at its knee; wait longer before the next. */
      if (p->grew) p->backoff = p->backoff ? 2 * p->backoff : BACKOFF;
      p->hold = p->backoff;
      p->shrunk = 1;
      w--;
    }
  } else if (slowdown < KEEPUP && (waited || active >= w - 0.5) && w < o->max_threads) {
    /* As fast as its reference while the window is the limit: work waited at the server,
     * or at the client for room, or every thread of the window was busy. */
    if (p->hold > 0)
      p->hold--;
    else
      w = p->shrunk ? w + 1 : 2 * w; /* doubles until the first shrink, as a slow start */
    if (w > o->max_threads) w = o->max_threads;
  } else if (p->hold > 0) {
    p->hold--;
  }
  p->grew = w > p->window;
  if (w >= p->window && p->backoff > BACKOFF && p->hold == 0) p->backoff /= 2;
  return w;
}

/* lt__pace_control ends a control period when one is due and moves the window (one step
 * at most: see decide); returns 1 when the window changed. */
int lt__pace_control(lt_pace_t *p, const lt_options_t *o, int64_t now_ms, int64_t t0_ms) {
  int64_t dt = now_ms - p->period_ms;
  if (dt < LT_CONTROL_MS) return 0;
  double active = p->active_n > 0 ? p->active_sum / p->active_n : 0;
  double slowdown = p->slow_n > 0 ? p->slow_sum / p->slow_n : 1;
  uint32_t n = p->slow_n;
  p->period_ms = now_ms;
  p->active_sum = 0;
  p->active_n = 0;
  p->slow_sum = 0;
  p->slow_n = 0;
  int waited = p->waited;
  p->waited = 0;
  learn_cores(p, waited || active + 1 >= lt__pace_parallel(p) - 0.5);
  for (uint32_t i = 0; i < p->ncosts; i++)
    p->costs[i].ref *= FORGET;
  unspare(p);
  if (!o->throttle || n < 4) return 0; /* too little to judge */
  uint32_t w = decide(p, o, slowdown, active, waited);
  if (w == p->window) return 0;
  p->window = w;
  recompute(p);
  record(p, now_ms - t0_ms);
  return 1;
}

double lt__pace_parallel(const lt_pace_t *p) {
  uint32_t t = p->window;
  if (p->workers > 0 && p->workers < t) t = p->workers;
  return t > 0 ? (double)t : 1;
}

double lt__pace_usual_share(const lt_pace_t *p) {
  return p->share > 0 ? p->share : 1;
}

double lt__pace_service_us(const lt_sched_t *s, size_t i, const void *key) {
  const lt_cost_t *c = find_cost(&s->srv[i].pace, key);
  return c != NULL && c->raw > 0 ? c->raw : lt__pace_known_us(s, key);
}

/* scan_chains collects the chains measured on some server into keys (at most max). */
static size_t scan_chains(const lt_sched_t *s, const void **keys, size_t max) {
  size_t n = 0;
  for (size_t k = 0; k < s->nsrv && n < max; k++) {
    const lt_pace_t *p = &s->srv[k].pace;
    for (uint32_t c = 0; c < p->ncosts && n < max; c++) {
      size_t d = 0;
      while (d < n && keys[d] != p->costs[c].key)
        d++;
      if (d == n && p->costs[c].raw > 0) keys[n++] = p->costs[c].key;
    }
  }
  return n;
}

size_t lt__pace_chains(const lt_sched_t *s, const void ***keys) {
  static const void *none[1];
  lt_pace_memo_t *m = s->pace_memo;
  if (m == NULL) {
    *keys = none;
    return 0;
  }
  int64_t now = lt__clock_ms();
  if (m->chains_ms != now) {
    m->nchains = scan_chains(s, m->chains, sizeof m->chains / sizeof m->chains[0]);
    m->chains_ms = now;
  }
  *keys = m->chains;
  return m->nchains;
}

double lt__pace_known_us(const lt_sched_t *s, const void *key) {
  /* Looked up once a millisecond per chain at most: a dispatch asks
   * for every instruction, and a scan of a thousand servers each time would cost more than
   * the instruction. */
  lt_pace_memo_slot_t *m = memo_of(s, key);
  int64_t now = lt__clock_ms();
  if (m != NULL && m->known_ms == now) return m->known_us;
  double best = 0;
  for (size_t k = 0; k < s->nsrv; k++) {
    const lt_cost_t *c = find_cost(&s->srv[k].pace, key);
    if (c != NULL && c->raw > 0 && (best == 0 || c->raw < best)) best = c->raw;
  }
  if (m != NULL) {
    m->known_ms = now;
    m->known_us = best;
  }
  return best;
}
