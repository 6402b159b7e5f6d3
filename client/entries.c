/* entries.c: the server table's entries over their lives: the session id each new session
 * gets (what a token's holder id names with the entry's index, policy_view.h), and the
 * reclamation of an entry whose session ended once nothing can refer to it any more, so
 * that the table stays as large as the servers it has, however often they restart. It owns
 * the entries' `sid` and `ended` and the table's free entries; a free entry (sid 0) is dead,
 * greeted never, shown nowhere, and keeps its policies' blobs, zeroed, for its next session.
 * Touches no record, job or policy state. Dispatcher thread only.
 *
 * A session's entry is reclaimed when it was welcomed and has ended, its server has been
 * greeted again in a successor entry that was welcomed (so what the session's loss cost the
 * tasks is settled, failures.c), nothing is out there, and no task's current run held a value
 * on a server before the session ended: only such a run can hold a reference to one of its
 * values (a run whose first value came later got every value from sessions then live; a run
 * that holds none, such as a task waiting for room, holds up nothing). Records of older runs are
 * stale and only release what they held; their ids of a reclaimed session resolve to no entry (-1),
 * so nothing is ever read from or released on the entry's next session. */
#include <stdlib.h>
#include <string.h>

#include "log.h"

#include "sched_failures.h"
#include "sched_jobs.h"
#include "sched_servers.h"

uint32_t lt__entry_sid(lt_sched_t *s) {
  if (++s->next_sid == 0) s->next_sid = 1; /* 0 marks a free entry */
  return s->next_sid;
}

void lt__entry_ended(lt_sched_t *s, size_t idx) {
  s->srv[idx].ended = ++s->ends;
}

void lt__entries_held_by(lt_sched_t *s, lt_job_rec_t *j) {
  if (j->epoch > s->ends) j->epoch = s->ends; /* the first value held is the oldest */
}

long lt__entry_reuse(const lt_sched_t *s) {
  for (size_t i = 0; i < s->nsrv; i++)
    if (s->srv[i].sid == 0) return (long)i;
  return -1;
}

size_t lt__entries_used(const lt_sched_t *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->nsrv; i++)
    n += s->srv[i].sid != 0;
  return n;
}

/* oldest_run returns the epoch of the oldest run of a task still going (UINT64_MAX: none). */
static uint64_t oldest_run(const lt_sched_t *s) {
  uint64_t oldest = UINT64_MAX;
  for (const lt_job_rec_t *j = s->jobs; j != NULL; j = j->hh.next)
    if (!j->finished && j->epoch < oldest) oldest = j->epoch;
  return oldest;
}

/* reclaimable tells whether entry i's session ended and nothing refers to it (above), given
 * the epoch of the oldest run. */
static int reclaimable(const lt_sched_t *s, size_t i, uint64_t oldest) {
  const lt_server_t *v = &s->srv[i];
  return v->sid != 0 && v->ended != 0 && v->ended <= oldest && !v->gone &&
         v->conn.state == LT_CONN_DEAD && v->slot.successor >= 0 && v->slot.crashed != 0 &&
         v->slot.out == NULL && v->relq.n == 0 && v->slot.watch_fd < 0;
}

/* reset frees what entry i holds and makes it a free entry: its traffic is added to the
 * reclaimed entries', its neighbours in its server's chain of sessions skip it, and its
 * policies' blobs are zeroed for the next session (policy.h: they hold no allocation). */
static void reset(lt_sched_t *s, size_t i) {
  lt_server_t *v = &s->srv[i];
  s->gone_bytes_to += v->conn.bytes_out;
  s->gone_bytes_from += v->conn.bytes_in;
  long prev = v->slot.predecessor, next = v->slot.successor;
  if (prev >= 0) s->srv[prev].slot.successor = next;
  if (next >= 0) s->srv[next].slot.predecessor = -1; /* it was welcomed: read no more */
  void *blob[LT_POLICY_MAX];
  memcpy(blob, v->blob, sizeof blob);
  lt__conn_close(&v->conn);
  free(v->relq.ids);
  lt__fail_forget(s, i);
  memset(v, 0, sizeof *v);
  memcpy(v->blob, blob, sizeof blob);
  for (size_t k = 0; k < s->npolicies; k++)
    if (blob[k] != NULL) memset(blob[k], 0, s->policies[k].ops->server_size);
  for (size_t k = 0; k < LT_POLICY_MAX; k++)
    v->limit[k] = LT_NO_LIMIT;
  v->conn.state = LT_CONN_DEAD;
  v->slot.watch_fd = -1;
  v->slot.successor = v->slot.predecessor = -1;
}

size_t lt__entries_reclaim(lt_sched_t *s) {
  /* A request still queued may name an entry: it is applied first. */
  if (s->requests.n > 0) return 0;
  uint64_t oldest = UINT64_MAX;
  int looked = 0;
  size_t n = 0;
  for (size_t i = 0; i < s->nsrv; i++) {
    if (s->srv[i].sid == 0 || s->srv[i].ended == 0 || s->srv[i].slot.successor < 0) continue;
    if (!looked) { /* O(tasks) once a pass, and only when some entry may go */
      oldest = oldest_run(s);
      looked = 1;
    }
    if (!reclaimable(s, i, oldest)) continue;
    lt__log(LT_LOG_DEBUG, "server table: entry %zu (session %u) reclaimed", i, s->srv[i].sid);
    reset(s, i);
    n++;
  }
  return n;
}
