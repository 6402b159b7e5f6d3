/* policy_registry.h: the registry of the dispatcher's policies, the one place a policy is
 * named: one line per policy, X(NAME), in the order their hooks run. NAME's ops table is
 * `lt__policy_NAME`, defined in client/NAME.c (its hooks, its state sizes, its stats);
 * policy.h declares each table and sizes the policy table from this list, policy.c builds
 * the registry from it, and client/CMakeLists.txt compiles client/NAME.c for each line. Any
 * thread (constants only). */
#ifndef LT_POLICY_REGISTRY_H
#define LT_POLICY_REGISTRY_H

#define LT_POLICY_REGISTRY(X)                                                                      \
  X(deadline)                                                                                      \
  X(watchdog)                                                                                      \
  X(crash)                                                                                         \
  X(quarantine)                                                                                    \
  X(backup)                                                                                        \
  X(migrate)                                                                                       \
  X(drain)                                                                                         \
  X(locality)                                                                                      \
  /* a new policy: X(NAME) above this line */

#endif
