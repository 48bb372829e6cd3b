#!/bin/sh
# bench-models.sh A.gguf B.gguf E.gguf — several models in one `corvid
# serve`, for docs/PERF.md ("Several models in one server"). A and B are
# chat models, E an embedding model ({arch}.pooling_type set: `corvid
# synth --pooling 3`). Phases (PHASES, default "decode first embed"):
#   decode  A alone on a server of THREADS/2 threads, B alone the same, then
#           A and B in one server of THREADS threads decoding at once (two
#           `corvid bench --serve --case decode` runs, STREAMS streams each),
#           and A and B apart, in two servers of THREADS/2 threads decoding at
#           once (what the machine gives two decodes at once: its memory
#           bandwidth is shared by both however they are served):
#           each model's aggregate decode rate and the sum, against the sum
#           of the two alone and the two apart; the server process's CPU time per token
#           generated (prefills included, the same work in both); and what
#           the host's other processes took meanwhile (its busy time less the
#           server's, in CPUs) and its load average, since on a shared host
#           "together" needs two CPUs where "alone" needs one. ROUNDS rounds,
#           odd ones alone first, even ones together first.
#   first   a server over a store holding A and B, nothing loaded; A decodes
#           (a long bench run; BESIDE=0: nothing else runs) while B is asked
#           for: B's time to first token against its load time (/v1/status
#           last_load_ms) plus its prefill (a request of the same length
#           again on the loaded B, while A still decodes: on its share of the
#           threads; --no-prefix-cache), and what B's first request added to
#           the server's resident size.
#   embed   E alone (--batch-tokens PREFILL, no prefix cache): one
#           /v1/embeddings request of INPUTS inputs of PROMPT ids (`--case
#           embed`) against the same server's prefill of one PREFILL-token
#           prompt (its time to first token), three rounds in turn.
# Servers run without speculation (--draft 0), so a step's work does not
# depend on what the random models happen to repeat.
# Environment: THREADS (2), STREAMS (2), N_GEN (64), PROMPT (128), INPUTS
# (32), PREFILL (512), ROUNDS (4), BESIDE (1), BAN (50256: gpt-2's end of
# text), PORT (18700), CORVID (build/corvid).
set -eu
a=$1 b=$2 e=$3
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${CORVID:-$here/build/corvid}
phases=${PHASES:-decode first embed}
rounds=${ROUNDS:-4}
beside=${BESIDE:-1}
threads=${THREADS:-2}
half=$((threads / 2 > 0 ? threads / 2 : 1))
streams=${STREAMS:-2}
n_gen=${N_GEN:-64}
prompt=${PROMPT:-128}
inputs=${INPUTS:-32}
prefill=${PREFILL:-512}
ban=${BAN:-50256}
port=${PORT:-18700}
url=http://127.0.0.1:$port
tmp=$(mktemp -d)
pid=""
pid2=""
stop_server() {
    for p in $pid $pid2; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pid=""
    pid2=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT

serve() { # [ENV=...] serve args...: a server on $port, ready
    "$bin" serve --port "$port" --ctx 4096 --parallel "$streams" --kv-memory 1G --cache-dir '' --draft 0 "$@" \
        >"$tmp/serve.log" 2>&1 &
    pid=$!
    until curl -sf "$url/health/ready" >/dev/null; do
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
        sleep 0.2
    done
}
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; } # the server's resident KiB
cpu() { # the server's CPU seconds so far (user + system)
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / hz }' "/proc/$pid/stat"
}
now() { date +%s.%N; }
loadavg() { cut -d' ' -f1 /proc/loadavg; } # over the last minute: the case just run included
busy() { # CPU seconds the whole host has spent busy so far (/proc/stat: user nice system irq softirq steal)
    awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat
}
others() { # T0 BUSY0 CPU0 CPU1: seconds since T0 and the CPU seconds the host's other processes took in them
           # (all busy time but the server's from CPU0 to CPU1; the bench clients, a few percent of a CPU, count)
    echo "$(now) $1 $(busy) $2 $3 $4" | awk '{ printf "%.3f %.3f\n", $1 - $2, $3 - $4 - ($6 - $5) }'
}
decode() { # MODEL: "aggregate" decode tok/s of STREAMS streams
    "$bin" bench --serve "$url" --model "$1" --case decode --streams "$streams" -p "$prompt" -n "$n_gen" \
        --ban "$ban" | awk '{ for (i = 1; i <= NF; i++) if ($i == "aggregate") print $(i + 1) }'
}

