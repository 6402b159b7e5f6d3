/* sched_links.h: the calls of links.c, the owner of the sessions with the servers: greeting
 * (and greeting again) a server, its session's messages (welcome, error, heartbeat, load),
 * watching its connection and process, ending a session at the loop's reap, draining and
 * retiring a server. The core's files only. Dispatcher thread only. */
#ifndef LT_SCHED_LINKS_H
#define LT_SCHED_LINKS_H

#include "policy_view.h"

/* lt__links_open_new greets the hosts added since the last call. */
void lt__links_open_new(lt_sched_t *s);
/* lt__link_on_message handles a session message of server idx (welcome, error, heartbeat,
 * the load report): 0 when the loop should go on with it (done, value), 1 when handled. */
int lt__link_on_message(lt_sched_t *s, size_t idx, const lt_msg_t *m);
/* lt__link_watch reads server idx's connection monitor; lt__link_watch_child notices that a
 * spawned server exited. Both only mark a server dead. */
void lt__link_watch(lt_sched_t *s, size_t idx);
void lt__link_watch_child(lt_sched_t *s, size_t idx);
/* lt__link_close ends server idx's session after it was marked dead (the reap phase):
 * closes it, tells the others, schedules the next greeting. 1 when the session had been
 * welcomed (its records and values are lost), 0 when it never was. */
int lt__link_close(lt_sched_t *s, size_t idx);
/* lt__links_tick greets dead servers again, pings, sends windows, finds missed heartbeats. */
void lt__links_tick(lt_sched_t *s, int64_t now_ms);
/* lt__link_drain stops giving server idx work and cancels what waits there; lt__link_retire
 * ends its session for good (bye). */
void lt__link_drain(lt_sched_t *s, size_t idx);
void lt__link_retire(lt_sched_t *s, size_t idx);
/* lt__links_close_all closes every session (the evaluator is freed). */
void lt__links_close_all(lt_sched_t *s);
/* lt__links_free frees the list of servers announced to each server. */
void lt__links_free(lt_sched_t *s);

#endif
