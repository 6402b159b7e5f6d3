/* sched_servers.h: the calls that change the server table (servers.c: marking a server dead,
 * its policies' limits, releases sent to it; cancels are failures.c's) and a server's pacing
 * (pace.c: round trips, service times, admitted backlog, load reports, the throttle's window). What
 * these owners answer without changing anything is in policy_view.h. The core's files only.
 * Dispatcher thread only. */
#ifndef LT_SCHED_SERVERS_H
#define LT_SCHED_SERVERS_H

#include "policy_view.h"

/* servers.c: what changes a server entry. */
/* lt__server_mark_dead marks server i dead for `why` (the first reason stays), and, when
 * `final`, not to be greeted again: the loop's reap phase ends its session. */
void lt__server_mark_dead(lt_sched_t *s, size_t i, const char *why, int final);
/* lt__server_misbehaved drops server i for a protocol error (`why`): a message it sent was
 * malformed or did not match what the client sent it. It is marked dead and not greeted again
 * in this evaluation (its work is placed elsewhere at the reap), counted and logged. */
void lt__server_misbehaved(lt_sched_t *s, size_t i, const char *why);
/* lt__server_limit sets policy `policy`'s limit on server i (LT_NO_LIMIT lifts it). */
void lt__server_limit(lt_sched_t *s, size_t i, size_t policy, uint32_t n);
/* lt__server_release queues `id` for release on server i (sent once a turn by
 * lt__servers_flush_releases); an id of another session is refused and logged as a bug. */
void lt__server_release(lt_sched_t *s, int i, lt_oid_t id);
void lt__servers_flush_releases(lt_sched_t *s);

/* entries.c: the entries' lives (holder ids are resolved in policy_view.h). */
/* lt__entry_sid returns the id of a new session: never 0, unique until 2^32 sessions. */
uint32_t lt__entry_sid(lt_sched_t *s);
/* lt__entry_ended notes that entry idx's welcomed session ended (now, in the epoch of runs). */
void lt__entry_ended(lt_sched_t *s, size_t idx);
/* lt__entries_held_by notes that job j's current run holds a value on a live session now. */
void lt__entries_held_by(lt_sched_t *s, lt_job_rec_t *j);
/* lt__entry_reuse returns a free entry (reclaimed, reset, its policies' blobs kept), or -1. */
long lt__entry_reuse(const lt_sched_t *s);
/* lt__entries_used counts the entries in use (not free). */
size_t lt__entries_used(const lt_sched_t *s);
/* lt__entries_reclaim makes free the entries whose sessions ended and that nothing can refer
 * to any more (entries.c says when); returns how many. Between the loop's phases only. */
size_t lt__entries_reclaim(lt_sched_t *s);

/* pace.c: what changes a server's pacing (its figures are in policy_view.h). */
/* lt__pace_init starts a server's pacing, admitting `first_cap` at once until it has
 * samples. */
void lt__pace_init(lt_pace_t *p, uint32_t first_cap, const lt_options_t *o, int64_t now_ms);
/* lt__pace_welcome takes the server's cores from its welcome: the host's, or the CPU its
 * cgroup quota allows when that is less (`cpus`, validated here). */
void lt__pace_welcome(lt_pace_t *p, uint32_t cores, double cpus);
void lt__pace_rtt(lt_pace_t *p, double rtt_us);
/* lt__pace_noise takes a delay between the server and the client that is not work: a ping's
 * round trip, or how much later than its service time a completion arrived after the client
 * saw it start (policy_view.h, lt__pace_noise_us). */
void lt__pace_noise(lt_pace_t *p, double us, int64_t now_ms);
/* lt__pace_service takes a completion of chain `key` that ran svc_us, using cpu_us of CPU. */
void lt__pace_service(lt_pace_t *p, const void *key, double svc_us, double cpu_us);
/* lt__pace_admit/unadmit count an instruction of chain `key` in or out of the backlog. */
void lt__pace_admit(lt_pace_t *p, const void *key);
void lt__pace_unadmit(lt_pace_t *p, const void *key);
void lt__pace_load(lt_pace_t *p, const lt_load_t *load);
/* lt__pace_full notes that work waited at the client because the server had no room. */
void lt__pace_full(lt_pace_t *p);
int lt__pace_control(lt_pace_t *p, const lt_options_t *o, int64_t now_ms, int64_t t0_ms);

#endif
