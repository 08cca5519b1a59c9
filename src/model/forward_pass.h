// The forward pass of a model as data: the list of typed steps one token (or one row of a
// prompt) goes through, built once per model from its features (Hparams), never from the
// architecture's name. Every executor walks this list, so the order of the stages lives here
// alone: the CPU chain runs each step as it comes; the Vulkan driver groups runs of steps into
// its kernels (a mixer's steps into one attention or DeltaNet kernel, a projection and the
// residual after it into one GEMV that adds to h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace dl {

// The activations steps read and write, by their role; each executor keeps them where it likes
// (rows of floats on the CPU, parts of one buffer on the device).
enum class Act : uint8_t {
    h,       // the residual stream
    xn,      // the normalized input of the next projections
    q,       // attention queries ([q | gate] per head with the output gate)
    k,       // attention keys
    v,       // attention values
    o,       // attention output, before the output projection
    qkv,     // DeltaNet: the q, k, v channels of the conv
    z,       // DeltaNet: the output gate's input
    beta,    // DeltaNet: the write strength, per value head
    alpha,   // DeltaNet: the decay's input, per value head
    y,       // DeltaNet: the scan's output, before the output projection
    gate,    // FFN gate projection
    up,      // FFN up projection
    ffn,     // FFN activations, SiLU(gate) * up
    out,     // a projection's output about to be added to h
    logits,  // the head's output
    router,  // mixture of experts: the router's logit of every expert
    shared,  // mixture of experts: the shared expert's output, before its gate
};

enum class Op : uint8_t {
    embed,               // h = the token's row of tok_embd
    rms_norm,            // xn = RMSNorm(h) * w
    project,             // out = w · in
    residual,            // h += in
    qk_norm,             // RMSNorm of every query head (w) and key head (w2)
    rope,                // the rotary embedding of q and k at each row's position
    attention,           // k, v appended to the layer's KV cache; o = softmax(q·Kᵀ/√d)·V
    output_gate,         // o *= sigmoid(the gate half of q)
    deltanet_gates,      // beta = sigmoid(beta); alpha = -exp(A)·softplus(alpha + dt_bias)
    deltanet_conv,       // qkv = SiLU(causal conv of qkv over the layer's conv state)
    deltanet_qk_norm,    // the L2 norm of every q and k head of qkv
    deltanet_scan,       // y = the gated delta rule over the layer's recurrent state
    deltanet_out_norm,   // y = RMSNorm(y) · w · SiLU(z), per value head
    swiglu,              // ffn = SiLU(gate) * up
    head,                // logits = output · xn
    moe_experts,         // out = Σ over the top-k experts of softmax(router) renormalised ·
                         //       down_e · (SiLU(gate_e · xn) * (up_e · xn))
    shared_expert_gate,  // out += sigmoid(w · xn) * shared
};

// One step. `layer` is the trunk layer it belongs to (-1 before and after the trunk); `w`, `w2`
// and `w3` the weights it applies (a matrix for project and head, norm weights for rms_norm,
// qk_norm and deltanet_out_norm; the experts' gate (or gate and up), up and down stacks for
// moe_experts).
struct Step {
    Op op;
    int64_t layer = -1;
    const Tensor* w = nullptr;
    const Tensor* w2 = nullptr;
    Act in = Act::h;
    Act out = Act::h;
    const Tensor* w3 = nullptr;

    bool operator==(const Step&) const = default;
};

struct ForwardPass {
    std::vector<Step> steps;

    // embed, every layer (norm, mixer, residual, norm, FFN, residual), output norm, head.
    static ForwardPass build(const Model& model);
    // One line a step ("blk.3 project attn_q.weight xn -> q"), for tests and --verbose.
    std::string describe() const;
};

const char* op_name(Op op);
const char* act_name(Act a);

}  // namespace dl
