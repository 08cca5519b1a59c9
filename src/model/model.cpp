// Model loading: opens the GGUF file, picks the architecture's loader, binds the weight views
// with shape and type checks, and (when asked for progress) touches every weight page up front so
// that the first token does not pay for page faults.
#include "model/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_set>

#include "core/error.h"
#include "model/builder.h"
#include "quant/quant.h"

namespace dl {

int64_t Tensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

Tensor Tensor::matrix(int64_t i) const {
    Tensor m;
    m.type = type;
    m.ne = {cols(), rows()};
    m.nbytes = row_bytes() * static_cast<size_t>(rows());
    m.data = data + static_cast<size_t>(i) * m.nbytes;
    return m;
}

std::string arch_name(Arch a) {
    switch (a) {
        case Arch::qwen35:
            return "qwen35";
        case Arch::qwen3:
            return "qwen3";
        case Arch::llama:
            return "llama";
    }
    return "unknown";
}

ModelBuilder::ModelBuilder(std::shared_ptr<const gguf::File> f)
    : model(std::make_shared<Model>()), file(*f) {
    model->file_ = std::move(f);
    arch = file.get_string("general.architecture", "");
    if (arch.empty()) fail("{}: the file has no general.architecture key", file.path());
    // Every tensor of the file gets a view; the vector is filled once, so pointers into it stay
    // valid for the model's life.
    model->tensors_.reserve(file.tensors().size());
    for (const auto& ti : file.tensors()) {
        Tensor t;
        t.name = ti.name;
        t.type = ti.type;
        t.ne = ti.ne;
        t.data = ti.data;
        t.nbytes = ti.nbytes;
        model->tensors_.push_back(std::move(t));
    }
}

int64_t ModelBuilder::get_int(const char* suffix) const {
    return file.get_int(key(suffix));
}
int64_t ModelBuilder::get_int(const char* suffix, int64_t def) const {
    return file.get_int(key(suffix), def);
}
float ModelBuilder::get_float(const char* suffix, float def) const {
    return static_cast<float>(file.get_float(key(suffix), def));
}

int64_t ModelBuilder::positive(const char* suffix) const {
    int64_t v = get_int(suffix);
    if (v <= 0 || v > (int64_t(1) << 31))
        fail("{}: metadata key {} has the value {}, which is not a usable size", file.path(),
             key(suffix), v);
    return v;
}

int64_t ModelBuilder::positive(const char* suffix, int64_t def) const {
    if (!has(suffix)) return def;
    return positive(suffix);
}

static std::string dims(const std::vector<int64_t>& ne) {
    return fmt::format("[{}]", fmt::join(ne, ", "));
}

const Tensor* ModelBuilder::bind(const std::string& name, std::vector<int64_t> ne, Use use,
                                 bool required) {
    const Tensor* t = model->find(name);
    if (!t) {
        if (!required) return nullptr;
        fail("{}: tensor '{}' is missing (a {} {} model needs it)", file.path(), name, arch,
             dims(ne));
    }
    // A trailing dimension of 1 is the same shape (writers differ on whether they store it).
    std::vector<int64_t> have = t->ne;
    while (have.size() > ne.size() && have.back() == 1) have.pop_back();
    if (have != ne)
        fail("{}: tensor '{}' has shape {} but this {} model needs {}", file.path(), name,
             dims(t->ne), arch, dims(ne));
    bool ok = false;
    switch (use) {
        case Use::matrix:
            ok = quant::can_dot(t->type) && ne[0] % block_size(t->type) == 0;
            break;
        case Use::embedding:
        case Use::vector:
            ok = quant::can_dequantize(t->type) && ne[0] % block_size(t->type) == 0;
            break;
    }
    if (!ok)
        fail("{}: tensor '{}' has type {}, which the CPU cannot compute with", file.path(), name,
             qtype_name(t->type));
    return t;
}

void ModelBuilder::bind_embeddings_and_head() {
    Hparams& hp = model->hp;
    const Tensor* embd = model->find("token_embd.weight");
    if (!embd) fail("{}: tensor 'token_embd.weight' is missing", file.path());
    if (embd->ne.size() != 2)
        fail("{}: tensor 'token_embd.weight' has shape {} but must be a matrix", file.path(),
             dims(embd->ne));
    hp.n_vocab = embd->ne[1];
    // The tokenizer may list fewer tokens than the embedding has rows (padding); never more.
    if (const gguf::Value* toks = file.find("tokenizer.ggml.tokens")) {
        int64_t n_tokens = static_cast<int64_t>(toks->as_array().size());
        if (n_tokens > hp.n_vocab)
            fail("{}: the tokenizer has {} tokens but token_embd.weight only {} rows", file.path(),
                 n_tokens, hp.n_vocab);
    }
    model->tok_embd = bind("token_embd.weight", {hp.n_embd, hp.n_vocab}, Use::embedding);
    model->output_norm = bind("output_norm.weight", {hp.n_embd}, Use::vector);
    model->output = bind("output.weight", {hp.n_embd, hp.n_vocab}, Use::matrix, false);
    hp.tied_embeddings = model->output == nullptr;
    if (hp.tied_embeddings) {
        if (!quant::can_dot(embd->type))
            fail(
                "{}: the tied output head 'token_embd.weight' has type {}, which the CPU cannot "
                "multiply with",
                file.path(), qtype_name(embd->type));
        model->output = model->tok_embd;
    }
}

void ModelBuilder::bind_ffn(int64_t il, const char* norm_name) {
    const Hparams& hp = model->hp;
    Layer& L = model->layers[il];
    L.ffn_norm = bind(blk(il, norm_name), {hp.n_embd}, Use::vector);
    if (hp.ffn_kind == FfnKind::experts) {
        const int64_t E = hp.n_embd, F = hp.n_ff_exp, X = hp.n_expert;
        L.ffn_gate_inp = bind(blk(il, "ffn_gate_inp.weight"), {E, X}, Use::matrix);
        // Gate and up stacked separately, or in one tensor (gate rows first).
        if (model->find(blk(il, "ffn_gate_up_exps.weight"))) {
            L.ffn_gate_up_exps =
                bind(blk(il, "ffn_gate_up_exps.weight"), {E, 2 * F, X}, Use::matrix);
        } else {
            L.ffn_gate_exps = bind(blk(il, "ffn_gate_exps.weight"), {E, F, X}, Use::matrix);
            L.ffn_up_exps = bind(blk(il, "ffn_up_exps.weight"), {E, F, X}, Use::matrix);
        }
        L.ffn_down_exps = bind(blk(il, "ffn_down_exps.weight"), {F, E, X}, Use::matrix);
        if (hp.n_ff_shexp > 0) {
            const int64_t S = hp.n_ff_shexp;
            L.ffn_gate_inp_shexp = bind(blk(il, "ffn_gate_inp_shexp.weight"), {E}, Use::vector);
            L.ffn_gate_shexp = bind(blk(il, "ffn_gate_shexp.weight"), {E, S}, Use::matrix);
            L.ffn_up_shexp = bind(blk(il, "ffn_up_shexp.weight"), {E, S}, Use::matrix);
            L.ffn_down_shexp = bind(blk(il, "ffn_down_shexp.weight"), {S, E}, Use::matrix);
        }
        return;
    }
    L.ffn_gate = bind(blk(il, "ffn_gate.weight"), {hp.n_embd, hp.n_ff}, Use::matrix);
    L.ffn_up = bind(blk(il, "ffn_up.weight"), {hp.n_embd, hp.n_ff}, Use::matrix);
    L.ffn_down = bind(blk(il, "ffn_down.weight"), {hp.n_ff, hp.n_embd}, Use::matrix);
}

void ModelBuilder::load_expert_hparams() {
    Hparams& hp = model->hp;
    hp.ffn_kind = FfnKind::experts;
    hp.n_expert = positive("expert_count");
    hp.n_expert_used = positive("expert_used_count");
    hp.n_ff_exp = positive("expert_feed_forward_length");
    hp.n_ff_shexp = get_int("expert_shared_feed_forward_length", 0);
    if (hp.n_expert > 4096 || hp.n_expert_used > hp.n_expert)
        fail("{}: {} experts with {} used per token is not a mixture deltallm can run", file.path(),
             hp.n_expert, hp.n_expert_used);
    if (hp.n_ff_shexp < 0) fail("{}: a negative shared expert width", file.path());
}

void load_attention_hparams(ModelBuilder& b) {
    Hparams& hp = b.model->hp;
    hp.n_embd = b.positive("embedding_length");
    // A mixture-of-experts model has no dense FFN; its files may still carry the key.
    hp.n_ff = hp.ffn_kind == FfnKind::experts ? b.get_int("feed_forward_length", 0)
                                              : b.positive("feed_forward_length");
    hp.n_head = b.positive("attention.head_count");
    // head_count_kv may be an array in hybrid files (0 marks a layer without attention): the
    // architecture's loader reads it as such; here only a scalar is taken.
    const gguf::Value* kv = b.file.find(b.key("attention.head_count_kv"));
    if (kv && kv->type == gguf::ValueType::ARRAY) {
        const gguf::Array& a = kv->as_array();
        hp.n_head_kv = 0;
        for (size_t i = 0; i < a.size(); ++i) hp.n_head_kv = std::max(hp.n_head_kv, a.int_at(i));
        if (hp.n_head_kv <= 0)
            fail("{}: {} has no layer with attention heads", b.file.path(),
                 b.key("attention.head_count_kv"));
    } else {
        hp.n_head_kv = b.positive("attention.head_count_kv", hp.n_head);
    }
    if (hp.n_head % hp.n_head_kv != 0)
        fail("{}: {} attention heads cannot be shared evenly by {} key/value heads", b.file.path(),
             hp.n_head, hp.n_head_kv);
    hp.head_dim = b.positive("attention.key_length", hp.n_embd / hp.n_head);
    hp.value_dim = b.positive("attention.value_length", hp.head_dim);
    if (hp.value_dim != hp.head_dim)
        fail("{}: attention value length {} differs from key length {}, which is not supported",
             b.file.path(), hp.value_dim, hp.head_dim);
    hp.n_ctx_train = b.get_int("context_length", 0);
    hp.rms_eps = b.get_float("attention.layer_norm_rms_epsilon", 1e-6f);
    if (!(hp.rms_eps > 0.f) || hp.rms_eps > 1.f)
        fail("{}: RMS norm epsilon {} is out of range", b.file.path(), hp.rms_eps);
    hp.rope_base = b.get_float("rope.freq_base", 10000.f);
    if (!(hp.rope_base > 1.f))
        fail("{}: rope.freq_base {} is out of range", b.file.path(), hp.rope_base);
    hp.rope_dims = b.positive("rope.dimension_count", hp.head_dim);
    if (hp.rope_dims > hp.head_dim || hp.rope_dims % 2 != 0)
        fail("{}: rope.dimension_count {} does not fit the head size {}", b.file.path(),
             hp.rope_dims, hp.head_dim);
    if (const gguf::Value* v = b.file.find(b.key("rope.dimension_sections"));
        v && v->type == gguf::ValueType::ARRAY) {
        const gguf::Array& a = v->as_array();
        for (size_t i = 0; i < a.size() && i < 8; ++i) hp.rope_sections.push_back(a.int_at(i));
    }
}

std::shared_ptr<const Model> Model::from_file(std::shared_ptr<const gguf::File> file) {
    ModelBuilder b(std::move(file));
    // The mixture-of-experts variants are their dense family with experts in the FFN.
    const bool moe = b.arch == "qwen35moe" || b.arch == "qwen3moe";
    if (moe) b.load_expert_hparams();
    if (b.arch == "qwen35" || b.arch == "qwen35moe") {
        b.model->hp.arch = Arch::qwen35;
        load_qwen35(b);
    } else if (b.arch == "qwen3" || b.arch == "qwen3moe") {
        b.model->hp.arch = Arch::qwen3;
        load_qwen3(b);
    } else if (b.arch == "llama") {
        b.model->hp.arch = Arch::llama;
        load_llama(b);
    } else {
        fail(
            "{}: model architecture '{}' is not supported (known: qwen35, qwen35moe, qwen3, "
            "qwen3moe, llama)",
            b.file.path(), b.arch);
    }
    b.model->hp.arch_name = b.arch;
    b.model->hp.model_name = b.file.get_string("general.name", "");
    return b.model;
}

std::shared_ptr<const Model> Model::load(const std::string& path, Progress progress) {
    auto file = std::make_shared<gguf::File>(gguf::File::open(path));
    auto model = from_file(file);
    if (progress) {
        // Touch one byte per page so the mapping is resident before the first token.
        uint64_t total = model->weight_bytes(), done = 0, last_report = 0;
        volatile uint8_t sink = 0;
        std::unordered_set<const uint8_t*> seen;
        for (const Tensor& t : model->tensors()) {
            if (!seen.insert(t.data).second) continue;
            for (size_t off = 0; off < t.nbytes; off += 4096) sink = sink + t.data[off];
            done += t.nbytes;
            if (done - last_report > (64u << 20) && total > 0) {
                progress(std::min(1.0, double(done) / double(total)));
                last_report = done;
            }
        }
        (void)sink;
        progress(1.0);
    }
    return model;
}

const Tensor* Model::find(const std::string& name) const {
    // tensors_ mirrors the file's tensor list in order, so the file's name index serves both.
    const gguf::TensorInfo* ti = file_ ? file_->tensor(name) : nullptr;
    if (!ti) return nullptr;
    return &tensors_[static_cast<size_t>(ti - file_->tensors().data())];
}

uint64_t Model::weight_bytes() const {
    std::unordered_set<const Tensor*> used;
    auto add = [&](const Tensor* t) {
        if (t) used.insert(t);
    };
    add(tok_embd);
    add(output_norm);
    add(output);
    add(rope_freqs);
    for (const Layer& L : layers)
        for (const Tensor* t : {L.attn_norm,
                                L.ffn_norm,
                                L.ffn_gate,
                                L.ffn_up,
                                L.ffn_down,
                                L.wq,
                                L.wk,
                                L.wv,
                                L.wo,
                                L.q_norm,
                                L.k_norm,
                                L.ssm_qkv,
                                L.ssm_z,
                                L.ssm_beta,
                                L.ssm_alpha,
                                L.ssm_conv1d,
                                L.ssm_dt_bias,
                                L.ssm_a,
                                L.ssm_norm,
                                L.ssm_out,
                                L.ffn_gate_inp,
                                L.ffn_gate_exps,
                                L.ffn_up_exps,
                                L.ffn_gate_up_exps,
                                L.ffn_down_exps,
                                L.ffn_gate_inp_shexp,
                                L.ffn_gate_shexp,
                                L.ffn_up_shexp,
                                L.ffn_down_shexp})
            add(t);
    uint64_t n = 0;
    for (const Tensor* t : used) n += t->nbytes;
    return n;
}

}  // namespace dl
