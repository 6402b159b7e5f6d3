# shellcheck shell=bash
# scripts/bench/grid.sh: a bash library, sourced by the benchmark scripts, that emulates a grid
# on one machine (shared/BENCHMARKS.md, "Emulating a grid on one machine"): "hosts" are
# network namespaces joined by veth pairs to a bridge (itself in a namespace of its own, so
# the root namespace is never touched), links can be shaped with tbf, CPU speed comes from
# cgroup cpu quotas (v1 cpu.cfs_quota_us, or v2 cpu.max), and lithium-servers are started
# inside them. Everything is named after the sourcing shell's pid (lt<pid>...), recorded
# under a state directory, and removed by grid_down, which grid_init installs as the
# EXIT/INT/TERM trap.
#
#   source scripts/bench/grid.sh
#   grid_init                          # state dir + traps; once per (sub)shell
#   grid_require root netns tc cpu     # or: prints "skipped: <why>" and exits 0
#   grid_hosts 4                       # hosts 0..3: namespaces lt<pid>h0.. with 10.77.0.1..
#   grid_limit 3 100mbit               # tbf on host 3's link, both directions
#   grid_cpu_group fast 0.8            # cgroup with 0.8 cores
#   ep=$(grid_server 0 fast --modules DIR)   # lithium-server in host 0 and group fast
#   keys=$(grid_curve_keys lithium)    # throwaway CURVE keys, for grid_server --curve-key
#   grid_exec 3 prog --hosts "$ep"     # a command in host 3's namespace
#   grid_cpu_set fast 0.2              # change the quota later (grid_cpu_cmd prints it)
#   grid_down                          # also run by the trap
#
# HOST is a host index, or - for no namespace (the root namespace, servers on 127.0.0.1);
# GROUP is a name given to grid_cpu_group, or - for none. GRID_SERVER names the server
# program (default: lithium-server on PATH); GRID_NO_CPU=1 makes grid_why_not cpu fail, to
# try a script's fallback. Functions return non-zero after printing why on
# stderr; the calling script decides whether that is fatal.

GRID_SERVER=${GRID_SERVER:-lithium-server}
GRID_READY_TIMEOUT=${GRID_READY_TIMEOUT:-30} # seconds a server may take to print READY
GRID_PERIOD_US=100000                        # the CFS period every group gets
GRID_ID=${GRID_ID:-}

# grid_init names this run after the current (sub)shell's pid, makes its state directory
# and installs grid_down as the EXIT/INT/TERM trap (replacing the shell's own traps).
grid_init() {
  if [[ -n $GRID_ID && $GRID_ID == "lt$BASHPID" ]]; then return 0; fi
  GRID_ID=lt$BASHPID
  GRID_DIR=${TMPDIR:-/tmp}/lithium-grid.$GRID_ID
  GRID_DOWN=0
  rm -rf "$GRID_DIR"
  mkdir -p "$GRID_DIR" || return 1
  : >"$GRID_DIR/pids"
  : >"$GRID_DIR/groups"
  trap 'grid_down' EXIT
  trap 'grid_down; exit 130' INT
  trap 'grid_down; exit 143' TERM
}

# grid__cpu_mount prints "v1 DIR" or "v2 DIR": where groups with a cpu controller are made.
grid__cpu_mount() {
  local mnt type opts rest
  while read -r _ mnt type opts rest; do
    if [[ $type == cgroup && ",$opts," == *,cpu,* ]]; then
      echo "v1 $mnt"
      return 0
    fi
  done </proc/mounts
  while read -r _ mnt type opts rest; do
    if [[ $type == cgroup2 && -r $mnt/cgroup.controllers ]] &&
      grep -qw cpu "$mnt/cgroup.controllers"; then
      echo "v2 $mnt"
      return 0
    fi
  done </proc/mounts
  return 1
}

