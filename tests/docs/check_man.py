#!/usr/bin/env python3
"""tests/docs/check_man.py: the man pages against the code they describe (run by ctest).

Parses the installed public headers for every function they export (LT_API declarations and
the static inline accessors of lithium/kernel.h) and checks, against the page sources in
docs/man/: every function is named by a man3 page whose SYNOPSIS has the header's declaration
exactly (whitespace aside) and includes a header that declares it; every prototype of a
SYNOPSIS is a function of the headers; every function's doc comment in its header appears word
for word in its page's DESCRIPTION (the header is the source of truth); every page formats without a groff warning; and every
flag of `lithium-server --help` and `lithium --help` (and its commands' help) is in
lithium-server(8) and lithium(1); every error code of LT_ERRNO_MAP is in lt_strerror(3); with --version, every page's
.TH line names that version. With --installed MANDIR, checks instead that an installed
tree holds a page for every function name (`man NAME` finds it). Python 3 standard library
only. Exit status 0 when all holds, 1 with every failure listed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

failures = []


def fail(msg):
    failures.append(msg)


def norm(proto):
    """One space between tokens, none inside parentheses' edges, none before ';'."""
    p = ' '.join(proto.split())
    p = p.replace('( ', '(').replace(' )', ')').replace(' ;', ';')
    return p


def header_functions(path):
    """{name: prototype} of the functions `path` exports."""
    text = open(path, encoding='utf-8').read()
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    found = {}
    for m in re.finditer(r'\bLT_API\b([^;]*);', text):
        if m.group(0).startswith('LT_API __attribute__') or '#define' in text[max(0, m.start() - 8):m.start()]:
            continue
        proto = norm(m.group(1) + ';')
        found[re.search(r'(\w+)\s*\(', proto).group(1)] = proto
    for m in re.finditer(r'((?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)?)static\s+inline\s+([^{;]*)\{', text):
        proto = norm(m.group(2) + ';')
        found[re.search(r'(\w+)\s*\(', proto).group(1)] = proto
    return found


