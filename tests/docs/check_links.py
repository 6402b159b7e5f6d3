#!/usr/bin/env python3
"""tests/docs/check_links.py: README.md and docs/*.md hold together (run by ctest).

Every relative link of README.md and docs/*.md names a file of the tree, and its #anchor a
heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to '-');
README.md, the front door, stays at most 300 lines and links every docs/*.md file. Python 3
standard library only. Exit status 0 when all holds, 1 with every failure listed.
"""
import glob
import os
import re
import sys

README_MAX_LINES = 300


def slug(heading):
    s = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return s.replace(' ', '-')


def anchors(path):
    out, infence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            infence = not infence
        m = re.match(r'^#+ (.*)$', line)
        if m and not infence:
            out.add(slug(m.group(1)))
    return out


def links(path):
    text = open(path, encoding='utf-8').read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    text = re.sub(r'`[^`\n]*`', '', text)
    return re.findall(r'\]\(([^)\s]+)\)', text)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else '.'
    readme = os.path.join(src, 'README.md')
    docs = sorted(glob.glob(os.path.join(src, 'docs', '*.md')))
    failures = []
    for path in [readme] + docs:
        for target in links(path):
            if re.match(r'^[a-z]+:', target):
                continue
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            rel = os.path.relpath(path, src)
            if not os.path.exists(dest):
                failures.append('%s: link to %s: no such file' % (rel, target))
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                failures.append('%s: link to %s: no heading with that anchor in %s' %
                                (rel, target, os.path.relpath(dest, src)))
    n = sum(1 for _ in open(readme, encoding='utf-8'))
    if n > README_MAX_LINES:
        failures.append('README.md has %d lines; the front door stays at most %d (move the rest '
                        'to docs/)' % (n, README_MAX_LINES))
    readme_links = {os.path.normpath(os.path.join(src, t.partition('#')[0])) for t in links(readme)}
    for d in docs:
        if os.path.normpath(d) not in readme_links:
            failures.append('README.md does not link %s' % os.path.relpath(d, src))
    if not docs:
        failures.append('no docs/*.md found')
    for f in failures:
        print('check_links: FAIL: ' + f, file=sys.stderr)
    print('check_links: README.md (%d lines) and %d docs files checked' % (n, len(docs)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
