#!/usr/bin/env bash
# A local Runnel cluster on 127.0.0.1, for tests and trying it out.
#
#   scripts/cluster.sh start DIR [--nodes 3] [--replicas R] [--groups G] [--bin PATH] [--tls PKI]
#                            [--peer-tls PKI] [--peer-listen] [--insecure] [-- SERVE_FLAGS...]
#       Starts the nodes with their data in DIR/node-N, logs in DIR/node-N.log,
#       pids in DIR/node-N.pid and each node's command line in DIR/node-N.cmd
#       (to restart one node by hand: `bash DIR/node-N.cmd`); prints each
#       node's base URL on its own line, node 1 first; returns 0 once every
#       group has a leader on every node, its preferred one (so no leadership
#       moves right after), and every node is ready (90 s at most: a first
#       election waits one to two election timeouts, 20-40 s at
#       --election-timeout-ms 20000; non-zero otherwise).
#       A DIR that held a cluster before keeps its ports, cluster id and group
#       count (DIR/cluster.env), so the nodes restart on their data.
#       --replicas R: each group on R of the nodes (default 3; every node when
#       fewer), recorded when the cluster is first made.
#       SERVE_FLAGS go to every node (e.g. --election-timeout-ms 300).
#       --tls PKI: the nodes serve https with PKI/server.pem and server.key
#       and trust PKI/ca.pem for their requests to each other (a directory
#       made by tests/lib/test_pki.sh); their URLs are https.
#       Secured by default: the first start writes a random cluster key
#       (DIR/cluster.key) and admin token (DIR/admin.token), mode 600, and
#       every node gets --cluster-key-file and --admin-token-file (operator
#       routes then need `Authorization: Bearer $(cat DIR/admin.token)`).
#       (The key stays the default: it needs nothing but the binary, while
#       certificates need a CA, which a test makes with openssl.)
#       --peer-tls PKI: mutual TLS between the nodes instead of the key:
#       node N gets --peer-cert PKI/peer-N.pem, --peer-key PKI/peer-N.key and
#       --peer-ca PKI/ca.pem (tests/lib/test_pki.sh makes them; with
#       --peer-listen, or with --tls for the peer requests).
#       --peer-listen: every node also gets a peer listener on a port of its
#       own (DIR/cluster.env PEER_PORT_N), named as the PEERURL of its --peer
#       (https with --peer-tls or --tls); peer and operator routes are then
#       served there only.
#       --insecure: no cluster key and no admin token (without --peer-tls
#       peers are then unauthenticated; operator routes are open).
#   scripts/cluster.sh join DIR N [-- SERVE_FLAGS...]
#       Starts a new node N (an id the cluster never had) on new ports with
#       --join, its data in DIR/node-N, the other settings those of node 1
#       (DIR/node-1.cmd; with --peer-tls, PKI/peer-N.pem); waits until it
#       answers and prints `N RAFTADDR URL` (and its PEERURL with peer
#       listeners): the operands of `runnel cluster add`. Its groups wait
#       until the cluster adds it.
#   scripts/cluster.sh stop DIR
#       SIGTERM to every node, waits for each to exit (15 s, then SIGKILL);
#       exit 0 when all stopped cleanly.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/lib.sh"

# unused_port DIR [PORT...]: a free port that DIR/cluster.env does not name
# and that is none of PORT... (each free_port runs in a process of its own,
# so it cannot tell what it handed out before).
unused_port() {
  local dir=$1 port
  shift
  while :; do
    port=$(free_port)
    grep -qx "[A-Z_0-9]*=$port" "$dir/cluster.env" 2>/dev/null && continue
    [[ " $* " == *" $port "* ]] && continue
    echo "$port"
    return
  done
}

