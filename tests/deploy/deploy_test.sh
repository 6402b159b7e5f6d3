#!/usr/bin/env bash
# tests/deploy/deploy_test.sh: run by ctest (tests/deploy/CMakeLists.txt sets the LT_*
# variables). Deployment on "hosts" that are network namespaces with addresses of their own
# (scripts/bench/grid.sh): hosts 0 and 1 run Debian's sshd with a key generated here, host 2
# is the client, host 3 joins late.
#   1. announce: servers on hosts 0 and 1 listen on tcp://*:0 and --announce into a shared
#      directory; `lithium run --hosts-file DIR` on host 2 runs a farm; a server started on
#      host 3 mid-run announces itself and gets work (its `completed` in the stats).
#   2. ssh: `lithium up` starts a server on hosts 0 and 1 over ssh and prints a hosts file;
#      `lithium status` shows both; a farm runs on them; `lithium up` with an unreachable
#      host names it with ssh's message; `lithium down` stops every server gracefully.
# Needs root, network namespaces, sshd and ssh; otherwise exits 77 (ctest: skipped) after
# printing why. Every namespace and process is removed on every exit path (grid_down); the
# scratch directory is kept on failure.
set -euo pipefail

: "${LT_BUILD_DIR:?set by ctest}" "${LT_SRC_DIR:?set by ctest}" "${LT_WORK_DIR:?set by ctest}"
: "${LT_TOOL:?set by ctest}" "${LT_SERVER:?set by ctest}" "${LT_MODULES:?set by ctest}"
SSHD=${LT_SSHD:-/usr/sbin/sshd}

skip() {
  echo "deploy_test: skipped: $*"
  exit 77
}
[[ $EUID -eq 0 ]] || skip "not root (network namespaces and sshd need it)"
[[ -x $SSHD ]] || skip "no $SSHD (Debian's openssh-server; scripts/setup installs it)"
command -v ssh >/dev/null || skip "no ssh client"
command -v ssh-keygen >/dev/null || skip "no ssh-keygen"

# shellcheck source=scripts/bench/grid.sh
source "$LT_SRC_DIR/../../scripts/bench/grid.sh"
grid_init
why=$(grid_why_not netns) || skip "$why"
grid_reap_stale # namespaces and servers of runs that were killed (e.g. a ctest timeout)

mkdir -p "$LT_WORK_DIR"
work=$(mktemp -d "$LT_WORK_DIR/deploy-test.XXXXXX")
ok=0
made_run_sshd=0
cleanup() {
  local status=$?
  grid_down
  ((made_run_sshd == 0)) || rmdir /run/sshd 2>/dev/null || true
  if ((ok == 1)); then rm -rf "$work"; else printf 'deploy_test: kept %s\n' "$work" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf 'deploy_test: %s\n' "$*"; }
die() {
  printf 'deploy_test: FAIL: %s\n' "$*" >&2
  exit 1
}

grid_hosts 4 || die "cannot make the namespaces"
h0=$(grid_ip 0) h1=$(grid_ip 1)
export GRID_SERVER=$LT_SERVER

# ---- 1. announce, with a late joiner -----------------------------------------------------
ann=$work/announce
mkdir -p "$ann" "$work/in"
for i in $(seq 1 300); do printf 'task %d' "$i" >"$work/in/t$i"; done
grid_server 0 - --listen 'tcp://*:0' --announce "$ann" --modules "$LT_MODULES" --threads 2 \
  --name ann0 >/dev/null || die "server on host 0"
grid_server 1 - --listen 'tcp://*:0' --announce "$ann" --modules "$LT_MODULES" --threads 2 \
  --name ann1 >/dev/null || die "server on host 1"
grep -q "^tcp://$h0:" "$ann/ann0.endpoint" || die "ann0 announced $(cat "$ann/ann0.endpoint")"
log "announced: $(cat "$ann"/*.endpoint | tr '\n' ' ')"
grid_exec 2 "$LT_TOOL" run 'farm(pipe(seq(testk:sleep, "40"), testk:upper))' "$work"/in/t* \
  --hosts-file "$ann" --stats >"$work/run1.out" 2>"$work/run1.err" &
client=$!
sleep 0.8
grid_server 3 - --listen 'tcp://*:0' --announce "$ann" --modules "$LT_MODULES" --threads 2 \
  --name ann3 >/dev/null || die "late server on host 3"
