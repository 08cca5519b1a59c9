#!/usr/bin/env bash
# Every open measurement of the GPU machine, stage by stage under one deadline (DEADLINE
# seconds, default 560; a stage that would not fit is skipped and says so), most wanted first.
# STAGES picks and orders them (default "golden kernels forms profile batched moe tests serve
# table"):
#   golden   transformers' goldens of the tiny mixtures (scripts/golden/make_golden.py --moe), in
#            the background, packed into $OUT/golden-moe.tgz for tests/data/golden
#   forms    the forms of a batched step's GEMMs on the 9B (FORMS): the batched GEMV over x
#            rounded to bytes (bytes; bytes8: 8 weight rows a workgroup; bytes8t32: and 32
#            threads), over F32 x (float; once: each slice decoded once for a group), or the
#            tiles (tiles: the weights decoded in their loads; f16: over their F16 expansion),
#            B = 8 and 32; the later stages then run the form whose two
#            aggregate rates sum highest, unless GEMV_FORM names one; and B = 64
#            on the tiles or the batched GEMV (DELTALLM_VK_GEMM_GEMV_ROWS 32 or 64), the faster
#            kept for the later stages
#   split    GEMM tiles of few rows split over K (DELTALLM_VK_GEMM_SPLIT, off on the NV tiles until
#            checked): the GEMM tile and batched-step tests with it on, then the 9B's batched
#            steps (B = 8, 32, 64; pp16 + tg32) and its short prompts (pp32-pp128) with the GEMMs
#            as today, on the tiles unsplit, split, and split without the F16 expansion
#   skinny   the skinny GEMMs of few rows (DELTALLM_VK_GEMM_SKINNY): their tests (SKINNY_TESTS, a
#            gtest filter; none: no tests), then the 9B's batched steps (SKINNY_BATCHES, pp16 +
#            tg32) and short prompts (pp32-pp256) in each of SKINNY_FORMS ('|' between forms); with
#            SKINNY_KEEP=1 the form whose generation rates sum highest runs the later stages
#   kernels  the batched GEMV's forms alone on 12288 x 4096 matrices (vk_speed BatchedGemvSpeed,
#            xz in .devrun/extra), each checked against a CPU reference; VK_SPEED_FILTER picks
#            other reports (SkinnyGemmSpeed.*: the skinny GEMM by its tiles and parts;
#            WindowAttentionSpeed.*: the window attention; MoeDecodeSpeed.*: a mixture token's
#            router and expert GEMVs alone; ExpertGemmSpeed.*: a window's expert GEMMs by form),
#            KERNELS_S seconds at most (120)
#   profile  --profile of batched steps of PROFILE_BATCHES (8 32; none: not) rows on the 9B (or
#            arch:shape:B words), and of a mixture's single stream (PROFILE_MOE_SPEC, default the
#            35B-A3B, or arch:shape[:P] words; PROFILE_MOE_P a prompt, 512), by stage
#            (PROFILE_MOE=0: not)
#   bisect   the 9B's pp512 / pp2048 by older binaries (.devrun/extra/deltallm-<commit>.xz) and ours
#   windows  prefill windows stage by stage (--profile, a line a window): WINDOW_CASES of
#            prompt@depth (short windows late in a long prompt, whole windows) on WINDOW_MODEL
#            (arch:shape, default qwen35:9b; qwen35moe:35b-a3b for the mixture)
#   batched  B = 1, 8, 32, 64 (BATCHED_B) sequences of pp512 + tg128 on the 9B (or BATCHED_MODELS,
#            arch:shape words), ours against llama.cpp
#   experts  the expert GEMMs of prefill windows: their kernel and window tests (test_vulkan, xz
#            in .devrun/extra; EXPERT_TESTS=none: not), then the pp512, pp2048 and tg64 of each
#            of EXPERT_SPECS (default the 35B-A3B) in each of EXPERT_FORMS (default: the grouped
#            GEMM tiles, then the skinny GEMM's grouped form, DELTALLM_VK_EXPERT_SKINNY), and the
#            35B-A3B's profile by stage in the last form (EXPERT_PROFILE=0: not); EXPERT_BENCH
#            the bench's flags; EXPERT_KEEP=1 keeps the fastest form for the later stages
#   moe_decode  the 35B-A3B's tg128 with the mixture's decode fusions on and off (ours alone:
#            DELTALLM_VK_ROUTER_TOPK, DELTALLM_VK_EXPERTS_SUM_EPILOGUE), and its profile by stage
#   moe      Qwen3.5-35B-A3B (then Qwen3-30B-A3B with time left) pp512 and pp2048 (MOE_PROMPTS),
#            tg128 and B = 8 (MOE_BATCHES) against llama.cpp (scripts/bench/device_moe.sh)
#   tests    the Vulkan test binary (xz in .devrun/extra) in SHARDS (4) processes at once, the
#            tests of TESTS_FILTER (a gtest filter; default all) for TESTS_S seconds at most (280);
#            with VALIDATE=1 under the Khronos validation layer
#   serve    deltallm serve against llama-server (scripts/bench/device_serve.sh; llama-server
#            from .devrun/extra/llama-server.tar.xz, peer_server.sh pack) at 1, 8, 32, 64 clients
#            (ENGINES="deltallm unmixed llama-server" adds ours with DELTALLM_VK_MIXED_STEPS=0)
#   ab       AB_FORMS ('|' between settings) side by side on AB_MODELS (arch:shape) with the bench's
#            AB_BENCH flags, AB_ROUNDS rounds; AB_KEEP=1 keeps the fastest for the later stages
#   small    the 9B's windows of a few hundred rows (SMALL_PROMPTS) in each of SMALL_FORMS (the
#            F16 expansion's threshold, the skinny GEMM's rows); SMALL_KEEP=1 keeps the fastest
#   odd      the 9B's prompts of row counts that are not whole GEMM tiles (ODD_PROMPTS, default
#            164,1000,2017), ours against llama.cpp
#   table    ours against llama.cpp single-stream on the 9B, the 0.8B and Qwen3-8B Q4_K_M
# Here: scripts/bench/device_bench.sh prepare, the xz files under .devrun/extra; carry .gl and
# .devrun. The outputs are many small files (a device call returns 8): they are written to a
# folder of their own and packed into $OUT/round.tgz when the script ends or is stopped.
# Settings in .devrun/round.env (carried with .devrun), when there, override the environment:
# a call made for one round can run another's stages.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
if [ -f .devrun/round.env ]; then
    set -a
    source .devrun/round.env
    set +a
