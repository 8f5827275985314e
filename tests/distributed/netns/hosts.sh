#!/bin/sh
# Emulated hosts for the cluster tests of `tessera run`: Linux network
# namespaces PREFIX-node1..N, each with eth0 (10.77.0.i/24) joined by a veth
# pair to a bridge in the namespace PREFIX-br (host side of node i: hi), its own
# /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts) and its own hostname
# (a UTS namespace made by `run`). node1 and node2 also get a second interface,
# mgmt0 (10.99.0.i/24, a veth whose other end holds no address, so it
# reaches nothing), as hosts with a management or container network.
#
# usage: hosts.sh up PREFIX N        make the hosts; writes PREFIX's directory
#        hosts.sh down PREFIX        remove them (safe to repeat)
#        hosts.sh run PREFIX HOST CMD...   run CMD on HOST (the rsh agent)
#        hosts.sh link PREFIX HOST up|down  plug or pull HOST's cable
#        hosts.sh pids PREFIX        pids of every process on the hosts
# The directory /tmp/tessera-netns/PREFIX holds `hostfile` (slots=2 each) and
# `agent` (for plm_rsh_agent: `agent HOST COMMAND` runs COMMAND on HOST).
# Exit status 77: this machine does not allow creating namespaces.
set -eu
cmd="$1"; prefix="$2"
dir="/tmp/tessera-netns/$prefix"
here="$(cd "$(dirname "$0")" && pwd)"

case "$cmd" in
up)
  n="$3"
  if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    echo "hosts.sh: ip (iproute2) and unshare (util-linux) are needed: scripts/install-deps" >&2
    exit 1
  fi
  if ! ip netns add "$prefix-br" 2>/dev/null; then
    echo "hosts.sh: cannot create network namespaces here (ip netns add: needs root and CAP_SYS_ADMIN)" >&2
    exit 77
  fi
  mkdir -p "$dir"
  ip -n "$prefix-br" link set lo up
  ip -n "$prefix-br" link add br0 type bridge
  ip -n "$prefix-br" link set br0 up
  : >"$dir/hosts"
  : >"$dir/hostfile"
  printf '127.0.0.1 localhost\n' >>"$dir/hosts"
  i=1
  while [ "$i" -le "$n" ]; do
    printf '10.77.0.%d node%d\n' "$i" "$i" >>"$dir/hosts"
    printf 'node%d slots=2\n' "$i" >>"$dir/hostfile"
    i=$((i + 1))
  done
  i=1
  while [ "$i" -le "$n" ]; do
    ns="$prefix-node$i"
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns"
    cp "$dir/hosts" "/etc/netns/$ns/hosts"
    ip -n "$prefix-br" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$prefix-br" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [ "$i" -le 2 ]; then
      ip -n "$ns" link add mgmt0 type veth peer name mgmt0p
      ip -n "$ns" link set mgmt0p up
      ip -n "$ns" addr add "10.99.0.$i/24" dev mgmt0
      ip -n "$ns" link set mgmt0 up
    fi
    i=$((i + 1))
  done
  cat >"$dir/agent" <<AGENT
#!/bin/sh
# rsh agent for Open MPI (plm_rsh_agent): AGENT HOST COMMAND...
# Like ssh, the command gets a fresh environment, not mpirun's.
host="\$1"; shift
exec env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root "$here/hosts.sh" run "$prefix" "\$host" "\$*"
AGENT
  chmod +x "$dir/agent"
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-(br|node[0-9]+)\$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$dir"
  ;;
run)
  host="$3"; shift 3
  # A hostname of its own per host: Open MPI tells hosts apart by name.
  exec ip netns exec "$prefix-$host" unshare --uts sh -c 'hostname "$0"; exec sh -c "$*"' "$host" "$@"
  ;;
link)
  ip -n "$prefix-br" link set "h${3#node}" "$4"
  ;;
pids)
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-node[0-9]+\$" || true); do
    ip netns pids "$ns" 2>/dev/null || true
  done
  ;;
*)
  echo "hosts.sh: unknown command '$cmd'" >&2
  exit 2
  ;;
esac
