// What the kernel families share (see kernel_family.h).
#include "vulkan/kernel_family.h"

#include <algorithm>

#include "vulkan/spirv_shared.h"

namespace dl::vk {

uint32_t KernelFamily::wg_size(uint32_t want) const {
    uint32_t limit = std::max<uint32_t>(dev_.features().max_workgroup_invocations, 64);
    uint32_t s = 1;
    while (s * 2 <= std::min(want, limit)) s *= 2;
    return s;
}

std::optional<uint64_t> KernelFamily::module_shared_bytes(const char* name,
                                                          std::vector<uint32_t> spec) {
    auto b = workgroup_bytes(find_module(name), spec);
    if (!b) return std::nullopt;
    return *b + kSharedMargin;
}

const char* KernelFamily::type_suffix(QType t) {
    switch (t) {
        case QType::F32:
            return "f32";
        case QType::F16:
            return "f16";
        case QType::Q4_0:
            return "q4_0";
        case QType::Q8_0:
            return "q8_0";
        case QType::Q4_K:
            return "q4_k";
        case QType::Q5_K:
            return "q5_k";
        case QType::Q6_K:
            return "q6_k";
        default:
            return nullptr;
    }
}

KernelFamily::BatchGemvShape KernelFamily::batch_gemv_shape(QType t, uint32_t cols, uint32_t nvec,
                                                            View w, View x, uint32_t x_off,
                                                            const BatchGemvForm& form) const {
    const Features& f = dev_.features();
    const bool sum = form.sum, bytes = form.bytes;
    BatchGemvShape s;
    const uint32_t groups = (nvec + 7) / 8;
    s.nb = form.fixed_nb ? form.fixed_nb : (nvec + groups - 1) / groups;
    // One load of x serves every row of the workgroup, so more rows where the sums fit the
    // registers: 8 rows over up to 4 vectors, 4 over more; over bytes 8 where a workgroup takes
    // several groups (more than 8 vectors), but not over experts, whose every (row, vector)
    // holds a row of its own.
    const bool wide = bytes && !form.experts && nvec > 8;
    s.k_rows = tuning.gemv_batch_rows ? tuning.gemv_batch_rows : s.nb <= 4 || wide ? 8 : 4;
    // Threads: a slice of 32 weights each, as many as the row has from 64 up to 128; for a
    // weighted sum of experts a (vector, slice) pair each, up to 256. Over bytes one subgroup's
    // worth (at least 32), each thread several slices, so that fewer partial sums are reduced for
    // the same products: measured on an H100 (12288 x 4096 Q4_K, 8 / 32 vectors, 4 / 8 rows: 0.056
    // -> 0.047 ms and 0.225 -> 0.141 ms; 9B batched steps of 8 / 32 rows 732 -> 832 and 861 ->
    // 1187 t/s aggregate).
    const uint32_t slices = (cols + 31) / 32 * (sum ? s.nb : 1);
    s.wg = 64;
    while (s.wg < (sum ? 256u : 128u) && s.wg < slices) s.wg *= 2;
    // A weighted sum over several rows' slots too: its many groups fill the device, and each
    // thread then sums more slices (H100, B8 steps, 256 / 128 -> 32 threads: Qwen3-30B-A3B
    // 586 -> 631 t/s, 35B-A3B 718 -> 737); a token's one group keeps its wide form (its tg64 in
    // 32 threads 261 -> 230).
    if ((bytes && !sum) || (sum && nvec > s.nb))
        s.wg = std::min(wg_size(std::max(32u, f.subgroup_size)), s.wg);
    if (tuning.gemv_batch_threads) s.wg = std::min(tuning.gemv_batch_threads, wg_size(256));
    const uint32_t w16 = w.offset % 16 == 0 ? 1 : 0;
    const uint32_t x16 = x.offset % 16 == 0 && x_off % 4 == 0 && cols % 4 == 0 ? 1 : 0;
    const bool decode_once = tuning.gemv_batch_decode_once && t != QType::F32 && t != QType::F16;
    // The partial sums' columns: a subgroup's each (the _sg modules) or a thread's.
    const uint32_t nsg =
        f.subgroup_arithmetic ? std::max(1u, s.wg / std::max(1u, f.min_subgroup_size)) : s.wg;
    s.spec = {s.wg, s.k_rows, w16, x16, s.nb, decode_once ? 1u : 0u, nsg};
    return s;
}

KernelFamily::BatchGemvSpan KernelFamily::batch_gemv_span(const Features& f, uint32_t row_blocks,
                                                          uint32_t nvec, uint32_t nb) {
    // About 32 workgroups a multiprocessor (of 64-128 threads: several resident at once), so
    // that one waiting on its loads leaves others to run.
    const uint32_t want = (f.sm_count ? f.sm_count : 32) * 32;
    const uint32_t groups = (nvec + nb - 1) / nb;
    const uint32_t z = std::clamp((want + row_blocks - 1) / row_blocks, 1u, groups);
    const uint32_t span = (groups + z - 1) / z;
    return {span, (groups + span - 1) / span};
}

bool KernelFamily::batch_gemv_reads_bytes(const std::string& module, uint32_t cols,
                                          uint32_t min_cols) const {
    const Features& f = dev_.features();
    if (!f.integer_dot || cols % 32 != 0 || find_module(module).empty() ||
        find_module("round_rows").empty())
        return false;
    switch (tuning.gemv_x) {
        case Tuning::GemvX::bytes:
            return true;
        case Tuning::GemvX::global:
            return false;
        default:
            return f.integer_dot_fast && cols >= min_cols;
    }
}

}  // namespace dl::vk
