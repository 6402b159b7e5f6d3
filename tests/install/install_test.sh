#!/usr/bin/env bash
# tests/install/install_test.sh: run by ctest (tests/install/CMakeLists.txt sets the LT_*
# variables). Installs the build into a scratch prefix, checks the layout, builds a kernel
# module and a client out of tree with pkg-config (shared and static), builds the same client
# with CMake's find_package(lithium), starts the installed lithium-server on a free loopback
# port and runs every client against it. Then, as a new user would: programs built with
# nothing but `pkg-config --cflags --libs lithium` run in a clean environment (`env -i`, no
# LD_LIBRARY_PATH), spawning the lithium-server of the prefix themselves, and so does the
# installed `lithium` tool. The man pages are installed (a page for every function of the
# installed headers, and `man` finds lithium(1), lithium-server(8) and lt_eval_submit(3)), and
# the README's first program, built with the README's own commands, runs in the same clean
# environment. The scratch directory is removed on success and kept (its path printed) on
# failure; the server is stopped on every exit path.
set -euo pipefail

: "${LT_CMAKE:=cmake}" "${LT_CC:=cc}" "${LT_SAN_FLAGS:=}"
: "${LT_LIBDIR:=lib}" "${LT_INCLUDEDIR:=include}" "${LT_BINDIR:=bin}"
: "${LT_BUILD_DIR:?set by ctest}" "${LT_SRC_DIR:?set by ctest}" "${LT_WORK_DIR:?set by ctest}"
: "${LT_PYTHON3:=python3}" "${LT_MANDIR:=share/man}" "${LT_DOCS_TESTS:?set by ctest}"
: "${LT_TOP_SRC_DIR:?set by ctest}"

mkdir -p "$LT_WORK_DIR"
work=$(mktemp -d "$LT_WORK_DIR/install-test.XXXXXX")
prefix=$work/prefix
server_pid=""
ok=0

log() { printf 'install_test: %s\n' "$*"; }
die() {
  printf 'install_test: FAIL: %s\n' "$*" >&2
  exit 1
}