def header_comments(path):
    """{name: its doc comment, whitespace collapsed and backquotes dropped} of the functions of
    `path` that have a comment of their own right before them."""
    text = open(path, encoding='utf-8').read()
    found = {}
    for m in re.finditer(r'/\*((?:(?!\*/).)*)\*/\s*((?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)?'
                         r'(?:LT_API\b[^;]*;|static\s+inline\b[^{;]*\{))', text, re.S):
        name = re.search(r'(\w+)\s*\(', re.sub(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)', '', m.group(2))).group(1)
        comment = ' '.join(l.strip().lstrip('*') for l in m.group(1).split('\n'))
        found[name] = ' '.join(comment.replace('`', '').split())
    return found


def header_includes(path):
    return re.findall(r'#include <([^>]+)>', open(path, encoding='utf-8').read())


def unroff(line):
    line = re.sub(r'\\f[BIRP]', '', line)
    line = line.replace('\\-', '-').replace('\\e', '\\').replace('\\(dq', '"').replace('\\&', '')
    line = line.replace('\\(aq', "'")
    return line


def sections(path):
    """{section name: [lines]} of a man(7) page."""
    out, cur = {}, None
    for line in open(path, encoding='utf-8').read().split('\n'):
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            cur = m.group(1).strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def page_names(secs):
    text = ' '.join(unroff(l) for l in secs.get('NAME', []) if not l.startswith('.\\"'))
    names = text.split(' - ')[0]
    return [n.strip() for n in names.split(',') if n.strip()]


def page_synopsis(secs):
    """(includes, {name: prototype}) of a SYNOPSIS."""
    includes, body = [], []
    for line in secs.get('SYNOPSIS', []):
        if line.startswith('.'):
            m = re.match(r'^\.B\s+#include\s+<([^>]+)>', line)
            if m:
                includes.append(m.group(1))
            continue
        body.append(unroff(line))
    text = re.sub(r'/\*.*?\*/', ' ', '\n'.join(body), flags=re.S)
    text = '\n'.join(l for l in text.split('\n') if not l.strip().startswith('#'))
    protos = {}
    for chunk in re.split(r';', text):
        chunk = chunk.strip()
        if not chunk or chunk.startswith('typedef') or '{' in chunk or '}' in chunk:
            continue
        m = re.search(r'(\w+)\s*\(', chunk)
        if m:
            protos[m.group(1)] = norm(chunk + ';')
    return includes, protos


def description(secs):
    """The DESCRIPTION of a page as plain text, whitespace collapsed."""
    lines = [unroff(l) for l in secs.get('DESCRIPTION', []) if not l.startswith('.')]
    return ' '.join(' '.join(lines).split())


def check_sources(args):
    funcs, declared_in, includes_of, comments = {}, {}, {}, {}
    for h in args.header:
        rel = os.path.relpath(h, args.include_root[args.header.index(h)]) if args.include_root else os.path.basename(h)
        includes_of[rel] = header_includes(h)
        for name, proto in header_functions(h).items():
            funcs[name] = proto
            declared_in[name] = rel
        comments.update(header_comments(h))
    if len(funcs) < 10:
        fail('only %d functions found in the headers: the parser is broken' % len(funcs))

    def reachable(inc):
        seen, todo = set(), [inc]
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            todo.extend(includes_of.get(x, []))
        return seen

    documented = {}
    man3 = os.path.join(args.man, 'man3')
    for page in sorted(os.listdir(man3)):
        path = os.path.join(man3, page)
        secs = sections(path)
        names = page_names(secs)
        includes, protos = page_synopsis(secs)
        if not names:
            fail('%s: no NAME' % page)
        for name, proto in protos.items():
            if name not in funcs:
                fail('%s: SYNOPSIS declares %s, which no public header exports' % (page, name))
                continue
            if proto != funcs[name]:
                fail('%s: SYNOPSIS of %s is\n    %s\n  the header (%s) says\n    %s' %
                     (page, name, proto, declared_in[name], funcs[name]))
            if not any(declared_in[name] in reachable(i) for i in includes):
                fail('%s: %s is declared in <%s>, which the page\'s #include %s does not bring in' %
                     (page, name, declared_in[name], includes))
            if name not in names:
                fail('%s: SYNOPSIS declares %s, which its NAME does not list' % (page, name))
        for name in names:
            if name in funcs and name not in protos and page != 'lithium.3':
                fail('%s: NAME lists %s, which its SYNOPSIS does not declare' % (page, name))
            if name in protos:
                documented.setdefault(name, page)
                # The header comment is the source of truth: the page repeats it word for word.
                if name in comments and comments[name] not in description(secs):
                    fail('%s: the DESCRIPTION does not repeat the header comment of %s:\n    %s' %
                         (page, name, comments[name]))
    for name in sorted(funcs):
        if name not in documented:
            fail('%s (%s) has no man page: no page of %s names it and declares it' %
                 (name, declared_in[name], man3))
    # The error codes: lt_strerror(3) lists each of LT_ERRNO_MAP with its value and message.
    for h in args.header:
        codes = re.findall(r'XX\((\w+), (-\d+), "([^"]*)"\)', open(h, encoding='utf-8').read())
        if not codes:
            continue
        page = os.path.join(man3, 'lt_strerror.3')
        text = ' '.join(unroff(open(page, encoding='utf-8').read()).replace('\t', ' ').split())
        for name, value, msg in codes:
            if 'LT_%s %s %s' % (name, value, msg) not in text:
                fail('lt_strerror.3 does not list LT_%s (%s, "%s") as %s has it' %
                     (name, value, msg, os.path.basename(h)))
    if len(comments) < len(funcs) // 2:
        fail('only %d doc comments found in the headers: the parser is broken' % len(comments))
    print('check_man: %d functions of %d headers, %d documented, %d header comments repeated' %
          (len(funcs), len(args.header), len(documented), len(comments)))

    for sub in ('man1', 'man3', 'man8'):
        d = os.path.join(args.man, sub)
        for page in sorted(os.listdir(d)):
            for n, line in enumerate(open(os.path.join(d, page), encoding='utf-8'), 1):
                if re.match(r'^\\&\.(PP|EX|EE|in|TP|SH|B|I|BR|nf|fi)\b', line):
                    fail('%s/%s:%d: %s is printed, not obeyed (drop the \\&)' % (sub, page, n, line.strip()))
    if args.version:
        for sub in ('man1', 'man3', 'man8'):
            d = os.path.join(args.man, sub)
            for page in sorted(os.listdir(d)):
                th = [l for l in open(os.path.join(d, page), encoding='utf-8') if l.startswith('.TH ')]
                if not th or '"Lithium-C %s"' % args.version not in th[0]:
                    fail('%s/%s: its .TH line does not say "Lithium-C %s" (the project\'s version)' %
                         (sub, page, args.version))
    groff = shutil.which('groff')
    for sub in ('man1', 'man3', 'man8'):
        d = os.path.join(args.man, sub)
        for page in sorted(os.listdir(d)):
            if groff is None:
                continue
            r = subprocess.run([groff, '-t', '-man', '-ww', '-z', '-Tutf8', os.path.join(d, page)],
                               capture_output=True, text=True)
            if r.returncode != 0 or r.stderr.strip():
                fail('%s/%s: groff warns:\n%s' % (sub, page, r.stderr))
    if groff is None:
        print('check_man: groff not found, pages not formatted')

    def help_flags(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            fail('%s exited %d' % (' '.join(cmd), r.returncode))
        return set(re.findall(r'(?<![\w-])(--[a-z][\w-]*)', r.stdout))

    def page_flags(path):
        text = unroff(open(path, encoding='utf-8').read())
        return set(re.findall(r'(?<![\w-])(--[a-z][\w-]*)', text))

    if args.server:
        want = help_flags([args.server, '--help'])
        have = page_flags(os.path.join(args.man, 'man8', 'lithium-server.8'))
        for f in sorted(want - have):
            fail('lithium-server.8 does not document %s (lithium-server --help has it)' % f)
        if len(want) < 10:
            fail('lithium-server --help gave only %d flags' % len(want))
    if args.tool:
        want = set()
        for sub in ([], ['status'], ['up'], ['top']):
            want |= help_flags([args.tool] + sub + ['--help'])
        have = page_flags(os.path.join(args.man, 'man1', 'lithium.1'))
        for f in sorted(want - have):
            fail('lithium.1 does not document %s (lithium --help has it)' % f)
        if len(want) < 10:
            fail('lithium --help gave only %d flags' % len(want))


def check_installed(args):
    funcs = {}
    for h in args.header:
        funcs.update(header_functions(h))
    for rel in ('man1/lithium.1', 'man8/lithium-server.8', 'man3/lithium.3'):
        if not os.path.isfile(os.path.join(args.installed, rel)):
            fail('not installed: %s' % rel)
    for name in sorted(funcs):
        path = os.path.join(args.installed, 'man3', name + '.3')
        if not os.path.isfile(path):
            fail('no installed page for %s: %s is missing' % (name, path))
            continue
        first = open(path, encoding='utf-8').readline()
        m = re.match(r'^\.so\s+(\S+)', first)
        if m and not os.path.isfile(os.path.join(args.installed, m.group(1))):
            fail('%s points at %s, which is not installed' % (path, m.group(1)))
    print('check_man: %d functions, each with an installed page in %s' % (len(funcs), args.installed))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--header', action='append', required=True, help='a public header')
    ap.add_argument('--include-root', action='append', default=[],
                    help='the include directory of each --header, in order')
    ap.add_argument('--man', help='the page sources (docs/man)')
    ap.add_argument('--server', help='lithium-server, for its --help')
    ap.add_argument('--tool', help='lithium, for its --help')
    ap.add_argument('--installed', help='an installed man directory (PREFIX/share/man)')
    ap.add_argument('--version', help='the project version every page\'s .TH line names')
    args = ap.parse_args()
    if args.installed:
        check_installed(args)
    else:
        check_sources(args)
    for f in failures:
        print('check_man: FAIL: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
