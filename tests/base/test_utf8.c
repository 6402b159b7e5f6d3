/* tests/base/test_utf8.c: the UTF-8 checks (proto/base/utf8.h): sequence lengths, the
 * forms that are refused, the sanitizer's '?' for control characters and bad bytes, and
 * the escapes of text printed from files and peers. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

Test(utf8, valid_and_invalid) {
  cr_assert(lt__utf8_valid("plain ascii", 11));
  cr_assert(lt__utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* é € 😀 */
  cr_assert_not(lt__utf8_valid("\xc0\xaf", 2));                         /* overlong */
  cr_assert_not(lt__utf8_valid("\xed\xa0\x80", 3));                     /* surrogate */
  cr_assert_not(lt__utf8_valid("\xf4\x90\x80\x80", 4));                 /* above U+10FFFF */
  cr_assert_not(lt__utf8_valid("\xe2\x82", 2));                         /* cut short */
  cr_assert_eq(lt__utf8_seq((const unsigned char *)"\xe2\x82\xac", 3), 3);
  cr_assert_eq(lt__utf8_seq((const unsigned char *)"\x80", 1), 0);
}

Test(utf8, sanitize) {
  char s[] = "ok\x01\xc3\xa9\xff\x7f\xe2\x82";
  lt__utf8_sanitize(s);
  cr_assert_str_eq(s, "ok?\xc3\xa9????");
}

/* Text from files and peers is printed with its control characters escaped (issue 36 item
 * 5): C0, DEL, C1 (the one-byte CSI a terminal obeys) and bad bytes; the rest as it was. */
Test(utf8, escape) {
  char out[128];
  size_t n = lt__text_escape("ok\x1b[31mred\xc2\x9b"
                             "2J\xff\t\x7f\xc3\xa9!",
                             out, sizeof out);
  cr_assert_str_eq(out, "ok\\x1b[31mred\\u009b2J\\xff\\x09\\x7f\xc3\xa9!");
  cr_assert_eq(n, strlen(out));
  /* Cut at a whole escape, never inside one. */
  lt__text_escape("ab\x1b", out, 6);
  cr_assert_str_eq(out, "ab");
  char *d = lt__text_escape_dup("\x01\xc2\x80");
  cr_assert_str_eq(d, "\\x01\\u0080");
  free(d);
}
