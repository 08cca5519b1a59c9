#!/usr/bin/env bash
# The kernel speed reports and per-role profiles behind docs/PERF.md, in one call on the GPU
# machine. Here (prepare): packs a build's deltallm, test_vulkan and vk_speed (the speed reports,
# bench/vk_speed; stripped, with the libfmt they link) xz-compressed into .devrun/reports.tar.xz:
#   scripts/vk/device_reports.sh prepare [BUILD_DIR=build-vk]
# There (run), carrying ".gl" and ".devrun":
#   [PARTS="gemm gemv window profile fusion gemvx windows suite"] scripts/vk/device_reports.sh run
# (other parts, not in the default list: attn, prefill, dn, tg, tests, groups, tiles, ahead, ppab,
# tgab, stages, decode, tgbase, ppbase, gemvbase, tgcfg, gemvrows, forms, stream, sass,
# attnafter)
# gemm:    GemmSpeed.Report (every tile family and NV tile size, with and without the F16 expansion)
# gemv:    GemvSpeed.Report (the launcher's shape and a spread of workgroup shapes)
# gemvrows: GemvSpeed.Rows (the launcher's shape against the number of rows, each gemv_wide)
# forms:   GemvSpeed.TokenForms (the token's tiled GEMV stages in their own forms, part by part),
#          with the registers the driver's compiler gives each of its kernels
# stream:  GemvSpeed.Stream (the device's read rate against threads and loads in flight, and
#          with workgroups that loop over chunks behind barriers, as the GEMVs do)
# attnafter: DecodeAttentionSpeed.AfterOtherWork and DeltaNetStepSpeed.AfterOtherWork (the decode
#          attention and the DeltaNet decode step right after themselves, after a stream that
#          overwrites the L2, after GEMVs of six block types, after both)
# stages:  StageSpeed.Report (what a stage of the token command costs whatever its work),
#          StageSpeed.Stream (a stage that only streams 1-512 MiB: its fixed cost and rate) and
#          StageSpeed.Chain (a chain of dependent stages without weights, handed on by dispatches
#          and barriers or inside one dispatch)
# decode:  the decode profile (each kind of GEMV stage apart) of Qwen3.5-9B and Qwen3-8B Q4_K_M,
#          and what the driver's compiler reports of every kernel the 9B runs (registers ...)
# sass:    the machine code the driver compiled for every kernel the 9B runs (pp512, tg4), read
#          from the pipeline cache by scripts/vk/sass.py and disassembled by the CUDA toolkit's
#          nvdisasm where the machine has it: a line a kernel here, $OUT/sass.tar.xz for reading
# window:  WindowAttentionSpeed.Report and DeltaNetWindowSpeed.Report (every scan module)
# profile: deltallm bench --profile on synthetic Qwen3.5-9B and 0.8B Q4_K_M (pp512, pp2048, tg64)
# fusion:  decode tg128 with DELTALLM_VK_DECODE_FUSION=0 and 1, two alternating rounds
# gemvx:   decode tg128 with DELTALLM_VK_GEMV_X=global and auto, the same
#          way, on Qwen3.5-9B, 0.8B and Qwen3-8B Q4_K_M, then the 9B's decode profile with each
# suite:   the Vulkan test suite (the tests matching $FILTER, default all) under the Khronos
#          validation layer (needs the layer's deb in .gl): the counts and the number of
#          validation messages; the log in $OUT
# attn:    the window attention and window prefill tests on this device (every path it has),
#          then WindowAttentionSpeed.Report
# dn:      decode tg128 with DELTALLM_VK_DN_COLUMNS=0 (a workgroup a head) and 32, two
#          alternating rounds, on Qwen3.5-9B and 0.8B Q4_K_M
# groups:  decode tg128 for DELTALLM_VK_GEMV_X / DELTALLM_VK_GEMV_GROUPS pairs, two alternating
#          rounds, on Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M
# tiles:   pp512 and pp2048 with DELTALLM_VK_GEMM_TILE unset, 64x128x64 and 128x64x64 (or the
#          values in $TILES), two alternating rounds, on Qwen3.5-9B and Qwen3-8B Q4_K_M
# ahead:   pp512 and pp2048 with DELTALLM_VK_EXPAND_AHEAD=0 and 1, two alternating rounds, on
#          Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M
# ppab:    the same for the variable $VAR over $VALUES (e.g. VAR=DELTALLM_VK_EXPAND_AHEAD
#          VALUES="0 1")
# tgab:    decode tg128 for the variable $VAR over $VALUES, two alternating rounds, on
#          Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M
# tgbase:  decode tg128 of this build against the build packed from $BASE_BUILD (prepare with
#          BASE_BUILD=dir), two alternating rounds, on Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M:
#          an A/B of a kernel change that has no switch
# ppbase:  pp512 and pp2048 of this build against the $BASE_BUILD one, two alternating rounds,
#          on Qwen3.5-9B and 0.8B Q4_K_M
# gemvbase: GemvSpeed.Report of the $BASE_BUILD build, then of this one
# tgcfg:   decode tg128 for each configuration in $CONFIGS (';' between configurations, each a
#          list of VAR=value, e.g. CONFIGS="A=0;A=1 B=2"), two alternating rounds, on Qwen3.5-9B
#          and Qwen3-8B Q4_K_M
# tests:   the Vulkan tests matching $FILTER (default all) on this device, without the layer
# tg:      decode tg128 on Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M, then Qwen3-8B's decode
#          profile
# prefill: pp512 and pp2048 on Qwen3.5-9B, Qwen3-8B and Qwen3.5-0.8B Q4_K_M
# windows: prefill with DELTALLM_VK_WINDOW=512, 1024 and 2048 on Qwen3.5-9B (pp512, pp2048) and
#          Qwen3-8B, 0.8B (pp2048)
# Output goes to stdout and $OUT/reports.txt.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
pack=$repo/.tools/device-reports
if [ "${1:-run}" = prepare ]; then
    set -e
    build=${BUILD_DIR:-$repo/build-vk}
    rm -rf "$pack" && mkdir -p "$pack/lib"
    cp "$build/deltallm" "$build/tests/test_vulkan" "$build/vk_speed" "$pack/"
    cp -L /lib/x86_64-linux-gnu/libfmt.so.9 "$pack/lib/"
    strip --strip-unneeded "$pack/deltallm" "$pack/test_vulkan" "$pack/vk_speed"
    # Part sass decompresses the driver's pipeline cache with zstd, which that machine may lack.
    if command -v zstd >/dev/null; then cp "$(command -v zstd)" "$pack/"; fi
    if [ -n "${BASE_BUILD:-}" ]; then
        cp "$BASE_BUILD/deltallm" "$pack/deltallm.base"
        cp "$BASE_BUILD/tests/test_vulkan" "$pack/test_vulkan.base"
        strip --strip-unneeded "$pack/deltallm.base" "$pack/test_vulkan.base"
        # A base build from before the speed reports had a binary of their own ran them from
        # test_vulkan (with DELTALLM_VK_SPEED=1, which report() still sets).
        if [ -f "$BASE_BUILD/vk_speed" ]; then
            cp "$BASE_BUILD/vk_speed" "$pack/vk_speed.base"
        else
            cp "$pack/test_vulkan.base" "$pack/vk_speed.base"
        fi
        strip --strip-unneeded "$pack/vk_speed.base"
    fi
    mkdir -p "$repo/.devrun"
    tar -C "$repo/.tools" -cf - device-reports | xz -6 -T2 >"$repo/.devrun/reports.tar.xz"
    du -sh "$repo/.devrun/reports.tar.xz"
    exit 0