usage() {
  sed -n '3,47p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ready_everywhere N G: every node answers /__runnel/cluster with G groups,
# each with a leader, and /__runnel/readyz with 200 (SCHEME and CURL_TLS:
# how to reach them).
ready_everywhere() {
  local n=$1 g=$2 i report
  for i in $(seq 1 "$n"); do
    local port_var="HTTP_PORT_$i"
    report=$(curl -s "${CURL_TLS[@]}" --max-time 2 "$SCHEME://127.0.0.1:${!port_var}/__runnel/cluster" 2>/dev/null) || return 1
    [ "$(grep -o '"hosted":' <<<"$report" | wc -l)" -eq "$g" ] || return 1
    ! grep -q '"leader":null' <<<"$report" || return 1
    # the placement table made (it names the preferred leaders) and each
    # group led by its preferred node: no leadership transfer follows
    [ "$i" != 1 ] || node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
      process.exit(r.metadata.initialized &&
        r.groups.every((x) => x.preferred_leader == null || x.leader === x.preferred_leader) ? 0 : 1)' <<<"$report" || return 1
    # caught up (every group's leader asked): local reads are served
    curl -sf "${CURL_TLS[@]}" --max-time 2 -o /dev/null "$SCHEME://127.0.0.1:${!port_var}/__runnel/readyz" || return 1
  done
  return 0
}

start() {
  local dir=$1
  shift
  local nodes=3 groups=16 replicas=3 bin="$root/build/runnel" tls_flags=() secure=1 peer_pki="" peer_listen=0
  SCHEME=http CURL_TLS=()
  while [ $# -gt 0 ]; do
    case $1 in
      --tls)
        local pki
        pki=$(cd "$2" && pwd) || exit 2
        SCHEME=https CURL_TLS=(--cacert "$pki/ca.pem")
        tls_flags=(--tls-cert "$pki/server.pem" --tls-key "$pki/server.key" --tls-ca "$pki/ca.pem")
        shift 2 ;;
      --peer-tls) peer_pki=$(cd "$2" && pwd) || exit 2; shift 2 ;;
      --peer-listen) peer_listen=1; shift ;;
      --nodes) nodes=$2; shift 2 ;;
      --groups) groups=$2; shift 2 ;;
      --replicas) replicas=$2; shift 2 ;;
      --bin) bin=$2; shift 2 ;;
      --insecure) secure=0; shift ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || { echo "cluster.sh: --nodes must be a positive integer" >&2; exit 2; }
  [ -x "$bin" ] || { echo "cluster.sh: $bin is not an executable (build first, or --bin)" >&2; exit 2; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/cluster.env" ]; then
    source "$dir/cluster.env" # the ports, cluster id and group count of the earlier start
    nodes=$CLUSTER_NODES groups=$CLUSTER_GROUPS
  else
    CLUSTER_ID="local-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
    local used=" " port k
    {
      echo "CLUSTER_NODES=$nodes"
      echo "CLUSTER_GROUPS=$groups"
      echo "CLUSTER_ID=$CLUSTER_ID"
      for k in $(seq 1 $((2 * nodes))); do
        port=$(free_port)
        while [[ "$used" == *" $port "* ]]; do port=$(free_port); done
        used="$used$port "
        if [ $((k % 2)) -eq 1 ]; then echo "HTTP_PORT_$(((k + 1) / 2))=$port"; else echo "RAFT_PORT_$((k / 2))=$port"; fi
      done
    } >"$dir/cluster.env"
    source "$dir/cluster.env"
  fi
  local i
  if [ "$peer_listen" = 1 ]; then # the peer listeners' ports, chosen at the first start with them
    for i in $(seq 1 "$nodes"); do
      local pp="PEER_PORT_$i"
      [ -n "${!pp:-}" ] || echo "PEER_PORT_$i=$(unused_port "$dir")" >>"$dir/cluster.env"
    done
    source "$dir/cluster.env"
  fi
  local security=()
  if [ "$secure" = 1 ]; then
    local f keys=(admin.token)
    [ -n "$peer_pki" ] || keys+=(cluster.key)
    for f in "${keys[@]}"; do
      [ -f "$dir/$f" ] || (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$dir/$f")
    done
    security=(--admin-token-file "$dir/admin.token")
    [ -n "$peer_pki" ] || security+=(--cluster-key-file "$dir/cluster.key")
  fi
  local peer_scheme=$SCHEME
  [ -z "$peer_pki" ] || peer_scheme=https
  local peers=()
  for i in $(seq 1 "$nodes"); do
    local hp="HTTP_PORT_$i" rp="RAFT_PORT_$i" pp="PEER_PORT_$i" peer_url=""
    [ "$peer_listen" = 0 ] || peer_url=",$peer_scheme://127.0.0.1:${!pp}"
    peers+=(--peer "$i=127.0.0.1:${!rp},$SCHEME://127.0.0.1:${!hp}$peer_url")
  done
  for i in $(seq 1 "$nodes"); do
    local hp="HTTP_PORT_$i" pp="PEER_PORT_$i" node_flags=()
    [ "$peer_listen" = 0 ] || node_flags+=(--peer-listen "127.0.0.1:${!pp}")
    [ -z "$peer_pki" ] || node_flags+=(--peer-cert "$peer_pki/peer-$i.pem" --peer-key "$peer_pki/peer-$i.key" --peer-ca "$peer_pki/ca.pem")
    local cmd=("$bin" serve --node-id "$i" --cluster-id "$CLUSTER_ID" "${peers[@]}"
      --groups "$groups" --replicas "$replicas" --listen "127.0.0.1:${!hp}" --data-dir "$dir/node-$i" "${tls_flags[@]}" "${security[@]}" "${node_flags[@]}" "$@")
    printf '%q ' "${cmd[@]}" >"$dir/node-$i.cmd"
    printf '>>%q 2>&1 & echo $! >%q\n' "$dir/node-$i.log" "$dir/node-$i.pid" >>"$dir/node-$i.cmd"
    bash "$dir/node-$i.cmd"
  done
  local deadline=$((SECONDS + 90))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ready_everywhere "$nodes" "$groups"; then
      for i in $(seq 1 "$nodes"); do
        local hp="HTTP_PORT_$i"
        echo "$SCHEME://127.0.0.1:${!hp}"
      done
      return 0
    fi
    for i in $(seq 1 "$nodes"); do
      if ! kill -0 "$(cat "$dir/node-$i.pid")" 2>/dev/null; then
        echo "cluster.sh: node $i exited:" >&2
        tail -20 "$dir/node-$i.log" >&2
        return 1
      fi
    done
    sleep 0.1
  done
  echo "cluster.sh: not every group had a leader on every node, or a node was not ready, within 90 s" >&2
  return 1
}

join() {
  local dir=$1 n=${2:-}
  shift 2 || usage
  [ "${1:-}" != "--" ] || shift
  [[ "$n" =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 255 ] || { echo "cluster.sh: N must be 1..255" >&2; exit 2; }
  [ -f "$dir/cluster.env" ] && [ -f "$dir/node-1.cmd" ] || { echo "cluster.sh: no cluster in $dir" >&2; exit 2; }
  [ ! -e "$dir/node-$n" ] || { echo "cluster.sh: $dir/node-$n exists (a new node needs a new id)" >&2; exit 2; }
  dir=$(cd "$dir" && pwd)
  local line
  line=$(head -1 "$dir/node-1.cmd")
  eval "local base=(${line%%>>*})" # printf %q quoted it; its own '>' are escaped
  local hp rp pp="" url raft peer_url="" i arg out=() scheme peer_scheme=""
  hp=$(unused_port "$dir")
  rp=$(unused_port "$dir" "$hp")
  for i in "${!base[@]}"; do # node 1's public and peer URLs give the schemes
    if [ "${base[$i]}" = --peer ] && [[ "${base[$((i + 1))]}" == 1=* ]]; then
      IFS=, read -r _ url peer_url <<<"${base[$((i + 1))]}"
    fi
  done
  scheme=${url%%://*}
  raft="127.0.0.1:$rp"
  url="$scheme://127.0.0.1:$hp"
  if [ -n "$peer_url" ]; then
    peer_scheme=${peer_url%%://*}
    pp=$(unused_port "$dir" "$hp" "$rp")
    peer_url="$peer_scheme://127.0.0.1:$pp"
  fi
  for ((i = 0; i < ${#base[@]}; i++)); do
    arg=${base[$i]}
    case $arg in
      --node-id) out+=("$arg" "$n"); i=$((i + 1)) ;;
      --listen) out+=("$arg" "127.0.0.1:$hp"); i=$((i + 1)) ;;
      --peer-listen) out+=("$arg" "127.0.0.1:$pp"); i=$((i + 1)) ;;
      --data-dir) out+=("$arg" "$dir/node-$n"); i=$((i + 1)) ;;
      --peer-cert | --peer-key) out+=("$arg" "${base[$((i + 1))]/peer-1./peer-$n.}"); i=$((i + 1)) ;;
      *) out+=("$arg") ;;
    esac
  done
  out+=(--peer "$n=$raft,$url${peer_url:+,$peer_url}" --join "$@")
  { echo "HTTP_PORT_$n=$hp"; echo "RAFT_PORT_$n=$rp"; [ -z "$pp" ] || echo "PEER_PORT_$n=$pp"; } >>"$dir/cluster.env"
  printf '%q ' "${out[@]}" >"$dir/node-$n.cmd"
  printf '>>%q 2>&1 & echo $! >%q\n' "$dir/node-$n.log" "$dir/node-$n.pid" >>"$dir/node-$n.cmd"
  bash "$dir/node-$n.cmd"
  local curl_tls=()
  [ "$scheme" = http ] || curl_tls=(-k)
  for _ in $(seq 1 100); do
    if curl -sf "${curl_tls[@]}" --max-time 1 -o /dev/null "$url/__runnel/livez"; then
      echo "$n $raft $url${peer_url:+ $peer_url}"
      return 0
    fi
    kill -0 "$(cat "$dir/node-$n.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "cluster.sh: node $n did not answer within 10 s:" >&2
  tail -20 "$dir/node-$n.log" >&2
  return 1
}

stop() {
  local dir=$1 rc=0 f pid
  for f in "$dir"/node-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$dir"/node-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster.sh: $(basename "$f" .pid) did not stop within 15 s of SIGTERM" >&2
      kill -KILL "$pid" 2>/dev/null
      rc=1
    fi
    rm -f "$f"
  done
  return $rc
}

[ $# -ge 2 ] || usage
case $1 in
  start) shift; start "$@" ;;
  join) shift; join "$@" ;;
  stop) stop "$2" ;;
  *) usage ;;
esac
