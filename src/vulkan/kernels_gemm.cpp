// Launchers of the prefill GEMM tiles (see kernels.h): Y = X·Wᵀ over a window of rows with the
// weights dequantized from their native blocks inside the tile, and the F16 copy of X that the
// cooperative-matrix tiles read. Push-constant layouts mirror the shaders.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "vulkan/kernels.h"

namespace dl::vk {

namespace {

struct GemmPush {
    uint32_t m, n, k, row_bytes, x_off, y_off, mode;
};
struct F16CopyPush {
    uint32_t n, x_off;
};
// Tiles of Y per workgroup (window rows × weight rows) and the shared memory they stage in.
constexpr uint32_t kGemmRows = 64;
constexpr uint32_t kGemmCols = 64, kGemmColsCoopmat = 128;
constexpr uint32_t kGemmShared = 32 * 1024, kGemmSharedCoopmat = 38 * 1024;

bool gemm_type(QType t) {
    switch (t) {
        case QType::F32:
        case QType::F16:
        case QType::Q4_0:
        case QType::Q8_0:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
            return true;
        default:
            return false;
    }
}

std::string gemm_module(QType t, bool coopmat) {
    std::string name(qtype_name(t));
    for (char& c : name) c = (char)std::tolower((unsigned char)c);
    return fmt::format("gemm_{}@{}", name, coopmat ? "khr_coopmat" : "scalar");
}
}  // namespace

std::optional<Decline> Kernels::gemm_supported(const Features& f, QType t) {
    if (!gemm_type(t))
        return Decline{fmt::format("no GEMM tile kernel for weights of type {}", qtype_name(t))};
    if (f.max_shared_memory < kGemmShared)
        return Decline{fmt::format("the GEMM tiles need {} KiB of shared memory; the device has {}",
                                   kGemmShared / 1024, f.max_shared_memory / 1024)};
    if (f.max_workgroup_invocations < 128)
        return Decline{"the GEMM tiles need 128 threads a workgroup"};
    return std::nullopt;
}

bool Kernels::gemm_uses_coopmat(const Features& f, Variant v) {
    // The tile is split over exactly 8 subgroups, so their size must be fixed and known.
    return v != Variant::scalar && f.supports(Variant::khr_coopmat) &&
           f.min_subgroup_size == f.max_subgroup_size && f.subgroup_size >= 16 &&
           8 * f.subgroup_size <= f.max_workgroup_invocations &&
           f.max_shared_memory >= kGemmSharedCoopmat;
}

bool Kernels::gemm_reads_f16(Variant v, uint32_t cols) const {
    return gemm_uses_coopmat(dev_.features(), v) && cols % 8 == 0;
}

void Kernels::f16_copy(CommandList& cl, View x, uint32_t x_off, View h, uint32_t n) {
    if (n % 8) fail("f16_copy of {} values: not a multiple of 8", n);
    const Kernel& k = pipes_.get("f16_copy", 2, sizeof(F16CopyPush));
    F16CopyPush p{n, x_off};
    auto [gx, gy] = grid(dev_.features(), (n / 8 + 63) / 64);
    cl.dispatch(k, {x, h}, p, gx, gy);
}

void Kernels::gemm(CommandList& cl, Variant v, QType t, View w, uint32_t rows, uint32_t cols,
                   View x, uint32_t x_off, View x16, View y, uint32_t y_off, uint32_t n_rows,
                   bool accumulate) {
    const Features& f = dev_.features();
    if (auto d = gemm_supported(f, t)) fail("{}", d->reason);
    const bool cm = gemm_reads_f16(v, cols);
    if (cm && x16.buffer == VK_NULL_HANDLE) fail("the cooperative-matrix GEMM needs the F16 rows");
    std::vector<uint32_t> spec;
    if (cm) spec = {8 * f.subgroup_size, gemm_ablate};
    const Kernel& k = pipes_.get(gemm_module(t, cm), 3, sizeof(GemmPush), spec);
    GemmPush p{n_rows, rows, cols, (uint32_t)row_size(t, cols), x_off, y_off, accumulate ? 1u : 0u};
    const uint32_t cols_a_tile = cm ? kGemmColsCoopmat : kGemmCols;
    cl.dispatch(k, {w, cm ? x16 : x, y}, p, (rows + cols_a_tile - 1) / cols_a_tile,
                (n_rows + kGemmRows - 1) / kGemmRows);
}
}  // namespace dl::vk