fi
out=${OUT:-/tmp/device_reports_out}
mkdir -p "$out"
cd "$repo"
exec > >(tee "$out/reports.txt") 2>&1
python3 -c "import tarfile; tarfile.open('.devrun/reports.tar.xz').extractall('.tools')"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export DELTALLM_TEST_TMP=$(mktemp -d)
tv=$pack/test_vulkan
speed=$pack/vk_speed
ours=$pack/deltallm
"$ours" info --devices 2>&1 | tail -4
report() {  # FILTER [BINARY]: the speed reports (vk_speed) matching FILTER
    DELTALLM_VK_SPEED=1 timeout 180 "${2:-$speed}" --gtest_filter="$1" 2>&1 | grep -v '^\[\|^Running\|^Note\|^$'
}
model() {  # synthesizes ARCH SHAPE once, prints its path
    local m=/tmp/$1-$2-q4_k_m.gguf
    [ -f "$m" ] || "$ours" synth --arch "$1" --shape "$2" --type q4_k_m -o "$m" >/dev/null
    echo "$m"
}
tg128() {  # BINARY MODEL [VAR=value ...]: decode tg128, the t/s column (mean ± deviation)
    local bin=$1 m=$2
    shift 2
    env "$@" timeout 60 "$bin" bench -m "$m" --device vulkan -p 0 -n 128 -r 3 2>&1 | grep tg128 |
        cut -d'|' -f8
}
pp() {  # BINARY MODEL [VAR=value ...]: pp512 and pp2048, the t/s columns
    local bin=$1 m=$2
    shift 2
    env "$@" timeout 90 "$bin" bench -m "$m" --device vulkan -p 512,2048 -n 0 -r 2 2>&1 |
        grep ' pp' | cut -d'|' -f7,8 | tr '\n' ' '
}
vs_base() {  # MEASURE "ARCH SHAPE" ...: MEASURE (tg128 or pp) of the base build and of this one,
    # two alternating rounds on each model
    local measure=$1 am m round bin
    shift
    for am in "$@"; do
        m=$(model $am)
        for round in 1 2; do
            for bin in "$ours.base" "$ours"; do
                echo "$am ${bin##*/}: $("$measure" "$bin" "$m")"
            done
        done
    done
}
ab() {  # VAR "VALUES" MODEL LABEL: tg128 for each value of VAR, two alternating rounds
    for round in 1 2; do
        for v in $2; do
            echo "$4 $1=$v: $(tg128 "$ours" "$3" "$1=$v")"
        done
    done
}
pp_ab() {  # VAR "VALUES" "ARCH:SHAPE ...": pp512 and pp2048 for each value of VAR (auto: empty),
    # two alternating rounds
    for am in $3; do
        m=$(model "${am%:*}" "${am#*:}")
        for round in 1 2; do
            for v in $2; do
                val=$v
                [ "$v" = auto ] && val=
                echo "$am $1=$v: $(pp "$ours" "$m" "$1=$val")"
            done
        done
    done
}
for part in ${PARTS:-gemm gemv window profile fusion gemvx windows suite}; do
    echo "== $part"
    case $part in
        gemm) report 'GemmSpeed*' ;;
        gemv) report 'GemvSpeed.Report' ;;
        gemvrows) report 'GemvSpeed.Rows' ;;
        forms) DELTALLM_VK_KERNEL_STATS=1 DELTALLM_LOG=info report 'GemvSpeed.TokenForms' ;;
        stream) report 'GemvSpeed.Stream' ;;
        gemvbase)
            echo "base:" && report 'GemvSpeed*' "$speed.base"
            echo "this build:" && report 'GemvSpeed*'
            ;;
        tgbase) vs_base tg128 "qwen35 9b" "qwen3 8b" "qwen35 0.8b" ;;
        ppbase) vs_base pp "qwen35 9b" "qwen35 0.8b" ;;
        tgcfg)
            IFS=';' read -r -a cfgs <<<"$CONFIGS"
            for round in 1 2; do
                for am in "qwen35 9b" "qwen3 8b"; do
                    m=$(model $am)
                    for cf in "${cfgs[@]}"; do
                        # shellcheck disable=SC2086  # each configuration is a list of VAR=value
                        echo "$am $cf: $(tg128 "$ours" "$m" $cf)"
                    done
                done
            done
            ;;
        stages) report 'StageSpeed*' ;;
        attnafter) report 'DecodeAttentionSpeed.AfterOtherWork:DeltaNetStepSpeed.AfterOtherWork' ;;
        decode)
            for am in "qwen35 9b" "qwen3 8b"; do
                echo "$am decode profile:"
                timeout 60 "$ours" bench -m "$(model $am)" --device vulkan -p 0 -n 64 -r 2 --profile \
                    2>&1 | grep -v "^|\|^$\|floors"
            done
            echo "qwen35 9b kernels:"
            DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= timeout 90 "$ours" \
                bench -m "$(model qwen35 9b)" --device vulkan -p 512 -n 4 -r 1 2>&1 | grep 'kernel ' | sort -u
            ;;
        sass)
            d=$(mktemp -d)
            DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE=$d timeout 90 "$ours" \
                bench -m "$(model qwen35 9b)" --device vulkan -p 512 -n 4 -r 1 >"$d/stats.txt" 2>&1
            PATH=$pack:$PATH:/usr/local/cuda/bin python3 scripts/vk/sass.py "$d"/*.cache "$d/stats.txt" "$d/sass"
            tar -C "$d" -cJf "$out/sass.tar.xz" sass
            ;;
        window) report 'WindowAttentionSpeed*:DeltaNetWindowSpeed*' ;;
        attn)
            timeout 300 "$tv" --gtest_brief=1 --gtest_filter='*WindowAttention*:WindowPrefill*' 2>&1 |
                grep -v '^Note\|^$' | tail -25
            report 'WindowAttentionSpeed*'
            ;;
        prefill)
            for am in "qwen35 9b" "qwen3 8b" "qwen35 0.8b"; do
                echo "$am: $(pp "$ours" "$(model $am)")"
            done
            ;;
        profile | fusion)
            for s in 9b 0.8b; do
                m=$(model qwen35 $s)
                if [ "$part" = profile ]; then
                    timeout 150 "$ours" bench -m "$m" --device vulkan -p 512,2048 -n 64 -r 2 --profile 2>&1
                else
                    ab DELTALLM_VK_DECODE_FUSION "0 1" "$m" "qwen35 $s"
                fi
            done
            ;;
        groups)
            for am in "qwen35 9b" "qwen3 8b" "qwen35 0.8b"; do
                m=$(model $am)
                for round in 1 2; do
                    for cf in auto:1 auto:2 auto:4 auto:8 bytes:4; do
                        echo "$am x=${cf%:*} groups=${cf#*:}: $(tg128 "$ours" "$m" \
                            "DELTALLM_VK_GEMV_X=${cf%:*}" "DELTALLM_VK_GEMV_GROUPS=${cf#*:}")"
                    done
                done
            done
            ;;
        tiles) pp_ab DELTALLM_VK_GEMM_TILE "${TILES:-auto 64x128x64 128x64x64}" "qwen35:9b qwen3:8b" ;;
        ppab) pp_ab "$VAR" "$VALUES" "qwen35:9b qwen3:8b qwen35:0.8b" ;;
        ahead) pp_ab DELTALLM_VK_EXPAND_AHEAD "0 1" "qwen35:9b qwen3:8b qwen35:0.8b" ;;
        tgab)
            for am in "qwen35 9b" "qwen3 8b" "qwen35 0.8b"; do ab "$VAR" "$VALUES" "$(model $am)" "$am"; done
            ;;
        tests)
            timeout 400 "$tv" --gtest_brief=1 --gtest_filter="${FILTER:-*}" 2>&1 | grep -v '^Note\|^$' | tail -25
            ;;
        tg)
            for am in "qwen35 9b" "qwen3 8b" "qwen35 0.8b"; do
                echo "$am: $(timeout 60 "$ours" bench -m "$(model $am)" --device vulkan -p 0 -n 128 -r 3 \
                    2>&1 | grep tg128 | cut -d'|' -f7,8)"
            done
            timeout 60 "$ours" bench -m "$(model qwen3 8b)" --device vulkan -p 0 -n 64 -r 2 --profile 2>&1 |
                grep -v "^|\|^$\|floors"
            ;;
        dn)
            for s in 9b 0.8b; do ab DELTALLM_VK_DN_COLUMNS "0 32" "$(model qwen35 $s)" "qwen35 $s"; done
            ;;
        gemvx)
            for am in "qwen35 9b" "qwen35 0.8b" "qwen3 8b"; do
                ab DELTALLM_VK_GEMV_X "global auto" "$(model $am)" "$am"
            done
            for v in global auto; do
                echo "qwen35 9b DELTALLM_VK_GEMV_X=$v profile:"
                DELTALLM_VK_GEMV_X=$v timeout 60 "$ours" bench -m "$(model qwen35 9b)" --device vulkan \
                    -p 0 -n 64 -r 2 --profile 2>&1 | grep -v "^|\|^$\|floors"
            done
            ;;
        windows)
            for am in "qwen35 9b" "qwen3 8b" "qwen35 0.8b"; do
                for w in 512 1024 2048; do
                    echo "$am window $w: $(pp "$ours" "$(model $am)" DELTALLM_VK_WINDOW=$w)"
                done
            done
            ;;
        suite)
            VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation DELTALLM_VK_VALIDATION=1 timeout 420 \
                "$tv" --gtest_brief=1 --gtest_filter="${FILTER:-*}" >"$out/validation.log" 2>&1
            echo "suite rc=$?"
            grep -E "tests ran|PASSED|FAILED|SKIPPED \]" "$out/validation.log" | head -20
            echo "validation messages: $(grep -c -i 'Validation Error\|VUID' "$out/validation.log")"
            ;;
    esac
done