# grid_why_not FEATURE prints why FEATURE (root, netns, tc, cpu) cannot be used here and
# returns 1; prints nothing and returns 0 when it can. netns and tc are probed for real, in a
# namespace that is removed at once.
grid_why_not() {
  local probe=${GRID_ID:-lt$BASHPID}pr
  case $1 in
  root)
    [[ $EUID -eq 0 ]] || {
      echo "not root (the grid needs namespaces and cgroups)"
      return 1
    }
    ;;
  netns | tc)
    [[ $EUID -eq 0 ]] || {
      echo "not root: no network namespaces"
      return 1
    }
    command -v ip >/dev/null || {
      echo "no ip command (iproute2)"
      return 1
    }
    if ! ip netns add "$probe" 2>/dev/null; then
      echo "ip netns add fails here"
      return 1
    fi
    local why=
    if ! ip -n "$probe" link add name pr0 type veth peer name pr1 2>/dev/null; then
      why="cannot make veth pairs"
    elif [[ $1 == tc ]] && ! { command -v tc >/dev/null &&
      ip netns exec "$probe" tc qdisc add dev pr0 root tbf rate 100mbit burst 64kb latency 50ms \
        2>/dev/null; }; then
      why="tc tbf is not available"
    fi
    ip netns delete "$probe" 2>/dev/null || true
    [[ -z $why ]] || {
      echo "$why"
      return 1
    }
    ;;
  cpu)
    local m
    [[ -z ${GRID_NO_CPU:-} ]] || { # to try the fallbacks of scripts that use the grid
      echo "GRID_NO_CPU is set"
      return 1
    }
    m=$(grid__cpu_mount) || {
      echo "no cgroup cpu controller mounted"
      return 1
    }
    [[ -w ${m#* } ]] || {
      echo "cannot write ${m#* } (not root?)"
      return 1
    }
    ;;
  *)
    echo "unknown feature '$1'"
    return 1
    ;;
  esac
}

# grid_require FEATURE... exits the shell with status 0 after printing "skipped: <why>" when
# one of the features is not available.
grid_require() {
  local f why
  for f in "$@"; do
    if ! why=$(grid_why_not "$f"); then
      echo "skipped: $why"
      exit 0
    fi
  done
}

# grid_ns HOST prints the namespace of host HOST.
grid_ns() { echo "${GRID_ID}h$1"; }

# grid_ip HOST prints the address of host HOST (127.0.0.1 for -).
grid_ip() {
  if [[ $1 == - ]]; then
    echo 127.0.0.1
  else
    echo "10.77.$(($1 / 254)).$(($1 % 254 + 1))"
  fi
}

# grid_hosts N adds N hosts (the first call makes hosts 0..N-1, the next continue the
# numbering): namespace lt<pid>h<i> with lo up and eth0 (address 10.77.x.y/16) joined by a
# veth pair to bridge br0 in namespace lt<pid>sw.
grid_hosts() {
  local n=$1 i first sw=${GRID_ID}sw ns
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 1000 ]] || {
    echo "grid_hosts: bad host count '$n'" >&2
    return 1
  }
  if [[ ! -e $GRID_DIR/nhosts ]]; then
    ip netns add "$sw" &&
      ip -n "$sw" link set lo up &&
      ip -n "$sw" link add name br0 type bridge &&
      ip -n "$sw" link set br0 up || {
      echo "grid_hosts: cannot make the switch namespace $sw" >&2
      return 1
    }
    echo 0 >"$GRID_DIR/nhosts"
  fi
  first=$(<"$GRID_DIR/nhosts")
  for ((i = first; i < first + n; i++)); do
    ns=$(grid_ns "$i")
    ip netns add "$ns" &&
      ip -n "$ns" link set lo up &&
      ip -n "$ns" link add name eth0 type veth peer name "h$i" netns "$sw" &&
      ip -n "$ns" addr add "$(grid_ip "$i")/16" dev eth0 &&
      ip -n "$ns" link set eth0 up &&
      ip -n "$sw" link set "h$i" master br0 &&
      ip -n "$sw" link set "h$i" up || {
      echo "grid_hosts: cannot make host $i ($ns)" >&2
      return 1
    }
    echo $((i + 1)) >"$GRID_DIR/nhosts"
  done
}

# grid_exec HOST cmd... runs cmd in host HOST's namespace (directly for -).
grid_exec() {
  local host=$1
  shift
  if [[ $host == - ]]; then
    "$@"
  else
    ip netns exec "$(grid_ns "$host")" "$@"
  fi
}

