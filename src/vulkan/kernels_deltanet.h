// Launchers of the Gated DeltaNet layers: the decode step of one token (kernels_deltanet_step.cpp)
// and the window over n rows (kernels_deltanet.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "vulkan/decline.h"
#include "vulkan/kernel_family.h"

namespace dl::vk {

class DeltaNetKernels : public virtual KernelFamily {
  public:
    DeltaNetKernels(Device& dev, Pipelines& pipes) : KernelFamily(dev, pipes) {}

    // One decode token of a Gated DeltaNet layer (see shaders/deltanet_step.comp). act holds the
    // projections (offsets in floats) and receives y; params the layer's F32 parameters; ring
    // the conv inputs [K][conv_dim]; state S [H_v][d_k][d_v]; tok[0] the position.
    struct DeltaNetStep {
        uint32_t n_k_heads, n_v_heads, d_k, d_v, conv_kernel;
        uint32_t qkv_off, z_off, b_off, a_off, y_off;    // in act
        uint32_t conv_off, dt_off, ssm_a_off, norm_off;  // in params
        float eps;
        // Windows (deltanet_rows) only: where the chunked scan's scratch rows start in act,
        // n × deltanet_wy_floats() floats.
        uint32_t wy_off = kNone;
        // The step only: leave the gated RMSNorm to the GEMV that reads y (gemv_gated), y then
        // holding o · norm_w · silu(z) and act[ss_off ..] each column group's sum of squares of
        // o, n_v_heads × deltanet_groups(d_v, true) floats (kNone: the step applies the norm).
        uint32_t ss_off = kNone;
        // With ss_off: y_off receives those columns quantized to int8 (rounding_floats(n_v_heads
        // · d_v) floats, the layout of GemvRounding) instead of floats, for the tiled GEMV that
        // reads them with x_rounded (gemv_gated); needs column groups of 16 or more.
        bool round_y = false;
        // The step only: ring and state are the pools of every session's, this one's at the
        // float offsets tok[ResidentDriver::kRingBase] and tok[kStateBase] (a batch's rows, whose
        // sessions are data); otherwise they start the bindings.
        bool state_in_tok = false;
        // With state_in_tok: the rows of a batch in one dispatch, row r's words tok_row · r words
        // into tok, its counters counter_row · r words into counter, and its activations r rows
        // on (a conv input row, n_v_heads · d_v gate and output values, n_v_heads betas and
        // alphas a row). The gated norm stays in the step (no ss_off).
        uint32_t rows = 1, tok_row = 0, counter_row = 0;
    };
    // Returns a Decline when the shape has no kernel (d_v over the workgroup limit ...).
    static std::optional<Decline> deltanet_step_supported(const Features& f, uint32_t d_k,
                                                          uint32_t d_v, uint32_t conv_kernel);
    // counter: n_v_heads words, 0 between dispatches. With it, or with ss_off, each head's value
    // columns are split over workgroups of deltanet_columns (a power of two below d_v; 0: a
    // workgroup a head), which count on it to find the one that applies the gated norm (or
    // leave the norm to the reader); otherwise a workgroup takes a whole head.
    void deltanet_step(CommandList& cl, const DeltaNetStep& a, View act, View params, View ring,
                       View state, View tok, View counter = {});
    // The workgroups a head's d_v value columns are split over (split: a counter or ss_off).
    uint32_t deltanet_groups(uint32_t d_v, bool split) const;

    // A Gated DeltaNet layer over n rows at positions tok[0] ..: conv (carried in the ring)
    // from the input rows at qkv_off into its own n rows of conv_dim at conv_out (the two must
    // not overlap), q/k L2 norms and gates, the delta rule with the state on chip, the
    // gated RMSNorm. Other offsets as in DeltaNetStep, each now the start of n rows of its
    // quantity. `scan` picks the scan module (tests use it to reach every one; `best` takes the
    // fastest measured on an H200: the chunked (WY) form where the device's shared memory holds
    // its chunks, else the token scan with xor shuffles, else with clustered adds, else with
    // one thread per column); a forced module the device lacks is an error.
    using DeltaNetScan = Tuning::DeltaNetScan;
    static std::optional<Decline> deltanet_rows_supported(const Features& f, uint32_t d_k,
                                                          uint32_t d_v, uint32_t conv_kernel);
    // Rows a chunk of the chunked scan takes on this device for these head sizes (32 or 16),
    // or 0 where its chunks do not fit the device's shared memory.
    static uint32_t deltanet_chunk_rows(const Features& f, uint32_t d_k, uint32_t d_v);
    // Floats a window row of the chunked scan's scratch takes (its WY factors W and U, the
    // decayed q·k of a chunk and two decays, per value head), for chunks of up to
    // kDeltaNetChunkMax rows.
    static constexpr uint32_t kDeltaNetChunkMax = 32;
    using DeltaNetChunkTile = Tuning::DeltaNetChunkTile;
    static uint32_t deltanet_wy_floats(uint32_t n_v_heads, uint32_t d_k, uint32_t d_v) {
        return n_v_heads * (d_k + d_v + kDeltaNetChunkMax + 2);
    }
    void deltanet_rows(CommandList& cl, const DeltaNetStep& a, uint32_t conv_out, View act,
                       View params, View ring, View state, View tok, uint32_t n,
                       DeltaNetScan scan = DeltaNetScan::best);
};

}  // namespace dl::vk
