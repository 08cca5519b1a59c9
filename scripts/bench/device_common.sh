# What every one-call device script (device_round.sh, device_batched.sh, device_moe.sh) does
# first on the GPU machine, sourced from the repository root with `out` set: a deadline for its
# stages (DEADLINE seconds, default 560; `fits SECONDS NAME` skips a stage that would not fit),
# the Vulkan loader of .gl unpacked, the benchmark pack of .devrun unpacked (ours, the llama.cpp
# peer, their libraries), and the machine named.
mkdir -p "$out"
deadline=${DEADLINE:-560}
left() { echo $((deadline - SECONDS)); }
fits() {  # seconds name
    if [ "$(left)" -lt "$1" ]; then echo "== skipped: $2 (needs $1 s, $(left) s left)"; return 1; fi
    echo "== $2 ($(left) s left)"
}
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
python3 -c "import tarfile; tarfile.open('.devrun/device-bench.tar.xz').extractall('.tools')"
pack=$PWD/.tools/device-bench
export LD_LIBRARY_PATH=$pack/lib
ours=$pack/deltallm
peer=$pack/peer/peer_bench
"$ours" --version
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
