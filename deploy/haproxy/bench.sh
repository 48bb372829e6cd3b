#!/bin/sh
# bench.sh MODEL.gguf — two replicas behind HAProxy against replicas reached
# directly, for docs/PERF.md ("Replicas behind HAProxy"). Phases (PHASES,
# default "pair direct"):
#   pair    two `corvid serve` replicas (THREADS threads each) behind
#           deploy/haproxy/haproxy.cfg, AGENTS agents of `corvid bench
#           --serve --case agents`, each with its session header
#           (X-Claude-Code-Session-Id), for the first seed whose sessions
#           HAProxy splits evenly;
#   direct  two fresh replicas, each serving AGENTS/2 agents of the same shape
#           reached without HAProxy, both at once: each replica serving its
#           own sessions alone, on a host as busy as in "pair";
#   alone   one fresh replica serving AGENTS/2 agents, nothing else running
#           (on a host with fewer cores than replicas' threads it has CPU
#           the pair shares: that measures the host, not the routing).
# Replica N runs on CPU N-1 (taskset), as each on its own machine.
# Prints each bench's lines, then per replica: later turns' (2..TURNS)
# median TTFT and prefix-cache hit rate (cached / prompt tokens).
# Environment: AGENTS (4), TURNS (6), SYSTEM (2000), TURN_TOKENS (100),
# REPLY (16), THREADS (1), BAN (50256: gpt-2's end of text, so replies run
# their length), PORT_BASE (18600), CORVID (build/corvid).
set -eu
model=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${CORVID:-$here/build/corvid}
phases=${PHASES:-pair direct}
agents=${AGENTS:-4}
turns=${TURNS:-6}
system=${SYSTEM:-2000}
turn_tokens=${TURN_TOKENS:-100}
reply=${REPLY:-16}
threads=${THREADS:-1}
ban=${BAN:-50256}
base=${PORT_BASE:-18600}
half=$((agents / 2))
tmp=$(mktemp -d)
pids=""
stop_all() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=""
}
trap 'stop_all; rm -rf "$tmp"' EXIT

serve() { # N: a fresh replica on port base+N and CPU N-1, ready
    taskset -c $(($1 - 1)) "$bin" serve "$model" --port $((base + $1)) --threads "$threads" --parallel "$half" \
        --ctx 16384 --kv-memory 2G --cache-dir '' >"$tmp/serve-$1.log" 2>&1 &
    pids="$pids $!"
    until curl -sf "http://127.0.0.1:$((base + $1))/health/ready" >/dev/null; do sleep 0.2; done
}
bench() { # URL SEED N [--session-header NAME]
    url=$1 seed=$2 n=$3
    shift 3
    "$bin" bench --serve "$url" --case agents --agents "$n" --turns "$turns" --system "$system" \
        --turn-tokens "$turn_tokens" --reply "$reply" --ban "$ban" --seed "$seed" "$@"
}
later() { # [REPLICA] < bench output: "replica ttft cached prompt" of turns 2..
    # (without REPLICA, the agent's number in its place)
    awk -v r="${1:-}" '$1 ~ /^[0-9]+$/ && NF == 10 && $2 > 1 { print r == "" ? $1 : r, $6, $4, $3 }'
}
summary() { # LABEL < "replica ttft cached prompt" lines: per replica
    sort -k1,1 -k2,2n | awk -v label="$1" '
        { r = $1; t[r, ++n[r]] = $2; c[r] += $3; p[r] += $4 }
        END { for (r in n) {
                  k = n[r]; m = k % 2 ? t[r, (k + 1) / 2] : (t[r, k / 2] + t[r, k / 2 + 1]) / 2
                  printf "%-6s %-9s later turns %2d: TTFT median %.3f s, hit rate %.2f%%\n", label, r, k, m,
                         100 * c[r] / p[r] } }'
}
: >"$tmp/sum"

for phase in $phases; do
    case $phase in
    pair)
        echo "== pair: $agents agents over two replicas behind HAProxy"
        serve 1
        serve 2
        CORVID_LISTEN=127.0.0.1:$base CORVID_HAPROXY_STATS=127.0.0.1:$((base + 3)) \
        CORVID_REPLICA_1=127.0.0.1:$((base + 1)) CORVID_REPLICA_2=127.0.0.1:$((base + 2)) \
            haproxy -f "$here/deploy/haproxy/haproxy.cfg" -db >"$tmp/haproxy.log" 2>&1 &
        pids="$pids $!"
        hx=http://127.0.0.1:$base
        until [ "$(curl -s "http://127.0.0.1:$((base + 3))/;csv" | grep -c '^corvid_replicas,replica[12],.*,UP,')" = 2 ]
        do sleep 0.2; done
        seed=1
        while :; do # the first seed whose sessions HAProxy splits evenly
            : >"$tmp/map"
            i=0
            while [ $i -lt "$agents" ]; do
                r=$(curl -s -o /dev/null -D - -H "X-Claude-Code-Session-Id: corvid-bench-$seed-$i" "$hx/v1/models" |
                    tr -d '\r' | sed -n 's/^[Xx]-[Cc]orvid-[Rr]eplica: //p')
                echo "$i $r" >>"$tmp/map"
                i=$((i + 1))
            done
            [ "$(grep -c ' replica1$' "$tmp/map")" -eq "$half" ] && break
            seed=$((seed + 1))
        done
        echo "seed $seed: $(tr '\n' ' ' <"$tmp/map")"
        bench "$hx" "$seed" "$agents" --session-header X-Claude-Code-Session-Id | tee "$tmp/pair"
        later <"$tmp/pair" | awk 'NR == FNR { rep[$1] = $2; next } { $1 = rep[$1]; print }' "$tmp/map" - |
            summary pair >>"$tmp/sum"
        ;;
    direct)
        echo "== direct: $half agents on each of two replicas, no balancer"
        serve 1
        serve 2
        bench "http://127.0.0.1:$((base + 1))" 1 "$half" >"$tmp/direct1" &
        b1=$!
        bench "http://127.0.0.1:$((base + 2))" 2 "$half" >"$tmp/direct2"
        wait $b1
        cat "$tmp/direct1" "$tmp/direct2"
        { later replica1 <"$tmp/direct1"; later replica2 <"$tmp/direct2"; } | summary direct >>"$tmp/sum"
        ;;
    alone)
        echo "== alone: $half agents on one replica, nothing else running"
        serve 1
        bench "http://127.0.0.1:$((base + 1))" 1 "$half" | tee "$tmp/alone"
        later replica1 <"$tmp/alone" | summary alone >>"$tmp/sum"
        ;;
    *) echo "bench.sh: unknown phase $phase" >&2; exit 2 ;;
    esac
    stop_all
done
echo "== per replica (turns 2..$turns)"
cat "$tmp/sum"
