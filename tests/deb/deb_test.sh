#!/usr/bin/env bash
# tests/deb/deb_test.sh: run by ctest (tests/deb/CMakeLists.txt sets the LT_* variables).
# Builds the .deb with `cpack -G DEB` into a scratch directory, checks its metadata and
# contents (programs, library, headers, lithium.pc without an rpath for /usr, the systemd
# unit pointing at /usr/bin/lithium-server and /etc/lithium/NAME.conf), extracts it with
# `dpkg-deb -x` into a scratch root and runs its server: --version, then a real start on a
# free loopback port (READY), the unit's way of passing flags ($LITHIUM_SERVER_FLAGS from a
# NAME.conf), a farm through the packaged `lithium` tool against it, and a graceful stop.
# The package's man pages: one for every function of the packaged headers, and man(1) finds
# lithium(1), lithium-server(8) and lt_eval_submit(3) in the extracted tree.
# Skips (exit 0, "skipped: <why>") without cpack or dpkg-deb. The scratch directory is kept
# on failure.
set -euo pipefail

: "${LT_CPACK:=cpack}" "${LT_CC:=cc}"
: "${LT_BUILD_DIR:?set by ctest}" "${LT_SRC_DIR:?set by ctest}" "${LT_WORK_DIR:?set by ctest}"
: "${LT_PYTHON3:=python3}" "${LT_DOCS_TESTS:?set by ctest}"

for tool in "$LT_CPACK" dpkg-deb; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "deb_test: skipped: $tool is not installed"
    exit 0
  fi
done

mkdir -p "$LT_WORK_DIR"
work=$(mktemp -d "$LT_WORK_DIR/deb-test.XXXXXX")
root=$work/root
server_pid=""
ok=0

