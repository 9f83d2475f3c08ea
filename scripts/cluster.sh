#!/usr/bin/env bash
# cluster.sh — a cluster in a box: N "nodes" on this machine, each its own network namespace with
# one TCP link to a private switch, OpenMPI launched across them as across real machines.
#
#   scripts/cluster.sh up [--nodes 2] [--ranks 2] [--link RATE] [--latency DELAY] [--name zt] [--subnet 10.77.0]
#   scripts/cluster.sh run [--np N] [--] COMMAND ARGS...   # mpirun over the box: N ranks (default nodes x ranks)
#   scripts/cluster.sh down [--name zt]
#   scripts/cluster.sh status [--name zt]
#   scripts/cluster.sh box [up options] -- COMMAND ARGS...  # up, run, down (down also when interrupted)
#
# The box (docs/multi-node.md has the picture and the numbers):
#   - node k (0..N-1, numbered from 0 like zt-train's banner, MPI's nodes and torchrun's node_rank):
#     network namespace NAME-nk, interface eth0 = SUBNET.(k+1)/24 (.0 is the subnet's own address),
#     its own hostname NAME-nodek (a UTS namespace per process tree started there) and its own
#     TMPDIR (STATE/nodek):
#     namespaces share /tmp and /dev/shm, and OpenMPI names its session folder and shared-memory
#     segments after the hostname, so two nodes with one hostname collide (a rank died with SIGSEGV
#     in MPI_Comm_split_type that way).
#   - the switch: namespace NAME-sw holding the bridge br0 and one veth port per node. No address
#     and no route leave these namespaces: the host's own network is never touched.
#   - links: --link RATE (tc's tbf, e.g. 100mbit, 1gbit, 10gbit) shapes both directions of every
#     node's link; --latency DELAY (netem, e.g. 50us, 1ms) adds a one-way delay each way. A kernel
#     without the netem qdisc refuses --latency by name (tbf needs no netem).
#   - OpenMPI: a hostfile (SUBNET.(k+1) slots=R), mpirun started on node 0 (the head node, as one
#     logs into a real cluster's first node), the other nodes' daemons started by STATE/agent, which
#     enters node k's namespaces instead of ssh (--mca plm_rsh_agent); TCP between nodes (the
#     btl and the daemons' out-of-band channel restricted to the box's subnet), shared memory
#     (vader) within a node.
# State: /run/zt-cluster/NAME (hostfile, agent, settings). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN):
# where namespaces cannot be made it says why and exits 77 (the tests' skip code).
# run's exit status is the command's (mpirun's); after it, run prints the bytes each node sent on
# its link and in how many packets (eth0's counters: what really crossed the network, headers included).
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # ip and tc live there, outside a non-login shell's PATH

die() { echo "cluster.sh: error: $*" >&2; exit 1; }
cannot() { echo "cluster.sh: cannot build a cluster in a box here: $*" >&2; exit 77; }

NAME=zt NODES=2 RANKS=2 LINK="" LATENCY="" SUBNET=10.77.0 NP=""
parse_common() {  # sets the globals from --flags; leaves the rest in REST
  REST=()
  while (($#)); do
    case "$1" in
      --name) NAME=$2; shift 2 ;;
      --nodes) NODES=$2; shift 2 ;;
      --ranks) RANKS=$2; shift 2 ;;
      --link) LINK=$2; shift 2 ;;
      --latency) LATENCY=$2; shift 2 ;;
      --subnet) SUBNET=$2; shift 2 ;;
      --np) NP=$2; shift 2 ;;
      --) shift; REST=("$@"); return 0 ;;
      -*) die "unknown option $1 (see the top of scripts/cluster.sh)" ;;
      *) REST=("$@"); return 0 ;;
    esac
  done
}
state_dir() { echo "/run/zt-cluster/$NAME"; }

