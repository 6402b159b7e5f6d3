/* cpus.h: the CPU this server may use, in cores: the CPUs it may run on, or less under a
 * cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, the tightest of its
 * cgroup and every ancestor). The client costs work by it from the welcome on, before any
 * completion has shown the server's speed. Any thread; reads only. */
#ifndef LT_SERVER_CPUS_H
#define LT_SERVER_CPUS_H

/* lt__cpus_allowed returns the cores this process may use (> 0). */
double lt__cpus_allowed(void);

/* lt__cpus_quota returns the cores the tightest cgroup CPU quota on the process described
 * by `cgroup_file` (as /proc/self/cgroup) allows, hierarchies found through
 * `mountinfo_file` (as /proc/self/mountinfo); 0 when there is no quota or it cannot be
 * read. Exposed for tests, which give it files of their own. */
double lt__cpus_quota(const char *cgroup_file, const char *mountinfo_file);

#endif
