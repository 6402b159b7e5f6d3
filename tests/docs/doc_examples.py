#!/usr/bin/env python3
"""tests/docs/doc_examples.py: every complete C program of README.md and docs/*.md, compiled
against the built library and run (run by ctest).

A fenced ```c block is a complete program when it defines `int main(`; it must then follow a
marker line `<!-- doctest: program NAME [run] [, prints "TEXT"] -->` (a block without one fails
the test, so no example can escape). `<!-- doctest: module NAME -->` marks a kernel module,
built as modules/libNAME.so for the programs. Each program is compiled with -Wall -Wextra
-Werror; with `run` it runs in a scratch directory holding modules/, in a process group of
its own that is killed afterwards (spawned servers die with their parent too), with
LITHIUM_SERVER naming the built lithium-server, and must exit 0 and, with `prints`, write
TEXT on stdout. `--extract KIND:NAME` writes one marked block to stdout instead (the install
test builds the README's first program that way). Python 3 standard library only.
"""
import argparse
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

MARK = re.compile(r'^<!--\s*doctest:\s*(module|program)\s+([A-Za-z_][\w-]*)\s*(run)?\s*'
                  r'(?:,\s*prints\s+"([^"]*)")?\s*-->\s*$')


def blocks(path):
    """[(kind, name, run, prints, code, line)] of the marked blocks; raises on unmarked programs."""
    lines = open(path, encoding='utf-8').read().split('\n')
    out, errors, mark, i = [], [], None, 0
    while i < len(lines):
        line = lines[i]
        m = MARK.match(line.strip())
        if m:
            if mark:
                errors.append('%s:%d: a doctest marker with no ```c block after it' % (path, mark[5]))
            mark = (m.group(1), m.group(2), m.group(3) == 'run', m.group(4), None, i + 1)
        elif line.strip().startswith('```'):
            fence = line.strip()
            j = i + 1
            while j < len(lines) and lines[j].strip() != '```':
                j += 1
            code = '\n'.join(lines[i + 1:j]) + '\n'
            is_c = fence in ('```c', '```C')
            if is_c and mark:
                out.append((mark[0], mark[1], mark[2], mark[3], code, i + 1))
            elif mark:
                errors.append('%s:%d: a doctest marker before a block that is not ```c' % (path, mark[5]))
            elif is_c and re.search(r'\bint\s+main\s*\(', code):
                errors.append('%s:%d: a complete C program without a doctest marker '
                              '(<!-- doctest: program NAME run -->)' % (path, i + 1))
            mark = None
            i = j
        elif line.strip() and mark:
            errors.append('%s:%d: a doctest marker not right before its ```c block' % (path, mark[5]))
            mark = None
        i += 1
    if mark:
        errors.append('%s:%d: a doctest marker at the end of the file' % (path, mark[5]))
    return out, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--src', required=True, help='the source tree (README.md, docs/)')
    ap.add_argument('--extract', metavar='KIND:NAME',
                    help='only write the block marked KIND NAME to stdout (tests/install)')
    ap.add_argument('--include', action='append', default=[], help='a public include directory')
    ap.add_argument('--libdir', help='where liblithium.so is')
    ap.add_argument('--server', help='the built lithium-server')
    ap.add_argument('--cc', default='cc')
    ap.add_argument('--flags', default='', help='extra compile and link flags (sanitizers)')
    ap.add_argument('--work', help='a directory for scratch directories')
    ap.add_argument('--timeout', type=int, default=120)
    args = ap.parse_args()

    files = [os.path.join(args.src, 'README.md')] + sorted(glob.glob(os.path.join(args.src, 'docs', '*.md')))
    found, errors = [], []
    for f in files:
        b, e = blocks(f)
        found += [(f,) + x for x in b]
        errors += e
    names = {}
    for f, kind, name, *_ in found:
        if (kind, name) in names:
            errors.append('%s: a second %s named %s (the first in %s)' % (f, kind, name, names[(kind, name)]))
        names[(kind, name)] = f
    programs = [x for x in found if x[1] == 'program']
    if not any(x[3] for x in programs):
        errors.append('no runnable program found: the README\'s first program should be one')
    if args.extract and not errors:
        kind, _, name = args.extract.partition(':')
        code = [x[5] for x in found if x[1] == kind and x[2] == name]
        if not code:
            print('doc_examples: no %s marked %s' % (kind, name), file=sys.stderr)
            return 1
        sys.stdout.write(code[0])
        return 0
    if not (args.libdir and args.server and args.work):
        errors.append('--libdir, --server and --work are needed to build and run the examples')
    if errors:
        for e in errors:
            print('doc_examples: FAIL: ' + e, file=sys.stderr)
        return 1

    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix='doc-examples.', dir=args.work)
    os.chmod(work, 0o755)
    modules = os.path.join(work, 'modules')
    os.mkdir(modules, 0o755)
    os.chmod(modules, 0o755)
    inc = ['-I' + d for d in args.include]
    flags = shlex.split(args.flags)
    warn = ['-std=c11', '-Wall', '-Wextra', '-Werror']
    failed = []

    def compile_(what, cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failed.append('%s does not compile:\n%s\n%s' % (what, ' '.join(cmd), r.stderr))
            return False
        return True

    for f, kind, name, run, prints, code, line in found:
        src = os.path.join(work, '%s.c' % name)
        open(src, 'w').write(code)
        where = '%s:%d (%s %s)' % (os.path.relpath(f, args.src), line, kind, name)
        if kind == 'module':
            out = os.path.join(modules, 'lib%s.so' % name)
            if compile_(where, [args.cc, '-shared', '-fPIC'] + warn + flags + inc + [src, '-o', out]):
                os.chmod(out, 0o755)
                print('doc_examples: built %s' % where)
    ran = 0
    for f, kind, name, run, prints, code, line in programs:
        where = '%s:%d (program %s)' % (os.path.relpath(f, args.src), line, name)
        exe = os.path.join(work, name)
        if not compile_(where, [args.cc] + warn + flags + inc + [os.path.join(work, name + '.c'), '-o', exe,
                                '-L' + args.libdir, '-llithium', '-Wl,-rpath,' + args.libdir]):
            continue
        if not run:
            print('doc_examples: compiled %s' % where)
            continue
        env = dict(os.environ, LITHIUM_SERVER=args.server)
        proc = subprocess.Popen([exe], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            out, err = '', 'timed out after %d s' % args.timeout
            proc.returncode = -1
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.returncode != 0:
            failed.append('%s exited %d:\n%s%s' % (where, proc.returncode, out, err))
        elif prints is not None and prints not in out:
            failed.append('%s did not print "%s"; it printed:\n%s' % (where, prints, out))
        else:
            ran += 1
            print('doc_examples: ran %s: %s' % (where, out.strip().split('\n')[-1]))
    for msg in failed:
        print('doc_examples: FAIL: ' + msg, file=sys.stderr)
    if failed:
        print('doc_examples: kept %s' % work, file=sys.stderr)
        return 1
    subprocess.run(['rm', '-rf', work])
    print('doc_examples: %d blocks, %d programs run' % (len(found), ran))
    return 0


if __name__ == '__main__':
    sys.exit(main())
