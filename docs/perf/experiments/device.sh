# Sourced by the experiment scripts beside it, from the repository root on the device machine:
# unpacks the binaries packed by `scripts/vk/device_reports.sh prepare`, points the Vulkan loader
# at the NVIDIA driver, and defines
#   B, T, S       the packed deltallm, test_vulkan and vk_speed (the speed reports; the scripts
#                 dated before they left test_vulkan ran them as $T with DELTALLM_VK_SPEED=1:
#                 today that is $S, the variable still set)
#   synth M ...   each "ARCH SHAPE NAME" synthesized once, Q4_K_M, into /tmp/NAME.gguf
#   tg NAME       decode tg128 of /tmp/NAME.gguf over two runs: the t/s column (mean ± deviation)
#   prof NAME [VAR=VALUE ...]  the decode profile of tg128 (one run) under those variables, on
#                 one line: the token and its roles, us
#   tgb NAME [VAR=VALUE ...]   tg as above, under those variables
#   tgd NAME [VAR=VALUE ...]   tg128 at depth 4096 over ${REPS:-2} runs, under those variables
#   tgp NAME [VAR=VALUE ...]   tg128 over two runs in a session of 2049 positions (beside pp2048,
#                 as the comparison runs it), under those variables
#   whole NAME [VAR=VALUE ...] the decode profile's token timed whole (us, on the device) and the
#                 roles matching $ROLES (a grep -E pattern, default "deltanet|attention"), us a
#                 token, on one line
#   vs_base NAME ...  whole and tgb of this build and of the base build ($P/deltallm.base, packed
#                 with BASE_BUILD), two rounds over the models, this build first, after the 9B's
#                 warm-up
#   gen NAME [run options]  the generation rate `run` prints for 512 tokens chosen on the device
#                 after a 5-token prompt (tokens/s)
#   same_ids NAME ...  whether this build and the base build choose the same 200 greedy tokens
#   warm          the 9B's decode run once, uncounted (the device brought up to speed)
#   validate FILTER  the Vulkan tests matching FILTER under the Khronos validation layer, devices
#                 opened as the engine opens them: their counts and the number of messages
PARTS=none bash scripts/vk/device_reports.sh run >/dev/null 2>&1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/.tools/device-reports/lib
export DELTALLM_TEST_TMP=$(mktemp -d)
P=$PWD/.tools/device-reports
B=$P/deltallm
T=$P/test_vulkan
S=$P/vk_speed
synth() {
    local m
    for m in "$@"; do
        set -- $m
        [ -f /tmp/$3.gguf ] || $B synth --arch $1 --shape $2 --type q4_k_m -o /tmp/$3.gguf >/dev/null 2>&1
    done
}
tg() {
    $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 |
        grep -E "tg128|rror" | cut -d'|' -f8
}
prof() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 |
        grep -A16 "profile, decode" | grep -E "decode|whole|gemv|head|deltanet|attention" |
        sed 's/  */ /g' | tr '\n' ' '
}
tgb() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 |
        grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '
}
tgd() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -d 4096 -r ${REPS:-2} 2>&1 |
        grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '
}
tgp() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 2048 -n 128 -r 2 2>&1 |
        grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '
}
whole() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 |
        grep -E "us a token on the device \(the|${ROLES:-deltanet|attention}" |
        grep -oE "[0-9.]+ us a token on the device \(the|[a-z]+ +[0-9.]+ ms +[0-9.]+% +[0-9.]+ us/token" |
        awk '{print $1, $(NF-1)}' | sed 's/ device//' | tr '\n' ' '
}
warm() {
    $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
}
validate() {
    DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER="$1" bash scripts/vk/device_reports.sh run 2>&1 |
        tail -4
}
vs_base() {
    local r m
    warm
    for r in 1 2; do
        for m in "$@"; do
            echo "round $r $m new  $(whole $m) | tg128 $(tgb $m)"
            echo "round $r $m base $(B=$P/deltallm.base whole $m) | tg128 $(B=$P/deltallm.base tgb $m)"
        done
    done
}
gen() {
    local m=$1
    shift
    $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 512 --ignore-eos "$@" \
        2>&1 >/dev/null | grep -oE "generation .*" | grep -oE "\([0-9.]+ tokens/s" | tr -d '('
}
same_ids() {
    local m
    for m in "$@"; do
        $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 200 --temp 0 \
            --ignore-eos --print-ids >/tmp/ids_new_$m.txt 2>/dev/null
        $P/deltallm.base run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 200 \
            --temp 0 --ignore-eos --print-ids >/tmp/ids_base_$m.txt 2>/dev/null
        cmp -s /tmp/ids_new_$m.txt /tmp/ids_base_$m.txt && echo "$m greedy ids: the same" ||
            echo "$m greedy ids: differ"
    done
}
