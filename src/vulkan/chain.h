// The layer chain that the token command and the window commands both record (record_layers),
// and what follows from its order alone: which GEMMs of a window one stage runs together.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "vulkan/plan.h"

namespace dl::vk {

// What the token command and a window command record differently for the same layer chain
// (record_layers): how the projections run (GEMVs, GEMM tiles), how their inputs are prepared
// (nothing, an F16 copy), the mixers (one token, rows), and how a residual update and the
// RMSNorm after it are recorded (the norm fused into the GEMV, or stages of their own).
struct LayerChain {
    std::function<void(const char* role)> stage;
    const char* project_role;
    // act[y_off ..] = W · act[x_off ..] for the command's rows; no barrier.
    std::function<void(const Tensor* w, uint32_t x_off, uint32_t y_off)> project;
    // The projections recorded next read act[x_off ..], cols wide.
    std::function<void(uint32_t x_off, int64_t cols)> inputs;
    std::function<void(int64_t il, const Layer&L)> deltanet, attention;
    // act[ffn] = SwiGLU(gate · act[xn], up · act[xn]), with the stages between and after;
    // next_norm: the norm the down projection after it ends with (the next layer's attn_norm or
    // the output norm).
    std::function<void(const Layer& L, const Tensor* next_norm)> ffn_in;
    // A mixture-of-experts FFN whole: from xn (the FFN's norm applied) through the router, the
    // chosen experts and the shared expert to h += their sum, then xn = RMSNorm(h) · next_norm,
    // with the stages between.
    std::function<void(const Layer& L, const Tensor* next_norm)> experts;
    // h += W · act[x_off ..] (cols wide; the activation `in`), then xn = RMSNorm(h) · norm_w,
    // with the stages between.
    std::function<void(const Tensor* w, Act in, uint32_t x_off, int64_t cols, const Tensor* norm_w)>
        add_norm;
};

// Every layer, from xn (the first attn_norm already applied) to the output norm of h in xn, as
// the model's forward pass (model/forward_pass.h) orders its steps. Throws dl::Error for a step
// the chain has no kernels for.
void record_layers(const Model& model, const ActLayout& A, const LayerChain& c);
// Why record_layers cannot record this model (a sentence), or an empty string.
std::string unsupported_steps(const Model& model);

// The matrices of a window's GEMMs in the order the window command records them, in groups
// that one stage runs together: they read the same rows and write apart, so no barrier needs
// to separate them (the projections of a mixer, the FFN's gate and up). The head last, alone,
// when `head` (every row's logits).
std::vector<std::vector<const Tensor*>> gemm_groups(const Model& model, bool head);

// Each RMSNorm of the chain (every attn_norm and ffn_norm, the output norm) with the matrices
// that read its output: a mixer's projections, the FFN's gate and up, the head.
std::map<const Tensor*, std::vector<const Tensor*>> norm_readers(const Model& model);

}  // namespace dl::vk