for phase in $phases; do
    case $phase in
    decode)
        tokens=$((2 * streams * n_gen))
        round=1
        while [ "$round" -le "$rounds" ]; do
            # Odd rounds run the two alone first, even rounds together
            # first, so a host that grows busier or quieter moves both sides.
            if [ $((round % 2)) -eq 1 ]; then order="alone both"; else order="both alone"; fi
            for c in $order; do
                if [ "$c" = alone ]; then
                    serve "$a" --threads "$half"
                    t0=$(now); o0=$(busy); c0=$(cpu)
                    ra=$(decode a)
                    c1=$(cpu); wa=$(others "$t0" "$o0" "$c0" "$c1")
                    stop_server
                    serve "$b" --threads "$half"
                    t0=$(now); o0=$(busy); c2=$(cpu)
                    rb=$(decode b)
                    c3=$(cpu); wb=$(others "$t0" "$o0" "$c2" "$c3"); la=$(loadavg)
                    stop_server
                    alone_cpu=$(echo "$c1 $c0 $c3 $c2" | awk '{ print $1 - $2 + $3 - $4 }')
                    alone_others=$(echo "$wa $wb" | awk '{ printf "%.2f\n", ($2 + $4) / ($1 + $3) }')
                else
                    serve "$a" "$b" --threads "$threads"
                    t0=$(now); o0=$(busy); c4=$(cpu)
                    decode a >"$tmp/ta" &
                    da=$!
                    tb=$(decode b)
                    wait $da
                    c5=$(cpu); both_others=$(others "$t0" "$o0" "$c4" "$c5" | awk '{ printf "%.2f\n", $2 / $1 }')
                    lb=$(loadavg)
                    ta=$(cat "$tmp/ta")
                    both_cpu=$(echo "$c5 $c4" | awk '{ print $1 - $2 }')
                    stop_server
                    serve "$b" --threads "$half" # apart: b on $port, a on the next port
                    pid2=$pid
                    port=$((port + 1))
                    url=http://127.0.0.1:$port
                    serve "$a" --threads "$half"
                    decode a >"$tmp/pa" &
                    da=$!
                    port=$((port - 1))
                    url=http://127.0.0.1:$port
                    pb=$(decode b)
                    wait $da
                    pa=$(cat "$tmp/pa")
                    stop_server
                fi
            done
            awk -v ra="$ra" -v rb="$rb" -v ta="$ta" -v tb="$tb" -v pa="$pa" -v pb="$pb" -v h="$half" -v t="$threads" -v r="$round" \
                -v alone="$alone_cpu" -v both="$both_cpu" -v n="$tokens" -v oa="$alone_others" -v ob="$both_others" \
                -v la="$la" -v lb="$lb" 'BEGIN {
                printf "decode round %d: alone at %d thread(s) a %.1f + b %.1f = %.1f tok/s; together at %d: " \
                       "a %.1f + b %.1f = %.1f tok/s (%.1f%% of the sum alone, %.1f%% of the two apart: " \
                       "a %.1f + b %.1f = %.1f at once in two servers); server CPU per token alone " \
                       "%.1f ms, together %.1f ms (%.1f%%); other processes %.2f CPUs alone, %.2f together; " \
                       "load average %s alone, %s together\n",
                       r, h, ra, rb, ra + rb, t, ta, tb, ta + tb, 100 * (ta + tb) / (ra + rb),
                       100 * (ta + tb) / (pa + pb), pa, pb, pa + pb,
                       1000 * alone / n, 1000 * both / n, 100 * alone / both, oa, ob, la, lb }'
            round=$((round + 1))
        done
        ;;
    first)
        store=$tmp/store
        rm -rf "$store"
        mkdir -p "$store/local/bench"
        ln -s "$(realpath "$a")" "$store/local/bench/a.gguf"
        ln -s "$(realpath "$b")" "$store/local/bench/b.gguf"
        CORVID_MODELS=$store serve --threads "$threads" --no-prefix-cache
        bg=""
        if [ "$beside" = 1 ]; then
            decode a >/dev/null # a loaded and warm
            "$bin" bench --serve "$url" --model a --case decode --streams 1 -p "$prompt" -n 100000 \
                --ban "$ban" >/dev/null 2>&1 &
            bg=$! # a decodes until killed, through both of b's requests
            sleep 2
        fi
        r0=$(rss)
        cold=$("$bin" bench --serve "$url" --model b --case first --system "$prompt" --seed 1 |
            awk '{ for (i = 1; i <= NF; i++) if ($i == "ttft") print $(i + 1) }')
        r1=$(rss)
        load=$(curl -s "$url/v1/status" | jq -r '.models[] | select(.aliases | index("b")) | .last_load_ms')
        warm=$("$bin" bench --serve "$url" --model b --case first --system "$prompt" --seed 2 |
            awk '{ for (i = 1; i <= NF; i++) if ($i == "ttft") print $(i + 1) }')
        if [ -n "$bg" ]; then kill $bg; wait $bg 2>/dev/null || true; fi
        stop_server
        awk -v c="$cold" -v l="$load" -v w="$warm" -v m="$(( (r1 - r0) / 1024 ))" -v f="$(stat -L -c %s "$b")" \
            -v how="$([ "$beside" = 1 ] && echo "while another model decodes" || echo "nothing else running")" \
            -v la="$(loadavg)" 'BEGIN {
            printf "first request after load, %s: TTFT %.3f s; load %.3f s + prefill %.3f s = %.3f s " \
                   "(TTFT / that %.2f); resident size +%d MiB over it (the file %d MiB); load average %s\n",
                   how, c, l / 1000, w, l / 1000 + w, c / (l / 1000 + w), m, f / 1048576, la }'
        ;;
    embed)
        serve "$e" --threads "$threads" --batch-tokens "$prefill" --no-prefix-cache
        for round in 1 2 3; do
            emb=$("$bin" bench --serve "$url" --model e --case embed --inputs "$inputs" -p "$prompt" --seed "$round" |
                awk '{ for (i = 1; i <= NF; i++) if ($i == "tok/s") print $(i - 1) }')
            ttft=$("$bin" bench --serve "$url" --model e --case decode --streams 1 -p "$prefill" -n 2 --ban "$ban" \
                --seed "$round" | awk '{ for (i = 1; i <= NF; i++) if ($i == "ttft") print $(i + 1) }')
            awk -v e="$emb" -v t="$ttft" -v n="$inputs" -v k="$prompt" -v f="$prefill" -v r="$round" 'BEGIN {
                printf "embed round %d: %d x %d tokens in one request %.1f tok/s; a %d-token prompt'"'"'s prefill " \
                       "%.1f tok/s (%.1f%%)\n", r, n, k, e, f, f / t, 100 * e * t / f }'
        done
        stop_server
        ;;
    *) echo "bench-models.sh: unknown phase $phase" >&2; exit 2 ;;
    esac
done