# grid_limit HOST RATE shapes host HOST's link to RATE (e.g. 100mbit) in both directions:
# tbf on eth0 (what the host sends) and on its bridge port (what it receives).
grid_limit() {
  local host=$1 rate=$2 q=(tbf rate "$2" burst 64kb latency 50ms)
  ip netns exec "$(grid_ns "$host")" tc qdisc replace dev eth0 root "${q[@]}" &&
    ip netns exec "${GRID_ID}sw" tc qdisc replace dev "h$host" root "${q[@]}" || {
    echo "grid_limit: cannot shape host $host to $rate" >&2
    return 1
  }
}

# grid_cpu_path NAME prints the directory of group NAME.
grid_cpu_path() {
  local m
  m=$(grid__cpu_mount) || return 1
  echo "${m#* }/${GRID_ID}_$1"
}

# grid__quota CORES prints the quota for CORES (a number > 0, or max) in the mounted format.
grid__quota() {
  local v=$1 cores=$2
  if [[ $cores == max ]]; then
    [[ $v == v1 ]] && echo -1 || echo "max $GRID_PERIOD_US"
    return 0
  fi
  [[ $cores =~ ^[0-9]*\.?[0-9]+$ ]] || return 1
  local q
  q=$(awk -v c="$cores" -v p="$GRID_PERIOD_US" 'BEGIN { q = int(c * p + 0.5); print (q < 1000 ? 1000 : q) }')
  [[ $v == v1 ]] && echo "$q" || echo "$q $GRID_PERIOD_US"
}

# grid_cpu_cmd NAME CORES prints a shell command that sets group NAME to CORES cores, quota
# and weight (for
# programs that change speeds themselves, e.g. bench_hetero --step-cmd).
grid_cpu_cmd() {
  local m dir q
  m=$(grid__cpu_mount) || {
    echo "grid_cpu_cmd: no cgroup cpu controller" >&2
    return 1
  }
  dir=$(grid_cpu_path "$1")
  q=$(grid__quota "${m%% *}" "$2") || {
    echo "grid_cpu_cmd: bad core count '$2'" >&2
    return 1
  }
  # The weight follows the quota too: when the machine is short of CPU, groups share it in
  # proportion to their speeds instead of equally (which would squeeze the fast ones).
  local w
  w=$(awk -v c="$2" 'BEGIN { if (c == "max") c = 1; w = int(c * 1000 + 0.5); print (w < 2 ? 2 : w) }')
  if [[ ${m%% *} == v1 ]]; then
    printf 'echo %s > %q && echo %s > %q\n' "$q" "$dir/cpu.cfs_quota_us" "$w" "$dir/cpu.shares"
  else
    printf 'echo %q > %q && echo %s > %q\n' "$q" "$dir/cpu.max" "$((w > 10000 ? 10000 : w))" "$dir/cpu.weight"
  fi
}

# grid_cpu_set NAME CORES changes group NAME's quota to CORES cores (or max).
grid_cpu_set() {
  local cmd
  cmd=$(grid_cpu_cmd "$1" "$2") && sh -c "$cmd" || {
    echo "grid_cpu_set: cannot set group $1 to $2 cores" >&2
    return 1
  }
}

# grid_cpu_group NAME CORES makes cgroup lt<pid>_NAME limited to CORES cores (quota = CORES x
# the 100 ms period; keep the sum under the machine's cores).
grid_cpu_group() {
  local m dir
  m=$(grid__cpu_mount) || {
    echo "grid_cpu_group: no cgroup cpu controller mounted" >&2
    return 1
  }
  dir=$(grid_cpu_path "$1")
  if [[ ${m%% *} == v2 ]] && ! grep -qw cpu "${m#* }/cgroup.subtree_control"; then
    echo +cpu >"${m#* }/cgroup.subtree_control" || {
      echo "grid_cpu_group: cannot enable the cpu controller in ${m#* }" >&2
      return 1
    }
  fi
  mkdir "$dir" || {
    echo "grid_cpu_group: cannot make $dir" >&2
    return 1
  }
  echo "$dir" >>"$GRID_DIR/groups"
  if [[ ${m%% *} == v1 ]]; then
    echo "$GRID_PERIOD_US" >"$dir/cpu.cfs_period_us" || return 1
  fi
  grid_cpu_set "$1" "$2"
}

