/* test_cpus.c: the CPU a server says it may use (server/cpus.c), read from cgroup files laid
 * out by the test in a directory of its own: a v1 cpu hierarchy and a v2 unified one, quotas
 * on the process's group and on an ancestor (the tightest wins), none ("max", -1), a mount
 * whose root is not "/", and files that are missing or malformed (no quota). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpus.h"

static char root[] = "/tmp/lt_cpusXXXXXX";
static char cgroup_file[256], mountinfo_file[256];

/* put writes `text` to root/rel, making its directories. */
static void put(const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(path, 0700);
    *p = '/';
  }
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

/* mounts writes a mountinfo with a v1 cpu hierarchy and a v2 one under root. */
static void mounts(const char *v1_root, const char *v2_root) {
  char text[2048];
  snprintf(text, sizeof text,
           "31 23 0:28 / %s/fs rw,relatime - tmpfs tmpfs rw\n"
           "32 31 0:29 %s %s/fs/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
           "33 31 0:30 / %s/fs/memory rw,relatime - cgroup cgroup rw,memory\n"
           "34 31 0:31 %s %s/fs/unified rw,relatime - cgroup2 cgroup2 rw\n",
           root, v1_root, root, root, v2_root, root);
  put("mountinfo", text);
}

static void setup(void) {
  cr_assert_not_null(mkdtemp(root));
  snprintf(cgroup_file, sizeof cgroup_file, "%s/cgroup", root);
  snprintf(mountinfo_file, sizeof mountinfo_file, "%s/mountinfo", root);
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(cpus, .init = setup, .fini = teardown);

Test(cpus, a_v1_quota_on_the_group_counts) {
  mounts("/", "/");
  put("cgroup", "4:memory:/m\n1:cpu,cpuacct:/grid/s1\n0::/\n");
  put("fs/cpu/grid/s1/cpu.cfs_quota_us", "30000\n");
  put("fs/cpu/grid/s1/cpu.cfs_period_us", "100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0.3, 1e-9);
}

Test(cpus, the_tightest_of_the_group_and_its_ancestors_wins) {
  mounts("/", "/");
  put("cgroup", "1:cpu,cpuacct:/grid/s1\n");
  put("fs/cpu/grid/s1/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu/grid/s1/cpu.cfs_period_us", "100000\n");
  put("fs/cpu/grid/cpu.cfs_quota_us", "150000\n");
  put("fs/cpu/grid/cpu.cfs_period_us", "100000\n");
  put("fs/cpu/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu/cpu.cfs_period_us", "100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 1.5, 1e-9);
}

Test(cpus, a_v2_cpu_max_counts_and_max_is_none) {
  mounts("/", "/");
  put("cgroup", "0::/svc/a\n");
  put("fs/unified/svc/a/cpu.max", "90000 100000\n");
  put("fs/unified/svc/cpu.max", "max 100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0.9, 1e-9);
  put("fs/unified/svc/a/cpu.max", "max 100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0, 1e-9);
}

Test(cpus, v1_and_v2_together_take_the_tighter) {
  mounts("/", "/");
  put("cgroup", "1:cpu:/a\n0::/b\n");
  put("fs/cpu/a/cpu.cfs_quota_us", "50000\n");
  put("fs/cpu/a/cpu.cfs_period_us", "100000\n");
  put("fs/unified/b/cpu.max", "20000 100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0.2, 1e-9);
}

Test(cpus, a_mount_root_other_than_slash_is_stripped) {
  mounts("/grid", "/");
  put("cgroup", "1:cpu,cpuacct:/grid/s0\n");
  put("fs/cpu/s0/cpu.cfs_quota_us", "80000\n");
  put("fs/cpu/s0/cpu.cfs_period_us", "100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0.8, 1e-9);
}

Test(cpus, missing_or_malformed_files_are_no_quota) {
  mounts("/", "/");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0, 1e-9, "no cgroup file");
  put("cgroup", "garbage without colons\n1:cpu:/x\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0, 1e-9, "no quota files");
  put("fs/cpu/x/cpu.cfs_quota_us", "12abc\n");
  put("fs/cpu/x/cpu.cfs_period_us", "100000\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0, 1e-9, "a bad number");
  put("fs/cpu/x/cpu.cfs_quota_us", "50000\n");
  put("fs/cpu/x/cpu.cfs_period_us", "0\n");
  cr_assert_float_eq(lt__cpus_quota(cgroup_file, mountinfo_file), 0, 1e-9, "a zero period");
  cr_assert_float_eq(lt__cpus_quota("/nonexistent/cgroup", "/nonexistent/mountinfo"), 0, 1e-9);
}

Test(cpus, the_process_may_use_at_least_some_cpu) {
  double n = lt__cpus_allowed();
  cr_assert_gt(n, 0);
  cr_assert_leq(n, (double)sysconf(_SC_NPROCESSORS_ONLN));
}