fi
final=${OUT:-/tmp/device_round_out}
out=/tmp/device_round_files
# (A machine may keep /tmp between calls: an earlier round's files would travel with this one's.)
rm -rf "$out"
mkdir -p "$final" "$out"
pack_outputs() { tar -C "$out" -czf "$final/round.tgz" . 2>/dev/null; }
trap pack_outputs EXIT
trap 'exit 143' TERM INT
extra=$repo/.devrun/extra
source scripts/bench/device_common.sh
models=/tmp/models
mkdir -p "$models"
m9=$models/qwen35-9b-q4_k_m.gguf
synth() {  # arch shape type
    local f=$models/$1-$2-$3.gguf
    [ -f "$f" ] || "$ours" synth --arch "$1" --shape "$2" --type "$3" -o "$f" 2>&1 | tail -1
}
# The Q4_K_M file of an arch:shape spec (synthesized when missing), its path in $spec_gguf.
synth_spec() {
    synth "${1%:*}" "${1#*:}" q4_k_m
    spec_gguf=$models/${1%:*}-${1#*:}-q4_k_m.gguf
}
# The form whose rates sum highest in a stage's file of lines "[spec] SETTING=V ... test,rate
# ...": a form is a line's words with "=", summed over every line it names; nothing where no line
# has a rate.
fastest_form() {
    python3 - "$1" <<'PY'
import sys
sums, order = {}, []
for line in open(sys.argv[1]):
    words = line.split()
    form = " ".join(w for w in words if "=" in w)
    rates = [float(w.split(",")[1]) for w in words if "," in w]
    if not form:
        continue
    if form not in sums:
        order.append(form)
    sums[form] = sums.get(form, 0.0) + sum(rates)
best = max(order, key=lambda f: sums[f]) if order else ""
print(best if best and sums[best] > 0 else "")
PY
}
# Whether this round's tests and checked reports in files $@ passed: some ran to their summary,
# and none failed or was cut by its time.
passed() {
    ! grep -qsE 'FAILED|Failure|cut at' "$@" && grep -qsE '^\[  PASSED' "$@"
}
args=(--ours "$ours" --peer "$peer" --device vulkan --bw-gbps 4800 --peak-gflops 989000)
golden_pid=
form_env() {  # the environment of form $1 (see `forms` at the top)
    case $1 in
    bytes) echo DELTALLM_VK_GEMV_X=auto ;;
    bytes8) echo DELTALLM_VK_GEMV_BATCH_ROWS=8 ;;
    bytes8t32) echo DELTALLM_VK_GEMV_BATCH_ROWS=8 DELTALLM_VK_GEMV_BATCH_THREADS=32 ;;
    bytes8t64) echo DELTALLM_VK_GEMV_BATCH_ROWS=8 DELTALLM_VK_GEMV_BATCH_THREADS=64 ;;
    bytes4t32) echo DELTALLM_VK_GEMV_BATCH_ROWS=4 DELTALLM_VK_GEMV_BATCH_THREADS=32 ;;
    float) echo DELTALLM_VK_GEMV_X=global ;;
    once) echo DELTALLM_VK_GEMV_X=global DELTALLM_VK_GEMV_BATCH_ONCE=1 ;;
    tiles) echo DELTALLM_VK_GEMM_GEMV_ROWS=0 ;;
    f16) echo DELTALLM_VK_GEMM_GEMV_ROWS=0 DELTALLM_VK_GEMM_EXPAND_ROWS=1 ;;
    esac
}
form() {  # the form the stages after `forms` run
    export $(form_env "$GEMV_FORM")
}
GEMV_FORM=${GEMV_FORM:-}
for stage in ${STAGES:-golden kernels forms profile batched moe tests serve table}; do
    case $stage in
    golden)
        (timeout 240 python3 scripts/golden/make_golden.py /tmp/golden --moe >"$out/golden.log" 2>&1
            echo "golden rc=$?" >>"$out/golden.log"
            tar -C /tmp/golden -czf "$out/golden-moe.tgz" .) &
        golden_pid=$!
        ;;
    forms)
        fits 90 "the batched GEMV's forms" || continue
        synth qwen35 9b q4_k_m
        for b in 8 32; do
            for form in ${FORMS:-bytes bytes8 bytes8t32 bytes8t64 bytes4t32 tiles}; do
                printf 'B=%s form=%s ' "$b" "$form"
                env $(form_env "$form") timeout 40 "$ours" bench -m "$m9" --device vulkan \
                    -b "$b" -p 16 -n 32 -r 1 -o csv 2>/dev/null | grep "B$b " | cut -d, -f4,9
            done
        done | tee "$out/gemv-batch.txt"
        # The form with the highest B = 8 and B = 32 rates together (lines "B=8 form=bytes
        # B8 pp16+tg32,<t/s>").
        best=$(awk '{split($2, f, "="); split($4, v, ","); sum[f[2]] += v[2]}
            END {for (k in sum) if (sum[k] > top) {top = sum[k]; form = k}; print form}' \
            "$out/gemv-batch.txt")
        [ -n "$best" ] && [ -z "${GEMV_FORM:-}" ] && GEMV_FORM=$best
        echo "== the later stages run the form ${GEMV_FORM:-bytes}"
        # B = 64: its GEMMs on the tiles (32: the default, over the F16 expansion) or as the
        # batched GEMV in that form (64); the faster goes on too.
        [ "$GEMV_FORM" = tiles ] || [ "$GEMV_FORM" = f16 ] && continue
        for rows in 32 64; do
            printf 'B=64 gemv_rows=%s ' "$rows"
            [ -n "$GEMV_FORM" ] && form
            DELTALLM_VK_GEMM_GEMV_ROWS=$rows timeout 60 "$ours" bench -m "$m9" --device vulkan \
                -b 64 -p 16 -n 32 -r 1 -o csv 2>/dev/null | grep "B64 " | cut -d, -f4,9
        done | tee "$out/gemv-rows-64.txt"
        GEMV_ROWS=$(awk '{split($2, f, "="); split($4, v, ","); if (v[2] > top) {top = v[2];
            r = f[2]}} END {print r}' "$out/gemv-rows-64.txt")
        [ -n "$GEMV_ROWS" ] && export DELTALLM_VK_GEMM_GEMV_ROWS=$GEMV_ROWS
        echo "== the later stages run GEMMs of up to ${GEMV_ROWS:-32} rows as the batched GEMV"
        ;;
    split)
        fits 150 "GEMMs of few rows split over K" || continue
        if [ -f "$extra/test_vulkan.xz" ]; then
            xz -dc "$extra/test_vulkan.xz" >/tmp/test_vulkan && chmod +x /tmp/test_vulkan
            DELTALLM_VK_GEMM_SPLIT=1 DELTALLM_TEST_DATA="$repo/tests/data" timeout 120 \
                /tmp/test_vulkan --gtest_brief=1 \
                --gtest_filter='Formats/GemmTiles.*:VulkanBatchedStep.*:WindowPrefill.*' 2>&1 |
                grep -E '^\[  FAILED|^\[  PASSED|tests? from .* ran|Failure|error' | head -20 |
                tee "$out/split-tests.txt"
        fi
        synth qwen35 9b q4_k_m
        for form in "DELTALLM_VK_GEMM_SPLIT=0" "DELTALLM_VK_GEMM_GEMV_ROWS=0 DELTALLM_VK_GEMM_SPLIT=0" \
            "DELTALLM_VK_GEMM_GEMV_ROWS=0 DELTALLM_VK_GEMM_SPLIT=1" \
            "DELTALLM_VK_GEMM_GEMV_ROWS=0 DELTALLM_VK_GEMM_SPLIT=1 DELTALLM_VK_GEMM_EXPAND_ROWS=2048"; do
            for b in 8 32 64; do
                printf 'B=%s %s ' "$b" "$form"
                env $form timeout 40 "$ours" bench -m "$m9" --device vulkan -b "$b" -p 16 -n 32 \
                    -r 1 -o csv 2>/dev/null | grep "B$b " | cut -d, -f4,9
            done
            printf 'short prompts %s ' "$form"
            env $form timeout 40 "$ours" bench -m "$m9" --device vulkan -p 32,64,128 -n 0 -r 2 \
                -o csv 2>/dev/null | grep ',pp' | cut -d, -f7,10 | tr '\n' ' '
            echo
        done | tee "$out/split.txt"
        ;;
    skinny)
        fits 150 "skinny GEMMs of few rows on KHR cooperative matrices" || continue
        if [ -f "$extra/test_vulkan.xz" ] && [ "${SKINNY_TESTS:-}" != none ]; then
            xz -dc "$extra/test_vulkan.xz" >/tmp/test_vulkan && chmod +x /tmp/test_vulkan
            DELTALLM_TEST_DATA="$repo/tests/data" timeout "${SKINNY_TEST_S:-100}" /tmp/test_vulkan --gtest_brief=1 \
                --gtest_filter="${SKINNY_TESTS:-Formats/GemmTiles.*q4_K*:Formats/GemmTiles.*q6_K*:WindowPrefill.*Skinny*:VulkanBatchedStep.*:VulkanScheduler.*}" \
                2>&1 | grep -E '^\[  FAILED|^\[  PASSED|^\[  SKIPPED|tests? from .* ran|Failure|error|Which is|difference|skinny' |
                head -40 | tee "$out/skinny-tests.txt"
        fi
        synth qwen35 9b q4_k_m
        # The forms of a batched step's GEMMs (pp16 + tg32 at B = 8, 32, 64) and of short
        # windows (pp32-pp128); the form whose three generation rates sum highest is exported
        # for the stages after this one (with SKINNY_KEEP=1).
        # SKINNY_FORMS: the forms, separated by '|' (default: off, then the defaults, then the
        # speed knobs one at a time).
        IFS='|' read -r -a forms <<<"${SKINNY_FORMS:-DELTALLM_VK_GEMM_SKINNY=0|DELTALLM_VK_GEMM_SKINNY=1|DELTALLM_VK_GEMM_SKINNY_RT=4|DELTALLM_VK_GEMM_SKINNY_PARTS=1|DELTALLM_VK_GEMM_GEMV_ROWS=0}"
        [ "${SKINNY_FORMS:-}" = none ] && forms=()
        for form in "${forms[@]}"; do
            for b in ${SKINNY_BATCHES:-8 32 64}; do
                r=$(env $form timeout 40 "$ours" bench -m "$m9" --device vulkan -b "$b" -p 16 -n 32 \
                    -r 1 -o csv 2>/dev/null | grep "B$b " | cut -d, -f4,9)
                printf 'B=%s %s %s\n' "$b" "$form" "$r"
            done
            printf 'short prompts %s ' "$form"
            env $form timeout 40 "$ours" bench -m "$m9" \
                --device vulkan -p 32,64,128,256 -n 0 -r 2 -o csv 2>/dev/null | grep ',pp' |
                cut -d, -f7,10 | tr '\n' ' '
            echo
        done | tee "$out/skinny.txt"
        best_form=$(python3 - "$out/skinny.txt" <<'PY'
import re, sys, collections
s = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"B=\d+ (.*) B\d+ \S+,([\d.]+)$", line.strip())
    if m: s[m.group(1)] += float(m.group(2))