check_settings() {
  [[ "$NAME" =~ ^[a-z][a-z0-9]{0,5}$ ]] || die "--name '$NAME': expected 1-6 lowercase letters and digits, a letter first (interface names are short)"
  [[ "$NODES" =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 200)) || die "--nodes '$NODES': expected an integer in [1, 200]"
  [[ "$RANKS" =~ ^[0-9]+$ ]] && ((RANKS >= 1)) || die "--ranks '$RANKS': expected an integer >= 1"
  [[ "$SUBNET" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--subnet '$SUBNET': expected the first three numbers of a /24, e.g. 10.77.0"
  [ -z "$LINK" ] || [[ "$LINK" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
    die "--link '$LINK': expected a rate such as 100mbit, 1gbit, 10gbit"
  [ -z "$LATENCY" ] || [[ "$LATENCY" =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "--latency '$LATENCY': expected a delay such as 50us, 1ms"
}

# tc on one interface inside a namespace: [netem delay] then [tbf rate].
shape() {  # shape NETNS DEV
  local ns=$1 dev=$2 parent="root"
  if [ -n "$LATENCY" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$LATENCY" 2>/dev/null ||
      { down_quiet; cannot "--latency needs the kernel's netem qdisc (sch_netem), which this kernel ($(uname -r)) does not have; --link (tbf) works without it"; }
    parent="parent 1:1"
  fi
  if [ -n "$LINK" ]; then
    # burst: at least one 1 ms tick of the rate, and 64 KiB (a TSO segment) at the least
    local bps; bps=$(awk -v r="$LINK" 'BEGIN { n = r + 0; u = r; sub(/^[0-9.]+/, "", u);
      m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; printf "%d", n * m }')
    local burst=$((bps / 8 / 1000)); ((burst < 65536)) && burst=65536
    # shellcheck disable=SC2086
    ip netns exec "$ns" tc qdisc add dev "$dev" $parent handle 10: tbf rate "$LINK" burst "$burst" latency 100ms ||
      { down_quiet; die "tc tbf on $dev in $ns failed (rate $LINK)"; }
  fi
}

cmd_up() {
  parse_common "$@"
  check_settings
  ((EUID == 0)) || cannot "not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  for t in ip tc unshare nsenter mpirun; do command -v "$t" >/dev/null || die "$t is missing (scripts/install-deps.sh installs iproute2, util-linux and OpenMPI)"; done
  local S; S=$(state_dir)
  [ -e "$S" ] && die "a box named '$NAME' is up already ($S): 'scripts/cluster.sh down --name $NAME' first"
  ip netns add "$NAME-sw" 2>/tmp/zt-cluster-err.$$ || { local e; e=$(cat /tmp/zt-cluster-err.$$); rm -f /tmp/zt-cluster-err.$$; cannot "ip netns add failed: $e"; }
  rm -f /tmp/zt-cluster-err.$$
  mkdir -p "$S"
  printf 'NODES=%s\nRANKS=%s\nLINK=%s\nLATENCY=%s\nSUBNET=%s\n' "$NODES" "$RANKS" "$LINK" "$LATENCY" "$SUBNET" >"$S/settings"
  trap 'down_quiet; exit 130' INT TERM
  # what the kernel and this process must allow, tried once: exec into a namespace (it remounts
  # /sys there), a UTS namespace, a bridge
  local why=""
  ip netns exec "$NAME-sw" unshare --uts -- true 2>/dev/null || why="ip netns exec / unshare --uts refused"
  [ -z "$why" ] && { ip netns exec "$NAME-sw" ip link add br0 type bridge 2>/dev/null || why="no bridge (the kernel's bridge module)"; }
  [ -z "$why" ] && { ip link add "$NAME-vt" type veth peer name "$NAME-vu" 2>/dev/null && ip link del "$NAME-vt" || why="no veth pairs"; }
  [ -n "$why" ] && { down_quiet; cannot "$why"; }
  ip netns exec "$NAME-sw" ip link set br0 up
  ip netns exec "$NAME-sw" ip link set lo up
  : >"$S/hostfile"
  local k
  for ((k = 0; k < NODES; k++)); do
    local ns="$NAME-n$k"
    ip netns add "$ns" || { down_quiet; die "ip netns add $ns failed"; }
    ip link add "$NAME-p$k" type veth peer name "$NAME-e$k" || { down_quiet; die "cannot make node $k's link (veth)"; }
    ip link set "$NAME-p$k" netns "$NAME-sw"
    ip link set "$NAME-e$k" netns "$ns"
    ip netns exec "$NAME-sw" ip link set "$NAME-p$k" master br0 up
    ip netns exec "$ns" ip link set "$NAME-e$k" name eth0
    ip netns exec "$ns" ip addr add "$SUBNET.$((k + 1))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    shape "$ns" eth0
    shape "$NAME-sw" "$NAME-p$k"
    mkdir -p "$S/node$k/tmp"
    echo "$SUBNET.$((k + 1)) slots=$RANKS" >>"$S/hostfile"
  done
  write_agent "$S"
  trap - INT TERM
  echo "cluster.sh: box '$NAME' up: $NODES nodes x $RANKS ranks, link ${LINK:-unshaped}${LATENCY:+, latency $LATENCY each way}, nodes 0-$((NODES - 1)) at $SUBNET.1-$NODES ($S)" >&2
}

# The launcher agent OpenMPI calls instead of ssh: `agent [ssh options] HOST COMMAND...`. It finds
# HOST's node and runs COMMAND (words joined, as ssh would hand them to a remote shell) there.
write_agent() {
  local S=$1
  cat >"$S/agent" <<EOF
#!/usr/bin/env bash
# made by scripts/cluster.sh for box '$NAME': enters node k's namespaces instead of ssh
while [[ "\${1:-}" == -* ]]; do shift; done
host=\$1; shift
k=\$(( \${host##*.} - 1 ))  # node k's address is $SUBNET.(k+1)
[[ "\$host" == "$SUBNET".* && -d "$S/node\$k" ]] || { echo "cluster agent: \$host is not a node of box '$NAME'" >&2; exit 255; }
exec "$S/on-node" "\$k" sh -c "\$*"
EOF
  # on-node K CMD...: CMD inside node K: its network namespace, a UTS namespace with its hostname
  # (OpenMPI names its session folder and its shared-memory segments after the host, so the nodes'
  # files no longer collide), its own TMPDIR. Not OMPI_MCA_* variables: mpirun hands its own to
  # every rank, so node 0's would reach them all.
  cat >"$S/on-node" <<EOF
#!/usr/bin/env bash
k=\$1; shift
exec ip netns exec "$NAME-n\$k" unshare --uts -- env TMPDIR="$S/node\$k/tmp" ZT_CLUSTER_NODE="\$k" \\
  sh -c 'hostname "$NAME-node\$ZT_CLUSTER_NODE" && exec "\$@"' sh "\$@"
EOF
  chmod +x "$S/agent" "$S/on-node"
}

load_state() {
  local S; S=$(state_dir)
  [ -f "$S/settings" ] || die "no box named '$NAME' is up ('scripts/cluster.sh up' first)"
  # shellcheck source=/dev/null
  source "$S/settings"
}

cmd_run() {
  parse_common "$@"
  (( ${#REST[@]} )) || die "run: no command given"
  load_state
  local S; S=$(state_dir)
  local np=${NP:-$((NODES * RANKS))}
  local fwd=() v  # the environment a rank needs from here, where it is set (-x: OpenMPI forwards it)
  for v in PATH LD_LIBRARY_PATH OMP_NUM_THREADS OMP_WAIT_POLICY; do [ -n "${!v:-}" ] && fwd+=(-x "$v"); done
  local before; before=$(wire_bytes)
  # mpirun on node 0; the daemons of nodes 1..N-1 through the agent
  local rc=0
  "$S/on-node" 0 mpirun --hostfile "$S/hostfile" -np "$np" --allow-run-as-root --oversubscribe --bind-to none \
    --mca plm_rsh_agent "$S/agent" --mca btl self,vader,tcp --mca btl_tcp_if_include "$SUBNET.0/24" \
    --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_base_warn_component_unused 0 \
    "${fwd[@]}" "${REST[@]}" || rc=$?
  # what crossed the wire: each node's eth0 counters, before and after (TCP/IP, MPI's and the
  # launch daemons' own traffic included)
  local after; after=$(wire_bytes)
  # (the packets: each carries about 66 bytes of Ethernet, IP and TCP headers beside its payload)
  awk -v b="$before" -v a="$after" 'BEGIN { nb = split(b, x, " "); split(a, y, " "); s = "";
      for (k = 1; k <= nb; k++) { split(x[k], p, ":"); split(y[k], q, ":"); d = q[1] - p[1]; t += d
        s = s sprintf("%snode %d %.4f MiB in %d packets", k > 1 ? ", " : "", k - 1, d / 1048576, q[2] - p[2]) }
      printf "cluster.sh: on the wire (bytes each node sent, eth0): %s; all nodes %.4f MiB\n", s, t / 1048576 }' >&2
  return $rc
}

wire_bytes() {  # every node's eth0 tx_bytes:tx_packets, space-separated
  local k out=""
  for ((k = 0; k < NODES; k++)); do
    out+="$(ip netns exec "$NAME-n$k" sh -c 'cat /sys/class/net/eth0/statistics/tx_bytes; cat /sys/class/net/eth0/statistics/tx_packets' | paste -sd:) "
  done
  echo "$out"
}

down_quiet() {
  local S; S=$(state_dir)
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(sw|n[0-9]+)$"); do
    local pids; pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$S"
  # ip netns add made /run/netns a mount point; the last box gone, it goes too (ip makes it again)
  if [ -d /run/netns ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ] && mountpoint -q /run/netns; then
    umount /run/netns 2>/dev/null || true
  fi
}

cmd_down() {
  parse_common "$@"
  down_quiet
  echo "cluster.sh: box '$NAME' down" >&2
}

cmd_status() {
  parse_common "$@"
  load_state
  echo "box '$NAME': $NODES nodes x $RANKS ranks, link ${LINK:-unshaped}, latency ${LATENCY:-none}, subnet $SUBNET.0/24"
  cat "$(state_dir)/hostfile"
}

cmd_box() {
  parse_common "$@"
  local cmd=("${REST[@]}")
  (( ${#cmd[@]} )) || die "box: no command given (box [up options] -- COMMAND...)"
  local args=(--name "$NAME" --nodes "$NODES" --ranks "$RANKS" --subnet "$SUBNET")
  [ -n "$LINK" ] && args+=(--link "$LINK")
  [ -n "$LATENCY" ] && args+=(--latency "$LATENCY")
  (cmd_up "${args[@]}") || exit $?
  trap 'down_quiet; exit 130' INT TERM
  local rc=0
  (cmd_run --name "$NAME" ${NP:+--np "$NP"} -- "${cmd[@]}") || rc=$?
  down_quiet
  return $rc
}

verb=${1:-}
shift || true
case "$verb" in
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  box) cmd_box "$@" ;;
  *) die "usage: scripts/cluster.sh up|run|down|status|box ... (the top of the script says more)" ;;
esac