late=$(cat "$ann/ann3.endpoint")
log "late server announced $late"
wait "$client" || {
  cat "$work/run1.err" >&2
  die "the farm over the announce directory failed"
}
[[ $(head -c 6 "$work/run1.out") == "TASK 1" ]] || die "results: $(head -c 40 "$work/run1.out")"
done_late=$(python3 -c '
import json, sys
text = open(sys.argv[1]).read()
stats = json.loads(text[text.index("{"):])
print(sum(s["completed"] for s in stats["servers"] if s["endpoint"] == sys.argv[2]))' \
  "$work/run1.err" "$late") || die "cannot read the stats: $(cat "$work/run1.err")"
((done_late > 0)) || die "the late server $late got no work: $(cat "$work/run1.err")"
log "announce: farm of 300 on 2 + 1 late servers; the late one completed $done_late"

# ---- 2. sshd on hosts 0 and 1 ------------------------------------------------------------
[[ -d /run/sshd ]] || {
  mkdir -p /run/sshd
  made_run_sshd=1
}
ssh-keygen -q -t ed25519 -N '' -C lithium-test -f "$work/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C lithium-test-host -f "$work/host_ed25519"
cp "$work/id_ed25519.pub" "$work/authorized_keys"
for i in 0 1; do
  cat >"$work/sshd_config.$i" <<CFG
Port 22
ListenAddress $(grid_ip "$i")
HostKey $work/host_ed25519
PidFile $work/sshd.$i.pid
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
CFG
  grid_exec "$i" "$SSHD" -D -e -f "$work/sshd_config.$i" >"$work/sshd.$i.log" 2>&1 &
  echo $! >>"$GRID_DIR/pids"
done
cat >"$work/ssh_config" <<CFG
Host *
  User root
  IdentityFile $work/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 5
CFG
ssh=(ssh -F "$work/ssh_config")
for ip in "$h0" "$h1"; do
  for _ in $(seq 1 50); do
    grid_exec 2 "${ssh[@]}" -o BatchMode=yes "$ip" true 2>/dev/null && break
    sleep 0.1
  done
  grid_exec 2 "${ssh[@]}" -o BatchMode=yes "$ip" true 2>"$work/ssh-probe.err" ||
    die "cannot ssh to $ip: $(cat "$work/ssh-probe.err"); sshd said: $(cat "$work"/sshd.*.log)"
done
log "sshd runs on $h0 and $h1"

up=("$LT_TOOL" up --ssh "ssh -F $work/ssh_config" --server "$LT_SERVER" --modules "$LT_MODULES"
  --state "$work/state")
down=("$LT_TOOL" down --ssh "ssh -F $work/ssh_config" --state "$work/state")

# ---- 3. lithium up, status, a farm, a failing host, lithium down -------------------------
grid_exec 2 "${up[@]}" "$h0,$h1" >"$work/hosts" 2>"$work/up.err" || {
  cat "$work/up.err" >&2
  die "lithium up failed"
}
if ! grep -q "^tcp://$h0:[0-9]*$" "$work/hosts" || ! grep -q "^tcp://$h1:[0-9]*$" "$work/hosts"; then
  die "lithium up printed: $(cat "$work/hosts")"
fi
log "lithium up: $(grep -v '^#' "$work/hosts" | tr '\n' ' ')"

grid_exec 2 "$LT_TOOL" status --hosts "$work/hosts" --json >"$work/status.json" ||
  die "lithium status: $(cat "$work/status.json")"
python3 - "$work/status.json" "$h0" "$h1" <<'PY' || die "status: $(cat "$work/status.json")"
import json, sys
rows = json.load(open(sys.argv[1]))
names = sorted(r["name"] for r in rows if r["answered"])
assert names == sorted(sys.argv[2:]), names
assert all(r["version"] and r["threads"] > 0 and r["cores"] > 0 for r in rows), rows
PY
grid_exec 2 "$LT_TOOL" status --hosts "$work/hosts" | sed 's/^/deploy_test:   /'

printf 'abc' >"$work/a"
printf 'xyz' >"$work/b"
out=$(grid_exec 2 "$LT_TOOL" run 'farm(testk:upper)' "$work/a" "$work/b" \
  --hosts-file "$work/hosts") || die "farm on the ssh-launched servers failed"
[[ $out == "ABCXYZ" ]] || die "farm gave '$out'"
log "farm on the ssh-launched servers: $out"

set +e
grid_exec 2 "${up[@]}" --timeout 30 "$h0,10.77.0.250" >"$work/hosts2" 2>"$work/up2.err"
st=$?
set -e
((st == 1)) || die "lithium up with an unreachable host exited $st: $(cat "$work/up2.err")"
grep -q '^lithium up: 10.77.0.250: .*ssh: connect to host 10.77.0.250' "$work/up2.err" ||
  die "the unreachable host is not named with ssh's message: $(cat "$work/up2.err")"
grep -q "^tcp://$h0:" "$work/hosts2" || die "the good host is missing: $(cat "$work/hosts2")"
log "unreachable host named: $(grep 10.77.0.250 "$work/up2.err")"

grid_exec 2 "${down[@]}" "$h0,$h1" 2>"$work/down.err" || {
  cat "$work/down.err" >&2
  die "lithium down failed"
}
if ! grep -q "^lithium down: $h0: stopped 2 servers$" "$work/down.err" ||
  ! grep -q "^lithium down: $h1: stopped 1 server$" "$work/down.err"; then
  die "lithium down said: $(cat "$work/down.err")"
fi
! ls "$work"/state/*.pid >/dev/null 2>&1 || die "pid files left: $(ls "$work/state")"
if grid_exec 2 "$LT_TOOL" status --hosts "$work/hosts" --timeout 500 >/dev/null 2>&1; then
  die "servers still answer after lithium down"
fi
log "lithium down: $(tr '\n' ' ' <"$work/down.err")"
log "all checks passed"
ok=1
