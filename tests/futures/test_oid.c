/* test_oid.c: object ids: random client ids and their printable form. */
#include <criterion/criterion.h>
#include <string.h>

#include "oid.h"

Test(oid, client_random_nonzero_and_distinct) {
  uint64_t a = lt__oid_client_random();
  uint64_t b = lt__oid_client_random();
  cr_assert_neq(a, 0);
  cr_assert_neq(b, 0);
  cr_assert_neq(a, b, "two random client ids collided: %llx", (unsigned long long)a);
}

Test(oid, eq) {
  lt_oid_t a = {1, 2}, b = {1, 2}, c = {1, 3}, d = {2, 2};
  cr_assert(lt__oid_eq(a, b));
  cr_assert_not(lt__oid_eq(a, c));
  cr_assert_not(lt__oid_eq(a, d));
}

Test(oid, format) {
  char buf[34];
  lt_oid_t id = {0x1234abcdULL, 0xffULL};
  cr_assert_eq(lt__oid_format(id, buf, sizeof buf), buf);
  cr_assert_str_eq(buf, "0000...:00000000000000ff");
  lt_oid_t big = {UINT64_MAX, UINT64_MAX};
  lt__oid_format(big, buf, sizeof buf);
  cr_assert_str_eq(buf, "ffff...:ffffffffffffffff");
  cr_assert_eq(strlen(buf), 24);
}

Test(oid, format_truncates_safely) {
  char buf[8];
  memset(buf, 'x', sizeof buf);
  lt_oid_t id = {1, 2};
  lt__oid_format(id, buf, sizeof buf);
  cr_assert_eq(buf[7], '\0');
  cr_assert_str_eq(buf, "0000...");
}
