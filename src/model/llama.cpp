// Llama: pre-norm attention blocks with a SwiGLU FFN. GGUF llama files store q/k rows permuted
// for interleaved-pair rotary embedding; an optional rope_freqs tensor holds llama-3 style
// per-pair frequency divisors.
#include "core/error.h"
#include "model/builder.h"

namespace dl {

// The blocks shared by llama and qwen3 (qwen3 adds the per-head q/k norms).
void load_llama_like(ModelBuilder& b, bool qk_norm) {
    Hparams& hp = b.model->hp;
    load_attention_hparams(b);
    hp.n_layer = b.positive("block_count");
    hp.layer_kinds.assign(static_cast<size_t>(hp.n_layer), LayerKind::attention);
    hp.qk_norm = qk_norm;
    hp.rope_style = qk_norm ? RopeStyle::neox : RopeStyle::interleaved;
    b.bind_embeddings_and_head();
    const int64_t E = hp.n_embd, D = hp.head_dim;
    b.model->rope_freqs = b.bind("rope_freqs.weight", {hp.rope_dims / 2}, Use::vector, false);
    b.model->layers.resize(static_cast<size_t>(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        Layer& L = b.model->layers[il];
        auto blk = [il](const char* what) { return ModelBuilder::blk(il, what); };
        L.attn_norm = b.bind(blk("attn_norm.weight"), {E}, Use::vector);
        L.wq = b.bind(blk("attn_q.weight"), {E, hp.n_head * D}, Use::matrix);
        L.wk = b.bind(blk("attn_k.weight"), {E, hp.n_head_kv * D}, Use::matrix);
        L.wv = b.bind(blk("attn_v.weight"), {E, hp.n_head_kv * D}, Use::matrix);
        L.wo = b.bind(blk("attn_output.weight"), {hp.n_head * D, E}, Use::matrix);
        if (qk_norm) {
            L.q_norm = b.bind(blk("attn_q_norm.weight"), {D}, Use::vector);
            L.k_norm = b.bind(blk("attn_k_norm.weight"), {D}, Use::vector);
        }
        b.bind_ffn(il, "ffn_norm.weight");
    }
}

void load_llama(ModelBuilder& b) {
    load_llama_like(b, false);
}

}  // namespace dl
