// What every family of kernel launchers (kernels_*.h) shares: the device and its pipelines, the
// workgroup sizes the device allows, the shared memory a module declares, and the knobs of
// every launcher (Tuning). Kernels (kernels.h) is every family in one object; each family
// derives from KernelFamily virtually, so that object holds one device, one set of pipelines
// and one Tuning that every family reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/types.h"
#include "vulkan/kernels_tuning.h"
#include "vulkan/pipeline.h"

namespace dl::vk {

// The form of a batched GEMV (KernelFamily::batch_gemv_shape).
struct BatchGemvForm {
    uint32_t fixed_nb = 0;  // vectors a group (0: as even as groups of at most 8 allow)
    bool experts = false;   // EXPERTS: a group's vectors may read different experts' rows
    bool sum = false;       // EXPERTS' weighted sum: threads take (vector, slice) pairs
    bool bytes = false;     // x rounded to bytes (X_INT8)
};

class KernelFamily {
  public:
    KernelFamily(Device& dev, Pipelines& pipes) : dev_(dev), pipes_(pipes) {}
    KernelFamily(const KernelFamily&) = delete;
    KernelFamily& operator=(const KernelFamily&) = delete;

    static constexpr uint32_t kNone = 0xffffffffu;  // an offset that is not given

    // The knobs of every family's launchers (kernels_tuning.h).
    Tuning tuning;

    // The scratch of work split over workgroups whose last part to finish adds the parts' sums
    // in part order (a GEMM's tiles split over K, shaders/gemm_split.glsl; a window's attention
    // split over its keys): a counter a tile (zero when first given, zero again after each
    // dispatch) and the parts' sums. Dispatches that run together need scratches of their own.
    struct SplitScratch {
        View counters, parts;
    };
    struct SplitNeed {
        uint64_t counters = 0, parts = 0;  // bytes
    };

  protected:
    // The largest power of two <= want that the device allows in one workgroup.
    uint32_t wg_size(uint32_t want) const;
    // What a compiler may add to a module's shared memory beyond its declarations (an H200
    // reported 43136 bytes for the 43008 the 9B's Q6_K GEMV over a norm's input declares), so a
    // shape chosen to fit does.
    static constexpr uint32_t kSharedMargin = 512;
    // The shared memory module `name` declares with specialization constants spec
    // (spirv_shared.h), with the margin; empty where the build lacks the module.
    static std::optional<uint64_t> module_shared_bytes(const char* name,
                                                       std::vector<uint32_t> spec);
    // The module suffix of weights of type t ("q4_k"), or null for a type no kernel reads.
    static const char* type_suffix(QType t);
    // The shape of a batched GEMV (shaders/gemv_batch.comp, plain or EXPERTS) over nvec vectors
    // of cols values of weights of type t: vectors a group (nb: as even as groups of at most 8
    // allow, unless the caller fixes it), weight rows a workgroup, threads (each by its rule or
    // tuning's gemv_batch_rows / _threads), and its specialization constants for weights at w and
    // x at x[x_off ..].
    struct BatchGemvShape {
        uint32_t nb, k_rows, wg;
        std::vector<uint32_t> spec;
    };
    BatchGemvShape batch_gemv_shape(QType t, uint32_t cols, uint32_t nvec, View w, View x,
                                    uint32_t x_off, const BatchGemvForm& form = {}) const;
    // The groups of vectors a workgroup of that GEMV takes (its push constant `span`) and so its
    // workgroups along z: every group in one workgroup where the weight rows alone give the
    // device enough workgroups, else split until they do (a window's expert GEMVs: a few
    // hundred rows over thousands of pairs).
    struct BatchGemvSpan {
        uint32_t span, z;
    };
    static BatchGemvSpan batch_gemv_span(const Features& f, uint32_t row_blocks, uint32_t nvec,
                                         uint32_t nb);
    // Whether that GEMV (its module `module`, without the _sg suffix) reads its vectors rounded
    // to bytes (GemmKernels::round_rows): Tuning::gemv_x `bytes` wherever the device has integer
    // dot products and the build the modules, `global` never, `automatic` where they run in
    // hardware and the rows hold at least min_cols values.
    bool batch_gemv_reads_bytes(const std::string& module, uint32_t cols, uint32_t min_cols) const;

    Device& dev_;
    Pipelines& pipes_;
};

}  // namespace dl::vk
