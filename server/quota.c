/* quota.c: per-session quotas, their server-wide caps and the session limit (see quota.h). Bytes
 * held are counted by client id, as the store names values, in a small table fed by the store's
 * accounting callback; the other counts live in the session (task.c keeps them). */
#include "quota.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <lithium/error.h>
#include "log.h"
#include "session.h"

#define TRIM_BYTES ((uint64_t)1 << 20)

typedef struct held {
  UT_hash_handle hh;
  bool oom;
  uint64_t client; /* key */
  uint64_t bytes;
  uint64_t ids; /* pending, ready or failed */
} held_t;

struct lt_quota {
  uint64_t max_bytes;
  uint64_t max_total_bytes, max_total_values; /* all sessions together */
  uint64_t total_bytes, total_ids;            /* held now, all clients together */
  uint32_t max_parked, max_queued, max_sessions, max_values, max_fetches;
  held_t *held;
  uint64_t freed; /* bytes that left the store since the last trim */
  uint64_t refused, last_log_ms;
};

/* add adds `delta` to *n, stopping at 0. */
static void add(uint64_t *n, int64_t delta) {
  *n = delta < 0 && (uint64_t)-delta > *n ? 0 : *n + (uint64_t)delta;
}

static void on_account(uint64_t client, int64_t bytes, int64_t ids, void *data) {
  lt_quota_t *q = data;
  held_t *h = NULL;
  HASH_FIND(hh, q->held, &client, sizeof client, h);
  if (bytes < 0) q->freed += (uint64_t)-bytes;
  if (h == NULL) {
    if ((bytes <= 0 && ids <= 0) || (h = calloc(1, sizeof *h)) == NULL) return;
    h->client = client;
    HASH_ADD(hh, q->held, client, sizeof h->client, h);
    if (h->oom) {
      free(h);
      return;
    }
  }
  add(&h->bytes, bytes);
  add(&h->ids, ids);
  add(&q->total_bytes, bytes);
  add(&q->total_ids, ids);
  if (h->bytes == 0 && h->ids == 0) {
    HASH_DEL(q->held, h);
    free(h);
  }
}

/* raise_nofile lifts the soft open-file limit to the hard one (libzmq spins when accept
 * fails with EMFILE, so the more room the better) and returns the soft limit in force. */
static uint64_t raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rlim_t want = rl.rlim_max;
    /* Some systems report an unlimited hard limit that setrlimit refuses. */
    if (want == RLIM_INFINITY || want > 1048576) want = 1048576;
    struct rlimit nl = {want, rl.rlim_max};
    if (want > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &nl) == 0) rl.rlim_cur = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? 1048576 : (uint64_t)rl.rlim_cur;
}

/* half_the_memory is the default of --max-bytes: half the physical memory, so that values
 * held for all sessions together leave the rest to the kernels and the system. */
static uint64_t half_the_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0) return UINT64_MAX; /* not known: no cap but the sessions' */
  return (uint64_t)pages * (uint64_t)size / 2;
}

int lt__quota_new(lt_server_t *srv, const lt_srv_args_t *a) {
  lt_quota_t *q = calloc(1, sizeof *q);
  if (q == NULL) return LT_ENOMEM;
  q->max_bytes = a->max_session_bytes;
  q->max_parked = a->max_parked;
  q->max_queued = a->max_queued;
  q->max_values = a->max_values;
  q->max_fetches = a->max_fetches;
  q->max_total_values = a->max_total_values;
  q->max_total_bytes = a->max_bytes != 0 ? a->max_bytes : half_the_memory();
  uint64_t nofile = raise_nofile();
  uint64_t room = nofile / 2; /* the rest: modules, peers, the loop, libzmq's own */
  if (room < 1) room = 1;
  uint64_t deflt = room < LT_SRV_MAX_SESSIONS_CAP ? room : LT_SRV_MAX_SESSIONS_CAP;
  q->max_sessions = a->max_sessions != 0 ? a->max_sessions : (uint32_t)deflt;
  if (a->max_sessions > room)
    lt__log(LT_LOG_WARN, "--max-sessions %u is above half the open-file limit (%llu)",
            a->max_sessions, (unsigned long long)nofile);
  srv->quota = q;
  lt__store_set_account(srv->store, on_account, q);
  lt__log(LT_LOG_INFO,
          "open-file limit %llu; at most %u sessions, %llu values and %llu bytes of values held "
          "for all of them",
          (unsigned long long)nofile, q->max_sessions, (unsigned long long)q->max_total_values,
          (unsigned long long)q->max_total_bytes);
  return LT_OK;
}

