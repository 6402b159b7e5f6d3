#!/usr/bin/env python3
"""tests/docs/check_tables.py: the guide's reference tables against the code (run by ctest).

Every error code of LT_ERRNO_MAP (proto/include/lithium/error.h) is a row of the "Errors"
table of docs/guide.md, once, with lt_strerror's text, a "when" and a "what to do"; the
texts are unique per code. Every option of LT_OPTIONS (client/options.h) is a row of the
"Options" table, once, and that table has no other rows. Python 3 standard library only.
Exit status 0 when all holds, 1 with every failure listed.
"""
import os
import re
import sys

failures = []


def section(text, title):
    """The text of section `## title` up to the next `## ` heading."""
    m = re.search(r'^## %s\n(.*?)(?=^## )' % re.escape(title), text, re.S | re.M)
    if not m:
        failures.append('docs/guide.md has no "## %s" section' % title)
        return ''
    return m.group(1)


def rows(text):
    """The cells of every table row of `text` whose first cell is `code`."""
    out = []
    for line in text.split('\n'):
        m = re.match(r'^\| `([A-Za-z_]+)` \|(.*)\|$', line)
        if m:
            out.append([m.group(1)] + [c.strip() for c in m.group(2).split(' | ')])
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else '.'
    guide = open(os.path.join(src, 'docs/guide.md'), encoding='utf-8').read()
    errh = open(os.path.join(src, 'proto/include/lithium/error.h'), encoding='utf-8').read()
    opth = open(os.path.join(src, 'client/options.h'), encoding='utf-8').read()

    codes = re.findall(r'XX\((E[A-Z]+), (-\d+), "([^"]*)"\)', errh)
    if len(codes) < 20:
        failures.append('error.h: found only %d codes in LT_ERRNO_MAP' % len(codes))
    texts = {}
    for name, _, text in codes:
        if text in texts:
            failures.append('LT_%s and LT_%s share the text "%s"' % (texts[text], name, text))
        texts[text] = name
    table = rows(section(guide, 'Errors'))
    seen = {}
    for r in table:
        seen.setdefault(r[0], []).append(r)
    for name, _, text in codes:
        got = seen.get('LT_' + name, [])
        if len(got) != 1:
            failures.append('guide Errors table: LT_%s is in %d rows, not 1' % (name, len(got)))
            continue
        r = got[0]
        if len(r) != 4:
            failures.append('guide Errors table: LT_%s: %d columns, not code | text | when | '
                            'what to do' % (name, len(r)))
            continue
        if r[1] != text:
            failures.append('guide Errors table: LT_%s reads "%s", lt_strerror "%s"' %
                            (name, r[1], text))
        if not r[2] or not r[3]:
            failures.append('guide Errors table: LT_%s has an empty cell' % name)
    known = {'LT_' + c[0] for c in codes}
    for code in seen:
        if code not in known:
            failures.append('guide Errors table: %s is no code of LT_ERRNO_MAP' % code)

    keys = re.findall(r'^\s*X\(([a-z_]+), LT_OPT_', opth, re.M)
    if len(keys) < 20:
        failures.append('options.h: found only %d options in LT_OPTIONS' % len(keys))
    opts = section(guide, 'Options')
    table = opts.split('\n### ')[0]  # the table, not the details after it
    count = {}
    for r in rows(table):
        count[r[0]] = count.get(r[0], 0) + 1
    for k in keys:
        if count.get(k, 0) != 1:
            failures.append('guide Options table: %s is in %d rows, not 1' % (k, count.get(k, 0)))
    for k in count:
        if k not in keys:
            failures.append('guide Options table: %s is no option of LT_OPTIONS' % k)
    for line in table.split('\n'):
        if line.startswith('| `') and len(line) > 250:
            failures.append('guide Options table: a row of %d characters (one line a key: '
                            'the details go below the table): %s...' % (len(line), line[:60]))

    for f in failures:
        print('check_tables: FAIL: ' + f)
    print('check_tables: %d error codes, %d options checked' % (len(codes), len(keys)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
