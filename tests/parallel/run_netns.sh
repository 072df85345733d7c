#!/bin/bash
# Data parallelism across "hosts": two network namespaces made here, joined by
# a veth pair with addresses of their own (nothing leaves the machine), one
# rank in each, Open MPI over TCP only. mpirun runs in the first namespace and
# starts the second rank's daemon through an rsh agent that enters the
# second (`ip netns exec`), as ssh would enter another machine; each
# namespace has its own host name.
# 1. lenet_mnist --parallel data for one epoch prints the same losses, bit for
#    bit, as the 2-rank shared-memory run.
# 2. The link goes down mid-run: the job ends, non-zero, with rank 0 naming
#    the allreduce that waited past MINIDL_TIMEOUT, within MAX_SECONDS.
# Exits 77 (ctest: skipped) with one line where namespaces are not permitted.
# usage: run_netns.sh MPIEXEC LENET_MNIST [MAX_SECONDS]
set -u
mpiexec=$1 lenet=$2 max=${3:-20}
a=minidl_a_$$ b=minidl_b_$$
net=10.231.7                                   # inside the two namespaces only
tmp=$(mktemp -d)
cleanup() {
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "run_netns: FAILED: $*"; exit 1; }

command -v ip >/dev/null || { echo "run_netns: SKIP: no 'ip' command (apt-get install iproute2)"; exit 77; }
if ! err=$(ip netns add "$a" 2>&1); then
  echo "run_netns: SKIP: network namespaces are not permitted here (ip netns add: $err)"
  exit 77
fi
ip netns add "$b" || fail "ip netns add $b"
ip link add "mdl$$a" type veth peer name "mdl$$b" || fail "cannot create a veth pair"
ip link set "mdl$$a" netns "$a" && ip link set "mdl$$b" netns "$b" || fail "cannot move the veth ends"
ip -n "$a" addr add "$net.1/24" dev "mdl$$a" && ip -n "$b" addr add "$net.2/24" dev "mdl$$b" ||
  fail "cannot address the veth ends"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "mdl$$a" up && ip -n "$b" link set "mdl$$b" up || fail "cannot bring the link up"

# The hostfile names the hosts by address; the agent maps an address to its namespace.
printf '%s.1 slots=1\n%s.2 slots=1\n' "$net" "$net" >"$tmp/hostfile"
cat >"$tmp/agent" <<AGENT
#!/bin/bash
# rsh agent: agent HOST COMMAND..., HOST being $net.1 or $net.2
case \$1 in $net.1) ns=$a ;; $net.2) ns=$b ;; *) echo "agent: unknown host \$1" >&2; exit 1 ;; esac
shift
echo "\$ns" >>"$tmp/agent.log"
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$ns; \$*"
AGENT
chmod +x "$tmp/agent"

# 96 training images: 6 steps of 8 per rank in an epoch.
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp/data" 96 16 2
train=("$lenet" --parallel data --data "$tmp/data" --batch 8 --threads 1)
# mpirun on "host" a; TCP between ranks and daemons over the veth only; the
# daemons' keepalive notices a dead link in seconds (the default is minutes).
across=(ip netns exec "$a" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$a"
        "$mpiexec" --hostfile "$tmp/hostfile" -np 2 --map-by node --mca plm_rsh_agent "$tmp/agent"
        --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24"
        --mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3
        -x MINIDL_TIMEOUT)

# 1. The same losses as shared memory.
timeout 120 "$mpiexec" --oversubscribe -np 2 "${train[@]}" --epochs 1 --log-every 1 >"$tmp/shm.txt" 2>&1 ||
  fail "the shared-memory run: $(tail -5 "$tmp/shm.txt")"
MINIDL_TIMEOUT=30 timeout 120 "${across[@]}" "${train[@]}" --epochs 1 --log-every 1 >"$tmp/tcp.txt" 2>&1 ||
  fail "the run across namespaces: $(tail -20 "$tmp/tcp.txt")"
grep -qx "$b" "$tmp/agent.log" || fail "the second rank's daemon was not started in $b"
grep "loss is" "$tmp/shm.txt" >"$tmp/shm.loss"
grep "loss is" "$tmp/tcp.txt" >"$tmp/tcp.loss"
[ "$(wc -l <"$tmp/shm.loss")" -eq 6 ] || fail "expected 6 loss lines, got: $(cat "$tmp/shm.loss")"
cmp -s "$tmp/shm.loss" "$tmp/tcp.loss" ||
  fail "the losses differ: shared memory / TCP: $(paste -d' ' "$tmp/shm.loss" "$tmp/tcp.loss")"
echo "run_netns: 2 ranks in $a and $b over TCP: the 6 losses equal the shared-memory run's"

# 2. The link goes down once training runs (a checkpoint at step 4 shows it).
export MINIDL_TIMEOUT=3
timeout 120 "${across[@]}" "${train[@]}" --epochs 1000000 --log-every 1000 --save "$tmp/ck.safetensors" --save-every 4 \
  >"$tmp/cut.txt" 2>&1 &
job=$!
for _ in $(seq 300); do [ -f "$tmp/ck-1_4.safetensors" ] && break; sleep 0.1; done
[ -f "$tmp/ck-1_4.safetensors" ] || { kill "$job"; fail "training did not start: $(tail -20 "$tmp/cut.txt")"; }
ip -n "$a" link set "mdl$$a" down
cut=$(date +%s.%N)
for _ in $(seq $((max * 10 + 100))); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
elapsed=$(awk -v a="$cut" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
kill -0 "$job" 2>/dev/null && { kill "$job"; fail "the job still runs ${elapsed} s after the link went down"; }
wait "$job"
rc=$?
echo "run_netns: link down: the job ended with status $rc ${elapsed} s later (MINIDL_TIMEOUT=$MINIDL_TIMEOUT, limit $max s)"
grep -E "^minidl: rank|lost communication" "$tmp/cut.txt"
[ "$rc" -ne 0 ] || fail "the job exited 0"
grep -Eq "minidl: rank 0: allreduce \([0-9]+ bytes\) has waited [0-9.]+ s for the other ranks, longer than MINIDL_TIMEOUT=3 s" \
  "$tmp/cut.txt" || fail "rank 0 did not name the allreduce that timed out: $(tail -20 "$tmp/cut.txt")"
grep -Fq "rank 1 had not arrived: rank 1 did not answer within 1 s (stopped, or unreachable)" "$tmp/cut.txt" ||
  fail "rank 0 did not name rank 1 as unreachable: $(tail -20 "$tmp/cut.txt")"
awk -v e="$elapsed" -v m="$max" 'BEGIN { exit !(e < m) }' || fail "took ${elapsed} s"
echo "run_netns: ok"
