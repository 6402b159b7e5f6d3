/* test_announce.c: the announce file of `lithium-server --announce` (announce.c): the
 * endpoint announced for wildcard, specific and advertised addresses, and the file itself
 * (written whole, named after the server, removed). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lithium/error.h>
#include "announce.h"

Test(announce, endpoints) {
  char ep[300];
  cr_assert_eq(lt__announce_endpoint("tcp://10.1.2.3:5555", NULL, ep, sizeof ep), LT_OK);
  cr_expect_str_eq(ep, "tcp://10.1.2.3:5555");
  cr_assert_eq(lt__announce_endpoint("tcp://0.0.0.0:41000", "node7", ep, sizeof ep), LT_OK);
  cr_expect_str_eq(ep, "tcp://node7:41000");
  cr_assert_eq(lt__announce_endpoint("tcp://0.0.0.0:41000", "fd00::7", ep, sizeof ep), LT_OK);
  cr_expect_str_eq(ep, "tcp://[fd00::7]:41000");
  cr_assert_eq(lt__announce_endpoint("tcp://0.0.0.0:1", "tcp://gw:9", ep, sizeof ep), LT_OK);
  cr_expect_str_eq(ep, "tcp://gw:9");
  /* A wildcard becomes an address of this host, never the wildcard itself. */
  cr_assert_eq(lt__announce_endpoint("tcp://0.0.0.0:41000", NULL, ep, sizeof ep), LT_OK);
  cr_expect(strncmp(ep, "tcp://", 6) == 0 && strstr(ep, "0.0.0.0") == NULL, "%s", ep);
  cr_expect_str_eq(strrchr(ep, ':'), ":41000");
  cr_assert_eq(lt__announce_endpoint("tcp://[::]:7", NULL, ep, sizeof ep), LT_OK);
  cr_expect(strstr(ep, "[::]") == NULL, "%s", ep);
  cr_expect_eq(lt__announce_endpoint("ipc:///tmp/x", NULL, ep, sizeof ep), LT_EINVAL);
  cr_expect_eq(lt__announce_endpoint("tcp://10.1.2.3:5555", NULL, ep, 8), LT_EINVAL);
}

Test(announce, file_written_and_removed) {
  char dir[] = "/tmp/lt-announce-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char sub[64], path[4096], err[256];
  snprintf(sub, sizeof sub, "%s/run1", dir); /* made when missing */
  cr_assert_eq(lt__announce_write(sub, "../host:12/x", "tcp://10.0.0.1:5", path, sizeof path, err,
                                  sizeof err),
               LT_OK, "%s", err);
  char want[128];
  snprintf(want, sizeof want, "%s/_._host:12_x.endpoint", sub);
  cr_expect_str_eq(path, want);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char line[64] = "";
  cr_expect_not_null(fgets(line, sizeof line, f));
  fclose(f);
  cr_expect_str_eq(line, "tcp://10.0.0.1:5\n");
  lt__announce_remove(path);
  cr_expect_neq(access(path, F_OK), 0);
  lt__announce_remove("");
  cr_assert_eq(rmdir(sub), 0, "the temporary file was left behind");
  rmdir(dir);
  cr_expect_eq(
      lt__announce_write("/proc/no/such/dir", "n", "tcp://a:1", path, sizeof path, err, sizeof err),
      LT_EIO);
}