# grid_cpu_run NAME cmd... runs cmd inside group NAME (directly for -): the subshell moves
# itself into the group, then becomes cmd, so cmd and its children never run outside it.
grid_cpu_run() {
  local name=$1
  shift
  if [[ $name == - ]]; then
    "$@"
  else
    local dir
    dir=$(grid_cpu_path "$name") || return 1
    (echo "$BASHPID" >"$dir/cgroup.procs" && exec "$@")
  fi
}

# grid_server HOST GROUP [args...] starts GRID_SERVER --listen tcp://<HOST's address>:0
# [args] in HOST's namespace and GROUP, waits for its READY line and prints the endpoint. Its
# stdout and stderr go to the state directory (server.*.{out,log}); grid_down stops it.
grid_server() {
  local host=$1 group=$2 cmd=() dir="" pid out ep="" t
  shift 2
  [[ $host == - ]] || cmd=(ip netns exec "$(grid_ns "$host")")
  # --no-supervise: the pid recorded here must be the process that runs the kernels, whose
  # CPU time grid_cpu_seconds_cmd reads from /proc/PID/stat (a supervisor's is ~0).
  # Namespace addresses are not loopback: the emulated grid is a private test network, and
  # its measurements are of the plain transport, so the servers run without CURVE unless the
  # caller gives --curve-key (then --insecure changes nothing).
  cmd+=("$GRID_SERVER" --listen "tcp://$(grid_ip "$host"):0" --no-supervise --insecure "$@")
  if [[ $group != - ]]; then
    dir=$(grid_cpu_path "$group") || return 1
  fi
  out=$(mktemp "$GRID_DIR/server.XXXXXX")
  # The background subshell joins the group and becomes the server (ip netns exec execs
  # too), so $! is the server's pid.
  (
    [[ -z $dir ]] || echo "$BASHPID" >"$dir/cgroup.procs"
    exec "${cmd[@]}"
  ) </dev/null >"$out.out" 2>"$out.log" &
  pid=$!
  echo "$pid" >>"$GRID_DIR/pids"
  for ((t = 0; t < GRID_READY_TIMEOUT * 20; t++)); do
    ep=$(awk '$1 == "READY" { print $2; exit }' "$out.out" 2>/dev/null)
    [[ -z $ep ]] || break
    grid__alive "$pid" || break
    sleep 0.05
  done
  if [[ -z $ep ]]; then
    echo "grid_server: $GRID_SERVER on host $host (group $group) did not start; its log:" >&2
    tail -n 20 "$out.log" >&2
    return 1
  fi
  echo "$pid $ep" >>"$GRID_DIR/servers"
  echo "$ep"
}

# grid_curve_keys TOOL makes throwaway CURVE keys with `TOOL keygen` (TOOL: the lithium
# program) in the state directory, which grid_down removes: a key pair for the servers
# (server.key, server.pub), one for the client (client.key, client.pub) and an allow file
# with the client's public key (allow). Prints the directory.
grid_curve_keys() {
  local dir=$GRID_DIR/keys
  if ! { mkdir -p "$dir" && "$1" keygen "$dir/server" >/dev/null &&
    "$1" keygen "$dir/client" >/dev/null && cp "$dir/client.pub" "$dir/allow"; }; then
    echo "grid_curve_keys: cannot make keys in $dir with $1 keygen" >&2
    return 1
  fi
  echo "$dir"
}

# grid_server_pid EP prints the pid of the server grid_server started at endpoint EP.
grid_server_pid() {
  awk -v ep="$1" '$2 == ep { print $1; found = 1; exit } END { exit !found }' \
    "$GRID_DIR/servers" 2>/dev/null || {
    echo "grid_server_pid: no server at $1" >&2
    return 1
  }
}

# grid_cpu_seconds_cmd PID... prints a shell command that prints the CPU seconds (user +
# system, all threads) each process has used so far, on one line in the order given: what a
# server was really given, which on a loaded machine can be less than its quota.
grid_cpu_seconds_cmd() {
  local hz p files=()
  hz=$(getconf CLK_TCK)
  for p in "$@"; do files+=("/proc/$p/stat"); done
  # The program holds no single quote, so it can be quoted as it is.
  printf "awk '{ printf(\"%%s%%.3f\", (NR > 1 ? \" \" : \"\"), (\$14 + \$15) / %s) } END { print \"\" }'" "$hz"
  printf ' %q' "${files[@]}"
  echo
}