cleanup() {
  local status=$?
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if ((ok == 1)); then
    rm -rf "$work"
  else
    printf 'install_test: kept %s for inspection\n' "$work" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run LOGNAME CMD...: runs CMD with its output in $work/LOGNAME.log, shown only on failure.
run() {
  local name=$1
  shift
  if ! "$@" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log" >&2
    die "$name failed: $*"
  fi
}

# 1. Install and check the layout.
log "installing $LT_BUILD_DIR into $prefix"
run install "$LT_CMAKE" --install "$LT_BUILD_DIR" --prefix "$prefix"
for f in "$LT_INCLUDEDIR/lithium.h" \
  "$LT_INCLUDEDIR/lithium/kernel.h" "$LT_INCLUDEDIR/lithium/skel.h" \
  "$LT_INCLUDEDIR/lithium/error.h" "$LT_INCLUDEDIR/lithium/export.h" \
  "$LT_LIBDIR/liblithium.so" "$LT_LIBDIR/liblithium.a" \
  "$LT_LIBDIR/pkgconfig/lithium.pc" "$LT_LIBDIR/cmake/lithium/lithiumConfig.cmake" \
  "$LT_LIBDIR/cmake/lithium/lithiumConfigVersion.cmake" "$LT_BINDIR/lithium-server" \
  "$LT_BINDIR/lithium"; do
  [[ -f "$prefix/$f" ]] || die "missing from the install: $f"
done
for p in lithium-server lithium; do
  [[ -x "$prefix/$LT_BINDIR/$p" ]] || die "$LT_BINDIR/$p not executable"
done
# Private headers stay private.
extra=$(find "$prefix/$LT_INCLUDEDIR" -name '*.h' ! -name lithium.h \
  ! -path "*/lithium/kernel.h" ! -path "*/lithium/skel.h" ! -path "*/lithium/error.h" \
  ! -path "*/lithium/export.h")
[[ -z "$extra" ]] || die "unexpected headers installed: $extra"

# 1b. The man pages: one for every function the installed headers export, and man(1) finds
# them in the prefix.
headers=()
while IFS= read -r h; do headers+=(--header "$h"); done < <(find "$prefix/$LT_INCLUDEDIR" -name '*.h' | sort)
run man-installed "$LT_PYTHON3" "$LT_DOCS_TESTS/check_man.py" "${headers[@]}" \
  --installed "$prefix/$LT_MANDIR"
for page in lithium lithium-server lt_eval_submit lt_eval_new lt_call_input; do
  MANPATH="$prefix/$LT_MANDIR" man -w "$page" >/dev/null 2>&1 ||
    die "man -w $page finds no page in $prefix/$LT_MANDIR"
done
man_text=$(MANPATH="$prefix/$LT_MANDIR" MANWIDTH=100 man -P cat lt_eval_submit 2>/dev/null)
grep -q 'int lt_eval_submit_owned(lt_eval_t \*ev' <<<"$man_text" ||
  die "man lt_eval_submit does not show its synopsis: $man_text"
log "man pages installed: $(tail -n1 "$work/man-installed.log")"

# 2. pkg-config must point into this prefix (the .pc is relocatable), not elsewhere.
export PKG_CONFIG_PATH="$prefix/$LT_LIBDIR/pkgconfig"
pkg-config --exists --print-errors lithium || die "pkg-config cannot find lithium"
pc_inc=$(pkg-config --variable=includedir lithium)
[[ "$(realpath "$pc_inc")" == "$(realpath "$prefix/$LT_INCLUDEDIR")" ]] ||
  die "lithium.pc includedir is $pc_inc, not under $prefix"
read -r -a cflags <<<"$(pkg-config --cflags lithium)"
read -r -a libs <<<"$(pkg-config --libs lithium)"
read -r -a static_libs <<<"$(pkg-config --static --libs lithium)"
read -r -a san <<<"$LT_SAN_FLAGS"
log "pkg-config: cflags ${cflags[*]}; libs ${libs[*]}; sanitizer flags: ${san[*]:-none}"

# 3. Out-of-tree builds with the compiler alone.
mkdir -p "$work/modules" "$work/bin"
run module "$LT_CC" -shared -fPIC -Wall -Wextra -Werror "${san[@]}" "${cflags[@]}" \
  "$LT_SRC_DIR/itest.c" -o "$work/modules/libitest.so"
# The README's own line, nothing added: lithium.pc's Libs carry the rpath.
run client "$LT_CC" -Wall -Wextra -Werror "${san[@]}" "${cflags[@]}" "$LT_SRC_DIR/client.c" \
  -o "$work/bin/itest_client" "${libs[@]}"
# ldd's output is read whole: `grep -q` would stop early and, under pipefail, fail the
# pipeline with ldd's SIGPIPE now and then.
deps=$(ldd "$work/bin/itest_client")
used=$(sed -n 's/^[[:space:]]*liblithium\.so[^ ]* => \([^ ]*\) .*/\1/p' <<<"$deps")
[[ -n "$used" && "$(realpath "$used")" == "$(realpath "$prefix/$LT_LIBDIR")"/liblithium.so* ]] ||
  die "itest_client does not use the installed liblithium.so: $deps"
# Static: the archive by path, its dependencies from `pkg-config --static`.
static_deps=()
for arg in "${static_libs[@]}"; do
  [[ "$arg" == -llithium ]] || static_deps+=("$arg")
done
run client-static "$LT_CC" -Wall -Wextra -Werror "${san[@]}" "${cflags[@]}" \
  "$LT_SRC_DIR/client.c" -o "$work/bin/itest_client_static" \
  "$prefix/$LT_LIBDIR/liblithium.a" "${static_deps[@]}"
deps=$(ldd "$work/bin/itest_client_static")
if grep -q liblithium <<<"$deps"; then
  die "itest_client_static links liblithium dynamically"
fi

# 4. The CMake way: find_package(lithium) against the prefix.
run consumer-configure "$LT_CMAKE" -S "$LT_SRC_DIR/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$LT_CC" \
  -DCMAKE_C_FLAGS="$LT_SAN_FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LT_SAN_FLAGS"
run consumer-build "$LT_CMAKE" --build "$work/consumer"
grep -q "lithium_DIR:PATH=$prefix/$LT_LIBDIR/cmake/lithium" "$work/consumer/CMakeCache.txt" ||
  die "find_package(lithium) did not use $prefix"

# 5. Start the installed server on a free port and wait for "READY <endpoint>".
"$prefix/$LT_BINDIR/lithium-server" --listen tcp://127.0.0.1:0 --modules "$work/modules" \
  >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
endpoint=""
for _ in $(seq 1 200); do
  endpoint=$(sed -n 's/^READY \(.*\)$/\1/p' "$work/server.out" | head -n1)
  [[ -n "$endpoint" ]] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.err" >&2
    server_pid=""
    die "lithium-server exited before READY"
  fi
  sleep 0.1
done
[[ -n "$endpoint" ]] || {
  cat "$work/server.err" >&2
  die "no READY line from lithium-server within 20 s"
}
log "lithium-server (pid $server_pid) ready at $endpoint"

for client in "$work/bin/itest_client" "$work/bin/itest_client_static" \
  "$work/consumer/itest_client_cmake" "$work/consumer/itest_client_cmake_static"; do
  name=$(basename "$client")
  if ! timeout 60 "$client" "$endpoint" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log" >&2
    echo "--- lithium-server stderr:" >&2
    cat "$work/server.err" >&2
    die "$name failed against $endpoint"
  fi
  log "$(tail -n1 "$work/$name.log") [$name]"
done

# 6. SIGTERM stops the server cleanly (exit status 0; a sanitizer report would change it).
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
if ((status != 0)); then
  cat "$work/server.err" >&2
  die "lithium-server exited with status $status after SIGTERM"
fi
log "lithium-server stopped cleanly"

# 7. A clean environment: no LD_LIBRARY_PATH, no LITHIUM_* variables, a PATH without the
# prefix. The pkg-config-built client spawns two servers itself (lt_eval_spawn_local finds
# the prefix's lithium-server from the library's own location), and the installed tool runs
# a farm on servers it spawns. ASan builds keep their runtime options.
clean_env=(env -i PATH=/usr/bin:/bin HOME="$work")
[[ -n "${ASAN_OPTIONS:-}" ]] && clean_env+=(ASAN_OPTIONS="$ASAN_OPTIONS")
[[ -n "${LSAN_OPTIONS:-}" ]] && clean_env+=(LSAN_OPTIONS="$LSAN_OPTIONS")
[[ -n "${UBSAN_OPTIONS:-}" ]] && clean_env+=(UBSAN_OPTIONS="$UBSAN_OPTIONS")
for client in "$work/bin/itest_client" "$work/consumer/itest_client_cmake"; do
  name=$(basename "$client")-spawn
  if ! timeout 60 "${clean_env[@]}" "$client" --spawn 2 "$work/modules" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log" >&2
    die "$name failed in a clean environment"
  fi
  log "$(tail -n1 "$work/$name.log") [$name, env -i]"
done
printf 'tool-input' >"$work/tool.in"
if ! timeout 60 "${clean_env[@]}" "$prefix/$LT_BINDIR/lithium" run 'farm(itest:rev)' \
  "$work/tool.in" --servers 2 --modules "$work/modules" >"$work/tool.out" 2>"$work/tool.err"; then
  cat "$work/tool.err" >&2
  die "the installed lithium tool failed in a clean environment"
fi
[[ "$(cat "$work/tool.out")" == "tupni-loot" ]] || die "lithium run gave '$(cat "$work/tool.out")'"
log "installed lithium run on 2 spawned servers: ok [env -i]"

# 8. The README's first program, as a newcomer builds it: its kernel module and program
# taken from README.md, built with the README's commands (pkg-config only), run in the clean
# environment; it spawns two servers of the prefix.
first=$work/first
mkdir -p "$first/modules"
run first-extract-module "$LT_PYTHON3" "$LT_DOCS_TESTS/doc_examples.py" --src "$LT_TOP_SRC_DIR" \
  --extract module:square
cp "$work/first-extract-module.log" "$first/square.c"
run first-extract-program "$LT_PYTHON3" "$LT_DOCS_TESTS/doc_examples.py" --src "$LT_TOP_SRC_DIR" \
  --extract program:first
cp "$work/first-extract-program.log" "$first/first.c"
run first-module "$LT_CC" -shared -fPIC "${san[@]}" "${cflags[@]}" "$first/square.c" \
  -o "$first/modules/libsquare.so"
run first-program "$LT_CC" "${san[@]}" "${cflags[@]}" "$first/first.c" -o "$first/first" "${libs[@]}"
if ! (cd "$first" && timeout 60 "${clean_env[@]}" ./first) >"$work/first.log" 2>&1; then
  cat "$work/first.log" >&2
  die "the README's first program failed in a clean environment"
fi
grep -qx 'sum of the squares of 1..10 = 385' "$work/first.log" ||
  die "the README's first program printed: $(cat "$work/first.log")"
log "the README's first program: $(cat "$work/first.log") [env -i]"
log "all checks passed"
ok=1