print(max(s, key=s.get) if s else "")
PY
)
        echo "best batched form: $best_form" | tee -a "$out/skinny.txt"
        [ "${SKINNY_KEEP:-0}" = 1 ] && [ -n "$best_form" ] && export $best_form
        ;;
    kernels)
        [ -f "$extra/vk_speed.xz" ] || continue
        fits 60 "kernels alone (vk_speed ${VK_SPEED_FILTER:-BatchedGemvSpeed.*})" || continue
        xz -dc "$extra/vk_speed.xz" >/tmp/vk_speed && chmod +x /tmp/vk_speed
        # Each ':'-separated pattern in the order given (one filter runs the reports in the
        # binary's link order, and the first may take the stage's whole time), all under one limit.
        kernels_end=$((SECONDS + ${KERNELS_S:-120}))
        IFS=: read -r -a patterns <<<"${VK_SPEED_FILTER:-BatchedGemvSpeed.*}"
        for pattern in "${patterns[@]}"; do
            [ $((kernels_end - SECONDS)) -gt 0 ] || { echo "== cut: $pattern"; continue; }
            timeout $((kernels_end - SECONDS)) /tmp/vk_speed --gtest_filter="$pattern" 2>&1
        done | grep -E '^batched GEMV|^skinny GEMM|^window attention|^router|^expert|^plain GEMV|FAILED|Failure|OK \]|^== cut' |
            tee "$out/kernels.txt"
        ;;
    profile)
        fits 80 "profiles of batched steps" || continue
        [ -n "$GEMV_FORM" ] && form
        # PROFILE_BATCHES: B (the 9B) or arch:shape:B words.
        for b in ${PROFILE_BATCHES:-8 32}; do
            [ "$b" = none ] && continue
            spec=qwen35:9b
            case $b in *:*:*) spec=${b%:*} b=${b##*:} ;; esac
            synth_spec "$spec"
            echo "== $spec B=$b"
            timeout 40 "$ours" bench -m "$spec_gguf" --device vulkan -b "$b" -p 512 -n 32 -r 1 \
                --profile 2>&1 | grep -A24 "profile, batch"
        done | tee "$out/profile.txt"
        # The 35B-A3B's single stream by stage (its decode: 6.4 ms a token on an H100, where a
        # dense 9B layer takes half the time of one of its layers).
        [ "${PROFILE_MOE:-1}" = 0 ] && continue
        # PROFILE_MOE_SPEC: arch:shape words, or arch:shape:P for a prompt of P rows (default
        # qwen35moe:35b-a3b; PROFILE_MOE_P the prompt of a word without one, 512).
        for ms in ${PROFILE_MOE_SPEC:-qwen35moe:35b-a3b}; do
            fits 60 "a profile of $ms" || continue
            p=${PROFILE_MOE_P:-512}
            case $ms in *:*:*) p=${ms##*:} ms=${ms%:*} ;; esac
            synth_spec "$ms"
            timeout 50 "$ours" bench -m "$spec_gguf" --device vulkan \
                -p "$p" -n 32 -r 1 --profile 2>&1 | grep -A24 "vulkan profile" |
                tee "$out/profile-${ms#*:}-p$p.txt"
        done
        ;;
    moe_decode)
        # The 35B-A3B's token with the mixture's decode fusions on and off (ours alone), then
        # its decode and prefill by stage.
        fits 90 "the 35B-A3B's decode fusions" || continue
        synth qwen35moe 35b-a3b q4_k_m
        f=$models/qwen35moe-35b-a3b-q4_k_m.gguf
        for v in DELTALLM_VK_ROUTER_TOPK=1 DELTALLM_VK_EXPERTS_SUM_EPILOGUE=0 \
            "DELTALLM_VK_ROUTER_TOPK=0 DELTALLM_VK_EXPERTS_SUM_EPILOGUE=0"; do
            echo "== $v"
            env $v timeout 40 "$ours" bench -m "$f" --device vulkan -p 16 -n 128 -r 3 2>&1 |
                grep tg128
        done | tee "$out/moe-decode.txt"
        timeout 50 "$ours" bench -m "$f" --device vulkan -p 512 -n 32 -r 1 --profile 2>&1 |
            grep -A24 "vulkan profile" | tee "$out/profile-35b-a3b.txt"
        ;;
    bisect)
        # The 9B's pp512 / pp2048 by each binary of .devrun/extra/deltallm-<commit>.xz (stripped,
        # xz; built here from a worktree of that commit) against ours, on this machine: which
        # commit the NV prefill lost 4.4x at (history, 2026-12-06 (01:30)).
        fits 60 "prefill by commit" || continue
        synth qwen35 9b q4_k_m
        for x in "$extra"/deltallm-*.xz ours; do
            if [ "$x" = ours ]; then bin=$ours; name=HEAD; else
                name=$(basename "$x" .xz); bin=/tmp/$name
                [ -x "$bin" ] || { xz -dc "$x" >"$bin" && chmod +x "$bin"; }
            fi
            echo "== $name"
            timeout 60 "$bin" bench -m "$m9" --device vulkan -p 512,2048 -n 0 -r 2 2>&1 |
                grep -E "pp512|pp2048" | tee "$out/bisect-$name.txt"
        done
        # Ours and a good commit's (PROFILE_AT, when its binary is among them) pp512 by kernel
        # role (DELTALLM_VK_PROFILE) with the pipelines each made (DELTALLM_LOG=debug): which
        # kernels the lost time sits in.
        good=deltallm-${PROFILE_AT:-c05e15a}
        [ -x "/tmp/$good" ] || good=
        for name in HEAD $good; do
            bin=$ours; [ "$name" = HEAD ] || bin=/tmp/$name
            DELTALLM_VK_PROFILE=1 DELTALLM_LOG=debug timeout 60 "$bin" bench -m "$m9" \
                --device vulkan -p 512 -n 0 -r 1 >"$out/profile-$name.txt" 2>&1
            echo "== profile $name"
            grep -v "pipeline .* created" "$out/profile-$name.txt" | tail -45
            grep -o "pipeline [^ ]* [^ ]*" "$out/profile-$name.txt" | sort | uniq -c |
                grep -E "gemm|expand|f16|dequant" | head -30
        done
        ;;
    windows)
        fits 60 "prefill windows by stage" || continue
        # WINDOW_MODEL: arch:shape (default qwen35:9b; qwen35moe:35b-a3b for the mixture).
        wm=${WINDOW_MODEL:-qwen35:9b}
        synth_spec "$wm"
        mw=$spec_gguf
        # Each window's stages (--profile, one line a window): a later chat turn's short windows
        # late in a long prompt against the same at its start, and whole windows of a round and
        # an odd row count (WINDOW_CASES: prompt@depth ...).
        for c in ${WINDOW_CASES:-164@6144 164@0 100@6144 2017@0 2048@0 2048@4096}; do
            echo "== $wm pp${c%@*} at depth ${c#*@}"
            DELTALLM_VK_PROFILE=1 timeout 60 "$ours" -v bench -m "$mw" --device vulkan \
                -p "${c%@*}" -d "${c#*@}" -n 0 -r 1 -o csv 2>&1 |
                grep -E "vulkan profile: a window|,pp" | sed 's/^debug: vulkan profile: //'
        done | tee "$out/windows.txt"
        ;;
    batched)
        # BATCHED_MODELS: arch:shape words (default the 9B), each a table of its own.
        [ -n "$GEMV_FORM" ] && form
        for spec in ${BATCHED_MODELS:-qwen35:9b}; do
            fits 150 "batched $spec against llama.cpp" || continue
            synth_spec "$spec"
            name=batched; [ "$spec" = qwen35:9b ] || name=batched-${spec#*:}
            timeout 240 python3 scripts/bench/compare.py "${args[@]}" -m "$spec_gguf" -p 512 \
                -n 128 -b "${BATCHED_B:-1,8,32,64}" -r 1 --rounds 1 --md "$out/$name.md" \
                --batched-json "$out/$name.json" >/dev/null
            cat "$out/$name.md"
        done
        ;;
    experts)
        fits 180 "the expert GEMM tiles" || continue
        if [ -f "$extra/test_vulkan.xz" ] && [ "${EXPERT_TESTS:-}" != none ]; then
            xz -dc "$extra/test_vulkan.xz" >/tmp/test_vulkan && chmod +x /tmp/test_vulkan
            # (A fresh process makes every pipeline: 90 s cut these before their summary.)
            DELTALLM_TEST_DATA="$repo/tests/data" timeout 150 /tmp/test_vulkan --gtest_brief=1 \
                --gtest_filter='*ExpertTiles*:*ExpertSorted*:*ExpertGemv*:MoeSort.*:MoeSum.*:SharedExpertAdd.*:WindowPrefill.*Moe*' 2>&1 |
                grep -E '^\[  FAILED|^\[  PASSED|tests? from .* ran|Failure|error' | head -20 |
                tee "$out/experts-tests.txt"
            # (A run cut by the timeout prints no summary: say so rather than print nothing.)
            [ "${PIPESTATUS[0]}" = 124 ] &&
                echo "the expert tests were cut at 150 s, before their summary" |
                tee -a "$out/experts-tests.txt"
        fi
        # EXPERT_FORMS: settings separated by '|' (default: the grouped tiles against the skinny
        # GEMM's grouped form), each the pp512, pp2048 and tg64 of each of EXPERT_SPECS
        # (arch:shape, default the 35B-A3B).
        IFS='|' read -r -a forms <<<"${EXPERT_FORMS:-DELTALLM_VK_EXPERT_SKINNY=0|DELTALLM_VK_EXPERT_SKINNY=1}"
        for spec in ${EXPERT_SPECS:-qwen35moe:35b-a3b}; do
            fits 60 "$spec by expert GEMM form" || continue
            synth_spec "$spec"
            m=$spec_gguf
            for form in "${forms[@]}"; do
                printf '%s %s ' "$spec" "$form"
                env $form timeout 60 "$ours" bench -m "$m" --device vulkan \
                    ${EXPERT_BENCH:--p 512,2048 -n 64 -r 2} -o csv 2>/dev/null |
                    grep -E ',(pp|tg)' | cut -d, -f7,10 | tr '\n' ' '
                echo
            done | tee -a "$out/experts.txt"
        done
        # EXPERT_KEEP=1: the form whose rates sum highest over the specs runs the later stages,
        # unless this round's tests did not pass (none ran to their summary, or a test or a
        # kernel report failed its check): then the first form.
        if [ "${EXPERT_KEEP:-0}" = 1 ]; then
            best_expert=$(fastest_form "$out/experts.txt")
            passed "$out/kernels.txt" "$out"/tests-*.log "$out/experts-tests.txt" ||
                best_expert=${forms[0]}
            echo "kept expert form: $best_expert" | tee -a "$out/experts.txt"
            [ -n "$best_expert" ] && export $best_expert
        fi
        [ "${EXPERT_PROFILE:-1}" = 0 ] && continue
        fits 40 "a profile of the 35B-A3B's prefill and decode in the last form" || continue
        synth qwen35moe 35b-a3b q4_k_m
        env ${forms[-1]} timeout 40 "$ours" bench -m "$models/qwen35moe-35b-a3b-q4_k_m.gguf" \
            --device vulkan -p 512 -n 32 -r 1 --profile 2>&1 | grep -A24 "vulkan profile" |
            tee "$out/profile-35b-a3b.txt"
        ;;
    moe)
        fits 150 "mixtures of experts" || continue
        [ -n "$GEMV_FORM" ] && form
        DEADLINE=$(($(left) - 10)) PROMPTS=${MOE_PROMPTS:-512,2048} MOE_BATCHES=${MOE_BATCHES:-8} \
            OUT=$out bash scripts/bench/device_moe.sh |
            grep -v '^deltallm\|^NVIDIA'
        ;;
    tests)
        [ -f "$extra/test_vulkan.xz" ] || continue
        fits 60 "the Vulkan tests${VALIDATE:+ under the validation layer}" || continue
        xz -dc "$extra/test_vulkan.xz" >/tmp/test_vulkan && chmod +x /tmp/test_vulkan
        layer=()
        [ -n "${VALIDATE:-}" ] && layer=(VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation
            DELTALLM_VK_VALIDATION=1)
        # In SHARDS processes at once (gtest's shards; the layer makes the whole binary slower
        # than one call allows): each shard's log apart, then one summary.
        shards=${SHARDS:-4}
        limit=$(($(left) > ${TESTS_S:-280} + 20 ? ${TESTS_S:-280} : $(left) - 20))
        pids=()
        for i in $(seq 0 $((shards - 1))); do
            mkdir -p /tmp/shard$i
            env "${layer[@]}" DELTALLM_TEST_TMP=/tmp/shard$i DELTALLM_TEST_DATA="$repo/tests/data" \
                DELTALLM_BIN="$ours" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
                timeout $limit /tmp/test_vulkan --gtest_brief=1 --gtest_filter="${TESTS_FILTER:-*}" \
                >"$out/tests-$i.log" 2>&1 &
            pids+=($!)
        done
        rcs=
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}"
            rc=$?
            rcs="$rcs $rc"
            [ "$rc" = 124 ] && echo "shard $i was cut at ${limit} s" >>"$out/tests-$i.log"
        done
        echo "shards' rc:$rcs (124: cut by its time) validation errors: $(cat "$out"/tests-*.log |
            grep -c 'Validation Error')"
        cat "$out"/tests-*.log | grep -E '^\[  FAILED|^\[  PASSED|tests? from .* ran|cut at' | sort -u |
            head -20
        ;;
    serve)
        fits 200 "serving against llama-server" || continue
        [ -n "$GEMV_FORM" ] && form
        LEVELS=${SERVE_LEVELS:-1,8,32,64} REQUESTS=${SERVE_REQUESTS:-16} WAVES=2 TURNS=2 \
            OUT=$out timeout $(($(left) - 10)) bash scripts/bench/device_serve.sh >"$out/serve.log" 2>&1
        tail -30 "$out/serve.log"
        ;;
    ab)
        # Each of AB_FORMS ('|' between settings) on each of AB_MODELS (arch:shape, Q4_K_M), the
        # bench's AB_BENCH flags, in rounds (AB_ROUNDS, 2), the forms alternating within a round.
        fits 60 "forms side by side" || continue
        IFS='|' read -r -a forms <<<"${AB_FORMS:-DELTALLM_VK_EXPERT_SORT=0|DELTALLM_VK_EXPERT_SORT=1}"
        for spec in ${AB_MODELS:-qwen35moe:35b-a3b qwen3moe:30b-a3b}; do
            synth_spec "$spec"
            for r in $(seq "${AB_ROUNDS:-2}"); do
                for form in "${forms[@]}"; do
                    printf '%s round %s %s ' "$spec" "$r" "$form"
                    env $form timeout 60 "$ours" bench -m "$spec_gguf" \
                        --device vulkan ${AB_BENCH:--b 8 -p 512 -n 64 -r 1} -o csv 2>/dev/null |
                        awk -F, '$4 ~ /^B[0-9]/ {printf "%s,%s,%s ", $4, $8, $9}
                            $7 ~ /^(pp|tg)[0-9]/ {printf "%s,%s ", $7, $10}'
                    echo
                done
            done
        done | tee "$out/ab.txt"
        # AB_KEEP=1: the form whose rates sum highest runs the later stages, unless this round's
        # tests did not pass (none ran to their summary, or one failed): then the first form.
        if [ "${AB_KEEP:-0}" = 1 ]; then
            best_ab=$(fastest_form "$out/ab.txt")
            passed "$out"/tests-*.log || best_ab=${forms[0]}
            echo "kept form: $best_ab" | tee -a "$out/ab.txt"
            [ -n "$best_ab" ] && export $best_ab
        fi
        ;;
    small)
        fits 60 "the GEMMs of windows of a few hundred rows, by form" || continue
        synth qwen35 9b q4_k_m
        # SMALL_FORMS ('|' between forms): the GEMMs of windows over the skinny GEMM's rows as
        # today, without the F16 expansion, on the skinny GEMM up to 256 rows; with SMALL_KEEP=1
        # the form whose prompt rates sum highest runs the later stages.
        IFS='|' read -r -a forms <<<"${SMALL_FORMS:-DELTALLM_VK_GEMM_EXPAND_ROWS=64|DELTALLM_VK_GEMM_EXPAND_ROWS=2048|DELTALLM_VK_GEMM_SKINNY_ROWS=256}"
        for form in "${forms[@]}"; do
            printf '%s ' "$form"
            env $form timeout 60 "$ours" bench -m "$m9" --device vulkan \
                -p "${SMALL_PROMPTS:-164,256,400,1000}" -n 0 -r 2 -o csv 2>/dev/null | grep ',pp' |
                cut -d, -f7,10 | tr '\n' ' '
            echo
        done | tee "$out/small.txt"
        best_small=$(fastest_form "$out/small.txt")
        echo "best small-window form: $best_small" | tee -a "$out/small.txt"
        [ "${SMALL_KEEP:-0}" = 1 ] && [ -n "$best_small" ] && export $best_small
        ;;
    odd)
        fits 90 "prompts of row counts off the GEMM tiles, against llama.cpp" || continue
        synth qwen35 9b q4_k_m
        timeout 150 python3 scripts/bench/compare.py "${args[@]}" -m "$m9" \
            -p "${ODD_PROMPTS:-164,1000,2017}" -n 0 -r 2 --rounds 1 --md "$out/odd.md" \
            --json "$out/odd.json" >/dev/null
        cat "$out/odd.md"
        ;;
    table)
        fits 120 "ours against llama.cpp, single stream" || continue
        for s in qwen35:9b qwen35:0.8b qwen3:8b; do synth "${s%:*}" "${s#*:}" q4_k_m; done
        timeout $(($(left) - 10)) python3 scripts/bench/compare.py "${args[@]}" -m "$m9" \
            -m "$models/qwen35-0.8b-q4_k_m.gguf" -m "$models/qwen3-8b-q4_k_m.gguf" -p 512,2048 \
            -n 128 -r 2 --rounds 1 --md "$out/table.md" --json "$out/table.json" >/dev/null
        cat "$out/table.md"
        ;;
    *) echo "== no stage '$stage'" ;;
    esac
done
[ -n "$golden_pid" ] && wait "$golden_pid" && tail -3 "$out/golden.log"
echo "== done at $SECONDS s"