void lt__quota_free(lt_server_t *srv) {
  lt_quota_t *q = srv->quota;
  if (q == NULL) return;
  if (srv->store != NULL) lt__store_set_account(srv->store, NULL, NULL);
  held_t *h, *tmp;
  HASH_ITER(hh, q->held, h, tmp) {
    HASH_DEL(q->held, h);
    free(h);
  }
  free(q);
  srv->quota = NULL;
}

uint64_t lt__quota_held(const lt_server_t *srv, uint64_t client) {
  held_t *h = NULL;
  if (srv->quota == NULL) return 0;
  HASH_FIND(hh, srv->quota->held, &client, sizeof client, h);
  return h != NULL ? h->bytes : 0;
}

uint64_t lt__quota_ids(const lt_server_t *srv, uint64_t client) {
  held_t *h = NULL;
  if (srv->quota == NULL) return 0;
  HASH_FIND(hh, srv->quota->held, &client, sizeof client, h);
  return h != NULL ? h->ids : 0;
}

/* over says in err that the server-wide cap `flag` (of `max` `what`) would be crossed. */
static int over(char *err, size_t errlen, const char *what, const char *flag, uint64_t max,
                uint64_t held, uint64_t adds) {
  snprintf(err, errlen,
           "server over its cap of %s held for all sessions (%s %llu): holds %llu, this adds %llu",
           what, flag, (unsigned long long)max, (unsigned long long)held, (unsigned long long)adds);
  return LT_EQUOTA;
}

int lt__quota_server_room(const lt_server_t *srv, uint64_t bytes, uint64_t ids, char *err,
                          size_t errlen) {
  const lt_quota_t *q = srv->quota;
  if (q == NULL) return LT_OK;
  if (ids > 0 && q->total_ids + ids > q->max_total_values)
    return over(err, errlen, "values", "--max-values", q->max_total_values, q->total_ids, ids);
  if (bytes > 0 && q->total_bytes + bytes > q->max_total_bytes)
    return over(err, errlen, "bytes", "--max-bytes", q->max_total_bytes, q->total_bytes, bytes);
  return LT_OK;
}

uint32_t lt__quota_max_values(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_values : UINT32_MAX;
}

uint32_t lt__quota_max_fetches(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_fetches : UINT32_MAX;
}

uint64_t lt__quota_max_bytes(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_bytes : UINT64_MAX;
}

uint32_t lt__quota_max_parked(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_parked : UINT32_MAX;
}

uint32_t lt__quota_max_queued(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_queued : UINT32_MAX;
}

uint32_t lt__quota_max_sessions(const lt_server_t *srv) {
  return srv->quota != NULL ? srv->quota->max_sessions : UINT32_MAX;
}

bool lt__quota_session_ok(lt_server_t *srv) {
  lt_quota_t *q = srv->quota;
  if (q == NULL || HASH_COUNT(srv->sessions) < q->max_sessions) return true;
  q->refused++;
  uint64_t now = uv_now(&srv->loop);
  if (q->last_log_ms == 0 || now - q->last_log_ms >= 1000) {
    lt__log(LT_LOG_WARN, "%u sessions open (--max-sessions): refused %llu hello(s)",
            q->max_sessions, (unsigned long long)q->refused);
    q->last_log_ms = now;
    q->refused = 0;
  }
  return false;
}

void lt__quota_trim(lt_server_t *srv) {
  lt_quota_t *q = srv->quota;
  if (q == NULL || q->freed < TRIM_BYTES) return;
  q->freed = 0;
  malloc_trim(0);
}
