// The decode token command's fusions. Each is a rule that rewrites the plain chain (one GEMV a
// projection, a stage of its own for each norm, activations passed as floats) where the shapes
// and the device allow; switched off, the plain form is recorded in its place. Tests switch one
// off and hold the logits and the recorded command against the fused form; the DELTALLM_VK_*
// variables named below switch them for measurements (core/env.cpp's table).
#pragma once

#include <cstdint>

namespace dl::vk {

struct Fusions {
    // A norm as the epilogue of the GEMV before it, and the FFN's gate and up in one GEMV with
    // the SwiGLU as its epilogue (DELTALLM_VK_DECODE_FUSION). On an H200, 9B: tg128 +2 %.
    bool norm_epilogue = true;
    // Where every GEMV that reads a norm's output takes x as int8 (Q8) values, those GEMVs
    // normalize h themselves as they quantize it, and the GEMV before the norm has no epilogue
    // (DELTALLM_VK_GEMV_NORM_IN). Needs norm_epilogue.
    bool norm_in_readers = true;
    // The FFN pair writes its activations as int8 for the down projection, which then reads
    // them without quantizing x itself (DELTALLM_VK_GEMV_PRE_ROUND).
    bool ffn_q8_out = true;
    // The GEMV that writes h also writes it as int8 times the next norm's weights, with each
    // block's sum of squares, where it and every reader of that norm run on the tiled GEMV
    // (DELTALLM_VK_GEMV_ROUND_H) ...
    bool residual_q8_out = true;
    // ... over an h of at least this many values: on an H200 the 9B's readers (4096) gained
    // more than its writers lost (tg128 +3 %), the 0.8B's (1024) gained nothing. Tests lower it.
    uint32_t residual_q8_out_min = 2048;
    // A mixer's input projections that lie back to back in one slab (same type and row length)
    // read as one GEMV (DELTALLM_VK_MERGE_IN).
    bool merged_input_projections = true;
    // A DeltaNet layer's output projection applies the layer's gated RMSNorm as it reads the
    // step's output, so no column group of a head waits for the others (DELTALLM_VK_GATED_IN).
    // Needs norm_in_readers.
    bool gated_norm_in_output = true;
    // With gated_norm_in_output, on the tiled GEMV: the DeltaNet step writes its output as int8
    // for the output projection (DELTALLM_VK_GATED_ROUNDED).
    bool deltanet_q8_out = true;
    // On the tiled GEMV: the decode attention writes its output as int8 for the output
    // projection (DELTALLM_VK_ATTN_ROUNDED).
    bool attention_q8_out = true;
    // With both of the above, in a hybrid model: an attention layer's output projection of the
    // DeltaNet layers' type and shape runs in their pipeline (with no gate factor), whose code
    // the DeltaNet layers keep warm (DELTALLM_VK_ATTN_GATED_FORM).
    bool shared_output_pipeline = true;
    // A mixture-of-experts layer's router over an F32 matrix chooses the experts in its GEMV's
    // last workgroup, and the shared expert's gate and up run as one GEMV with the SwiGLU as its
    // epilogue beside it: no route stage (DELTALLM_VK_ROUTER_TOPK).
    bool router_top_k = true;
    // A mixture-of-experts layer's weighted sum of experts into h also adds the shared expert's
    // output times its gate (the gate's logit a row of the router's dispatch; needs
    // router_top_k), and the next norm is left to the GEMVs that read it where they norm x
    // themselves: no shared-expert or norm stage (DELTALLM_VK_EXPERTS_SUM_EPILOGUE).
    bool experts_sum_epilogue = true;

    // Each from its variable (all on unless set to 0).
    static Fusions from_env();
    // The plain chain: every rule off.
    static Fusions none();
};

}  // namespace dl::vk
