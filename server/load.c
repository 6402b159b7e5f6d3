/* load.c: the load report every server->client message carries (DESIGN.md 5): executor
 * counters (queued includes the instructions held back by a session's thread window),
 * parked instructions, store size, bytes fetched from and served to peer servers, and the
 * process's recent CPU use, sampled with getrusage every 250 ms by a uv timer, plus the
 * server's incarnation and whether it is stopping. The same timer trims the output buffer
 * pool (bufpool.h) of buffers left idle.
 * Loop thread only. */
#include <sys/resource.h>
#include <sys/time.h>
#include "bufpool.h"
#include "server.h"

#define LOAD_SAMPLE_MS 250 /* the client learns a server's cores from it: keep it recent */

static uint64_t cpu_us(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void on_sample(uv_timer_t *h) {
  lt_server_t *srv = h->data;
  uint64_t cpu = cpu_us();
  uint64_t wall = uv_hrtime() / 1000u;
  if (wall > srv->wall_prev_us && cpu >= srv->cpu_prev_us)
    srv->cpu = (float)((double)(cpu - srv->cpu_prev_us) / (double)(wall - srv->wall_prev_us));
  srv->cpu_prev_us = cpu;
  srv->wall_prev_us = wall;
  /* The output pool's clock: buffers idle for LT_BUFPOOL_IDLE_TICKS samples are unmapped. */
  lt__bufpool_tick();
}

void lt__load_start(lt_server_t *srv) {
  srv->cpu_prev_us = cpu_us();
  srv->wall_prev_us = uv_hrtime() / 1000u;
  srv->load_timer.data = srv;
  uv_timer_start(&srv->load_timer, on_sample, LOAD_SAMPLE_MS, LOAD_SAMPLE_MS);
}

void lt__load_fill(lt_server_t *srv, lt_load_t *load) {
  load->active = load->queued = 0;
  if (srv->ex != NULL) lt__executor_counts(srv->ex, &load->active, &load->queued);
  load->parked = srv->parked;
  load->completed = srv->completed;
  load->cpu = srv->cpu;
  load->values_held = lt__store_count(srv->store);
  load->threads = srv->threads;
  load->peer_in = srv->peer_in;
  load->peer_out = srv->peer_out;
  load->incarnation = srv->incarnation;
  load->stopping = srv->stopping;
  load->shm_in = srv->shm_in;
  load->shm_out = srv->shm_out;
  load->shm_values_in = srv->shm_values_in;
  load->shm_values_out = srv->shm_values_out;
  load->shm_fallbacks = srv->shm_fallbacks;
  load->shm_us = srv->shm_us;
}
