// The Qwen3.5 hybrid ("qwen35"): Gated DeltaNet layers interleaved with gated full-attention
// layers. Reads the hyper-parameters and the layer pattern, skips the MTP blocks at the end, and
// binds every tensor of the trunk (docs: shared/design/QWEN35.md).
#include <fmt/format.h>

#include "core/error.h"
#include "model/builder.h"

namespace dl {

// Which trunk layers are recurrent: an explicit per-layer array of key/value head counts (0 for
// a layer without attention) when the file has one, else every interval-th layer is attention.
static void load_layer_pattern(ModelBuilder& b, int64_t n_blocks) {
    Hparams& hp = b.model->hp;
    hp.layer_kinds.assign(static_cast<size_t>(hp.n_layer), LayerKind::deltanet);
    const gguf::Value* kv = b.file.find(b.key("attention.head_count_kv"));
    if (kv && kv->type == gguf::ValueType::ARRAY) {
        const gguf::Array& a = kv->as_array();
        if (static_cast<int64_t>(a.size()) != n_blocks)
            fail("{}: {} has {} entries for {} blocks", b.file.path(),
                 b.key("attention.head_count_kv"), a.size(), n_blocks);
        for (int64_t i = 0; i < hp.n_layer; ++i) {
            int64_t n = a.int_at(static_cast<size_t>(i));
            if (n != 0 && n != hp.n_head_kv)
                fail("{}: layer {} has {} key/value heads; layers must have 0 or {}", b.file.path(),
                     i, n, hp.n_head_kv);
            hp.layer_kinds[i] = n == 0 ? LayerKind::deltanet : LayerKind::attention;
        }
        return;
    }
    int64_t interval = b.positive("full_attention_interval", 4);
    for (int64_t i = 0; i < hp.n_layer; ++i)
        hp.layer_kinds[i] = (i + 1) % interval != 0 ? LayerKind::deltanet : LayerKind::attention;
}

void load_qwen35(ModelBuilder& b) {
    Hparams& hp = b.model->hp;
    load_attention_hparams(b);
    hp.attn_output_gate = true;
    hp.qk_norm = true;
    hp.rope_style = RopeStyle::neox;
    int64_t n_blocks = b.positive("block_count");
    hp.n_nextn = b.get_int("nextn_predict_layers", 0);
    if (hp.n_nextn < 0 || hp.n_nextn >= n_blocks)
        fail("{}: {} MTP blocks leave no trunk of the {} blocks", b.file.path(), hp.n_nextn,
             n_blocks);
    hp.n_layer = n_blocks - hp.n_nextn;

    hp.ssm_conv_kernel = b.positive("ssm.conv_kernel");
    hp.ssm_d_state = b.positive("ssm.state_size");
    hp.ssm_n_k_heads = b.positive("ssm.group_count");
    hp.ssm_n_v_heads = b.positive("ssm.time_step_rank");
    hp.ssm_d_inner = b.positive("ssm.inner_size");
    if (hp.ssm_d_inner != hp.ssm_n_v_heads * hp.ssm_d_state)
        fail("{}: ssm.inner_size {} is not time_step_rank {} x state_size {}", b.file.path(),
             hp.ssm_d_inner, hp.ssm_n_v_heads, hp.ssm_d_state);
    if (hp.ssm_n_v_heads % hp.ssm_n_k_heads != 0)
        fail("{}: {} DeltaNet value heads cannot share {} key heads evenly", b.file.path(),
             hp.ssm_n_v_heads, hp.ssm_n_k_heads);
    if (hp.ssm_conv_kernel < 2 || hp.ssm_conv_kernel > 16)
        fail("{}: ssm.conv_kernel {} is out of range", b.file.path(), hp.ssm_conv_kernel);
    load_layer_pattern(b, n_blocks);

    b.bind_embeddings_and_head();
    const int64_t E = hp.n_embd, D = hp.head_dim;
    const int64_t H_v = hp.ssm_n_v_heads, d_inner = hp.ssm_d_inner;
    b.model->layers.resize(static_cast<size_t>(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        Layer& L = b.model->layers[il];
        auto blk = [il](const char* what) { return ModelBuilder::blk(il, what); };
        L.attn_norm = b.bind(blk("attn_norm.weight"), {E}, Use::vector);
        b.bind_ffn(il, "post_attention_norm.weight");
        if (hp.is_recurrent(il)) {
            L.ssm_qkv = b.bind(blk("attn_qkv.weight"), {E, hp.conv_dim()}, Use::matrix);
            L.ssm_z = b.bind(blk("attn_gate.weight"), {E, d_inner}, Use::matrix);
            L.ssm_beta = b.bind(blk("ssm_beta.weight"), {E, H_v}, Use::matrix);
            L.ssm_alpha = b.bind(blk("ssm_alpha.weight"), {E, H_v}, Use::matrix);
            L.ssm_conv1d =
                b.bind(blk("ssm_conv1d.weight"), {hp.ssm_conv_kernel, hp.conv_dim()}, Use::vector);
            L.ssm_dt_bias = b.bind(blk("ssm_dt.bias"), {H_v}, Use::vector);
            L.ssm_a = b.bind(blk("ssm_a"), {H_v}, Use::vector);
            L.ssm_norm = b.bind(blk("ssm_norm.weight"), {hp.ssm_d_state}, Use::vector);
            L.ssm_out = b.bind(blk("ssm_out.weight"), {d_inner, E}, Use::matrix);
        } else {
            L.wq = b.bind(blk("attn_q.weight"), {E, hp.n_head * D * 2}, Use::matrix);
            L.wk = b.bind(blk("attn_k.weight"), {E, hp.n_head_kv * D}, Use::matrix);
            L.wv = b.bind(blk("attn_v.weight"), {E, hp.n_head_kv * D}, Use::matrix);
            L.wo = b.bind(blk("attn_output.weight"), {hp.n_head * D, E}, Use::matrix);
            L.q_norm = b.bind(blk("attn_q_norm.weight"), {D}, Use::vector);
            L.k_norm = b.bind(blk("attn_k_norm.weight"), {D}, Use::vector);
        }
    }
}

}  // namespace dl