# grid__alive PID succeeds while PID is a live process (not a zombie).
grid__alive() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# grid__remove ID [stale] stops the processes of run ID (those in its namespaces and cgroups,
# and for a live run the pids it recorded) and removes its namespaces, cgroups and state
# directory. A stale run's recorded pids are not trusted: the kernel may have reused them.
grid__remove() {
  local id=$1 dir=${TMPDIR:-/tmp}/lithium-grid.$1 pids=() ns nss=() m cg cgs=() p t
  [[ ${2:-} == stale || ! -r $dir/pids ]] || mapfile -t pids <"$dir/pids"
  mapfile -t nss < <(ip netns list 2>/dev/null | awk -v id="$id" '
    { n = $1; if (index(n, id) == 1 && substr(n, length(id) + 1) ~ /^(h[0-9]+|sw|pr)$/) print n }')
  for ns in "${nss[@]}"; do
    mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2>/dev/null)
  done
  if m=$(grid__cpu_mount); then
    for cg in "${m#* }/${id}"_*; do
      [[ -d $cg ]] || continue
      cgs+=("$cg")
      mapfile -t -O "${#pids[@]}" pids <"$cg/cgroup.procs"
    done
  fi
  for p in "${pids[@]}"; do
    [[ $p =~ ^[0-9]+$ ]] && kill -TERM "$p" 2>/dev/null || true
  done
  # Servers finish their running instructions on SIGTERM; give them 5 s, then kill.
  for ((t = 0; t < 100; t++)); do
    local left=0
    for p in "${pids[@]}"; do
      [[ $p =~ ^[0-9]+$ ]] && grid__alive "$p" && left=1
    done
    ((left)) || break
    sleep 0.05
  done
  for p in "${pids[@]}"; do
    [[ $p =~ ^[0-9]+$ ]] && grid__alive "$p" && kill -KILL "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do # our own children: reap them, so no zombie is left
    [[ $p =~ ^[0-9]+$ ]] && wait "$p" 2>/dev/null || true
  done
  for ns in "${nss[@]}"; do
    ip netns delete "$ns" 2>/dev/null || echo "grid: cannot delete namespace $ns" >&2
  done
  for cg in "${cgs[@]}"; do
    for ((t = 0; t < 40; t++)); do # a killed task leaves its group a moment later
      rmdir "$cg" 2>/dev/null && break
      sleep 0.05
    done
    [[ ! -d $cg ]] || echo "grid: cannot remove cgroup $cg" >&2
  done
  rm -rf "$dir"
}

# grid_down stops every process this run started and removes its namespaces (with their
# links, bridge and qdiscs), cgroups and state directory. Safe to call more than once.
grid_down() {
  [[ -n $GRID_ID && $GRID_DOWN == 0 ]] || return 0
  GRID_DOWN=1
  grid__remove "$GRID_ID"
}

# grid_reap_stale removes what earlier runs left behind (namespaces, cgroups, state
# directories named lt<pid> whose pid is gone), e.g. after kill -9.
grid_reap_stale() {
  local names=() n id m
  local -A seen=()
  mapfile -t names < <(
    ip netns list 2>/dev/null | awk '{ print $1 }'
    if m=$(grid__cpu_mount); then
      for n in "${m#* }"/lt*_*; do [[ -d $n ]] && basename "$n"; done
    fi
    for n in "${TMPDIR:-/tmp}"/lithium-grid.lt*; do [[ -d $n ]] && echo "${n##*.}"; done
  )
  for n in "${names[@]}"; do
    [[ $n =~ ^lt([0-9]+)(h[0-9]+|sw|pr|_.*)?$ ]] || continue
    id=lt${BASH_REMATCH[1]}
    [[ $id != "$GRID_ID" ]] || continue
    [[ ! -e /proc/${BASH_REMATCH[1]} && -z ${seen[$id]:-} ]] || continue
    seen[$id]=1
    echo "grid: removing the leftovers of run $id" >&2
    grid__remove "$id" stale
  done
}