log() { printf 'deb_test: %s\n' "$*"; }
die() {
  printf 'deb_test: FAIL: %s\n' "$*" >&2
  exit 1
}
cleanup() {
  local status=$?
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if ((ok == 1)); then rm -rf "$work"; else printf 'deb_test: kept %s\n' "$work" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Build the package.
if ! (cd "$LT_BUILD_DIR" && "$LT_CPACK" -G DEB -B "$work/pkg") >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log" >&2
  die "cpack -G DEB failed"
fi
debs=("$work"/pkg/*.deb)
[[ -f "${debs[0]}" ]] || die "cpack made no .deb: $(ls "$work/pkg")"
deb=${debs[0]}
log "built $(basename "$deb")"
info=$(dpkg-deb -I "$deb")
grep -q '^ Package: lithium$' <<<"$info" || die "package name: $info"
grep -q '^ Depends: .*libzmq5' <<<"$info" || die "Depends lacks libzmq5: $info"

# 2. Extract and check the contents.
dpkg-deb -x "$deb" "$root"
for f in usr/bin/lithium-server usr/bin/lithium usr/include/lithium.h \
  usr/include/lithium/kernel.h usr/lib/pkgconfig/lithium.pc \
  usr/lib/systemd/system/lithium-server@.service usr/share/lithium/server.conf.example; do
  [[ -e "$root/$f" ]] || die "missing from the package: /$f"
done
ls "$root"/usr/lib/liblithium.so.* >/dev/null 2>&1 || die "no liblithium.so.* in the package"
unit=$root/usr/lib/systemd/system/lithium-server@.service
grep -qx 'EnvironmentFile=/etc/lithium/%i.conf' "$unit" || die "unit EnvironmentFile: $(cat "$unit")"
# shellcheck disable=SC2016 # the unit's own $LITHIUM_SERVER_FLAGS, expanded by systemd
grep -qx 'ExecStart=/usr/bin/lithium-server --name %i $LITHIUM_SERVER_FLAGS' "$unit" ||
  die "unit ExecStart: $(cat "$unit")"
if grep -q 'rpath' "$root/usr/lib/pkgconfig/lithium.pc"; then
  die "lithium.pc for /usr carries an rpath"
fi
# The man pages, as `man` reads them once the package is installed.
headers=()
while IFS= read -r h; do headers+=(--header "$h"); done < <(find "$root/usr/include" -name '*.h' | sort)
"$LT_PYTHON3" "$LT_DOCS_TESTS/check_man.py" "${headers[@]}" --installed "$root/usr/share/man" \
  >"$work/man.log" 2>&1 || {
  cat "$work/man.log" >&2
  die "the package's man pages"
}
if command -v man >/dev/null 2>&1; then
  for page in lithium lithium-server lt_eval_submit; do
    MANPATH="$root/usr/share/man" man -w "$page" >/dev/null 2>&1 ||
      die "man -w $page finds no page in the package"
  done
  man_text=$(MANPATH="$root/usr/share/man" MANWIDTH=100 man -P cat lithium-server 2>/dev/null)
  grep -q -- '--accept-modules' <<<"$man_text" || die "man lithium-server: $man_text"
fi
log "man pages: $(tail -n1 "$work/man.log")"
# systemd-analyze checks the unit's syntax; the program it names is not installed here.
if command -v systemd-analyze >/dev/null 2>&1; then
  systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 || true
  if grep -v 'lithium-server is not executable' "$work/verify.log" | grep -q .; then
    die "systemd-analyze verify: $(cat "$work/verify.log")"
  fi
  log "systemd-analyze verify: the unit is well-formed"
fi

# 3. The packaged server: --version, then started the unit's way: the flags from an
# instance config (word-split as systemd splits $VAR), named after the instance.
bin=$root/usr/bin
"$bin/lithium-server" --version >"$work/version.out" || die "lithium-server --version failed"
grep -q '^lithium-server [0-9]' "$work/version.out" || die "--version says $(cat "$work/version.out")"
log "$(cat "$work/version.out")"
mkdir -p "$work/modules" "$root/etc/lithium"
"$LT_CC" -shared -fPIC -I"$root/usr/include" "$LT_SRC_DIR/../install/itest.c" \
  -o "$work/modules/libitest.so"
cat >"$root/etc/lithium/node1.conf" <<CONF
LITHIUM_SERVER_FLAGS="--listen tcp://127.0.0.1:0 --modules $work/modules --threads 2"
CONF
# shellcheck disable=SC1091
LITHIUM_SERVER_FLAGS=$(. "$root/etc/lithium/node1.conf" && echo "$LITHIUM_SERVER_FLAGS")
read -r -a flags <<<"$LITHIUM_SERVER_FLAGS"
"$bin/lithium-server" --name node1 "${flags[@]}" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
endpoint=""
for _ in $(seq 1 200); do
  endpoint=$(sed -n 's/^READY \(.*\)$/\1/p' "$work/server.out" | head -n1)
  [[ -n "$endpoint" ]] && break
  kill -0 "$server_pid" 2>/dev/null || {
    cat "$work/server.err" >&2
    server_pid=""
    die "the packaged lithium-server exited before READY"
  }
  sleep 0.1
done
[[ -n "$endpoint" ]] || die "no READY line within 20 s"
log "packaged lithium-server ready at $endpoint"

# 4. Use it: status and a farm through the packaged tool.
"$bin/lithium" status "$endpoint" >"$work/status.out" 2>&1 || {
  cat "$work/status.out" >&2
  die "lithium status failed"
}
grep -q '^node1 ' "$work/status.out" || die "status: $(cat "$work/status.out")"
printf 'packaged' >"$work/in"
out=$(timeout 60 "$bin/lithium" run 'farm(itest:rev)' "$work/in" --hosts "$endpoint") ||
  die "lithium run against the packaged server failed"
[[ "$out" == "degakcap" ]] || die "lithium run gave '$out'"
log "lithium status and run against it: ok"

# 5. A graceful stop, as `systemctl stop` does it.
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
((status == 0)) || die "lithium-server exited with $status after SIGTERM"
log "stopped cleanly; all checks passed"
ok=1
