// Where a step's activations lie in a session's activation buffer: the offset of every
// quantity a layer reads or writes, for a token (one row) or a window of rows.
#pragma once

#include <cstdint>

#include "model/forward_pass.h"
#include "model/model.h"

namespace dl::vk {

// Offsets (in floats) of the activations inside a session's activation buffer, for `rows` rows
// at once (1: the decode token; the window size: prefill). Each quantity holds `rows` contiguous
// rows of its own width, so its row stride is its width.
struct ActLayout {
    uint32_t h = 0, xn = 0;                               // residual stream, normed input
    uint32_t qkv = 0, z = 0, beta = 0, alpha = 0, y = 0;  // DeltaNet
    uint32_t conv = 0, dn_wy = 0;  // DeltaNet conv output, chunked scan scratch (windows)
    // DeltaNet: the decode step's sums of squares a column group, for the output projection that
    // applies the gated norm (Kernels::DeltaNetStep::ss_off; H_v · d_v floats at most).
    uint32_t y_ss = 0;
    uint32_t q = 0, k = 0, v = 0, qo = 0, o = 0;  // attention
    uint32_t gate = 0, up = 0, ffn = 0;           // FFN (and a mixture's shared expert)
    // Mixture of experts: the router's logits (n_expert a row, then one float for a token's
    // shared expert gate logit: Kernels::moe_router), its choice (2 k words a row:
    // Kernels::moe_route), the (row, slot) pairs grouped by expert (k words a row:
    // Kernels::moe_sort), the chosen experts' gate, up and SwiGLU rows (k · n_ff_exp a row), each
    // pair's down projection (k · n_embd a row; windows), the shared expert's output (n_embd a
    // row).
    uint32_t router = 0, route = 0, perm = 0, gate_e = 0, up_e = 0, ffn_e = 0, down_e = 0;
    uint32_t shared = 0;
    // Mixture of experts, windows: each pair's position in the experts' order (k words a row:
    // Kernels::moe_sort), where the sorted expert tiles leave its outputs.
    uint32_t inv = 0;
    // Mixture of experts, windows: the rows of xn and of ffn_e rounded to bytes for the expert
    // GEMVs over bytes (Kernels::round_rows; 16-byte aligned).
    uint32_t xn_rounded = 0, ffn_e_rounded = 0;
    // Mixture of experts, windows: the table of the expert GEMM tiles (moe_sort; words,
    // Kernels::expert_tiles_words).
    uint32_t expert_tiles = 0;
    // The FFN activations quantized to int8 by the GEMV that writes them (Kernels::GemvRounding),
    // one row.
    uint32_t ffn_bytes = 0;
    // The residual stream quantized to int8 times the next norm's weights by the GEMV that
    // writes it (GemvRounding::out_norm), one row.
    uint32_t h_bytes = 0;
    // DeltaNet: the decode step's output quantized to int8 for the output projection
    // (Kernels::DeltaNetStep::round_y), one row.
    uint32_t y_bytes = 0;
    // Attention: the decode attention's output quantized to int8 for the output projection
    // (Kernels::Attention::round_off), one row.
    uint32_t o_bytes = 0;
    uint32_t total = 0;

    // Where the rows of a step's activation (model/forward_pass.h) start.
    uint32_t at(Act a) const;
};
ActLayout act_layout(const Hparams& hp, uint32_t rows);
// The same buffer's layout seen from row `first`: each row-wise activation (the residual, the
// mixers' inputs, outputs and scratch, the FFN's) starts `first` rows later, so that a kernel
// over rows 0.. of it runs over rows first.. of the window (a step's prompt chunk beside its
// decode rows). The experts' rows and the one-row fields are not moved.
ActLayout act_layout_from(const Hparams& hp, uint32_t rows, uint32_t first);

}  // namespace dl::vk
