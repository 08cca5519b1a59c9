// Import of Hugging Face folders: configuration, architecture detection and tensor access, and
// the convert_hf entry points that turn a folder into a GGUF file.
#include "convert/hf.h"

#include <filesystem>

#include "core/error.h"
#include "core/json_text.h"
#include "core/read_file.h"

namespace dl::convert {

namespace fs = std::filesystem;
using nlohmann::json;

// config.json files are a few kilobytes; a bound keeps a wrong file from filling the memory.
constexpr size_t kMaxConfigBytes = 16u << 20;

static json read_json(const fs::path& p, const char* what) {
    std::error_code ec;
    if (!fs::exists(p, ec)) fail("{}: {} not found", p.parent_path().string(), what);
    return parse_json(read_file_bounded(p.string(), kMaxConfigBytes, FileKind::regular_only, what),
                      p.string());
}

std::shared_ptr<HfModel> HfModel::open(const std::string& dir) {
    if (!fs::is_directory(dir))
        fail("{}: not a folder (expected a Hugging Face model folder)", dir);
    auto m = std::make_shared<HfModel>();
    m->dir = dir;
    m->config = read_json(fs::path(dir) / "config.json", "config.json");
    if (!m->config.is_object()) fail("{}/config.json: not a JSON object", dir);
    m->text = m->config;
    if (auto it = m->config.find("text_config"); it != m->config.end() && it->is_object())
        m->text = *it;

    std::string model_type = m->config.value("model_type", std::string());
    if (auto it = m->config.find("architectures");
        it != m->config.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
        m->hf_arch = (*it)[0].get<std::string>();
    else
        m->hf_arch = model_type;
    const std::string& a = m->hf_arch;
    if (a == "Qwen3_5ForCausalLM" || a == "Qwen3_5ForConditionalGeneration" ||
        model_type == "qwen3_5" || model_type == "qwen3_5_text")
        m->arch = Arch::qwen35;
    else if (a == "Qwen3_5MoeForCausalLM" || a == "Qwen3_5MoeForConditionalGeneration" ||
             model_type == "qwen3_5_moe" || model_type == "qwen3_5_moe_text") {
        m->arch = Arch::qwen35;
        m->moe = true;
    } else if (a == "Qwen3MoeForCausalLM" || model_type == "qwen3_moe") {
        m->arch = Arch::qwen3;
        m->moe = true;
    } else if (a == "Qwen3ForCausalLM" || model_type == "qwen3")
        m->arch = Arch::qwen3;
    else if (a == "LlamaForCausalLM" || model_type == "llama")
        m->arch = Arch::llama;
    else
        fail(
            "{}: unsupported architecture '{}' (supported: Qwen3_5ForCausalLM, "
            "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM, "
            "Qwen3_5MoeForConditionalGeneration, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
            "LlamaForCausalLM)",
            dir, a.empty() ? std::string("<none>") : a);

    m->ckpt = safetensors::Checkpoint::open(dir);
    m->prefix = "model.";
    if (m->ckpt.tensor("model.language_model.embed_tokens.weight"))
        m->prefix = "model.language_model.";
    return m;
}

const json* HfModel::find(const char* key) const {
    if (auto it = text.find(key); it != text.end() && !it->is_null()) return &*it;
    if (auto it = config.find(key); it != config.end() && !it->is_null()) return &*it;
    return nullptr;
}

bool HfModel::has(const char* key) const {
    return find(key) != nullptr;
}

int64_t HfModel::get_int(const char* key) const {
    const json* j = find(key);
    if (!j) fail("{}/config.json: missing '{}'", dir, key);
    if (!j->is_number_integer()) fail("{}/config.json: '{}' is not an integer", dir, key);
    return j->get<int64_t>();
}

int64_t HfModel::get_int(const char* key, int64_t def) const {
    return has(key) ? get_int(key) : def;
}

int64_t HfModel::get_size(const char* key) const {
    const int64_t v = get_int(key);
    // GGUF stores these as uint32; past 2^31 no real model goes, and products of two of them
    // stay far from overflowing 64 bits. Layers and vocabulary entries each cost memory while
    // planning, so they get tighter bounds, still far past any published model.
    const std::string_view k = key;
    const int64_t most = k == "num_hidden_layers" ? kMaxLayers
                         : k == "vocab_size"      ? kMaxVocab
                                                  : kMaxConfigSize;
    if (v < 1 || v > most)
        fail("{}/config.json: '{}' is {}, not a size from 1 to {}", dir, key, v, most);
    return v;
}

int64_t HfModel::get_size(const char* key, int64_t def) const {
    return has(key) ? get_size(key) : def;
}

HfModel::TrunkSizes HfModel::trunk_sizes() const {
    TrunkSizes t;
    t.n_embd = get_size("hidden_size");
    t.n_layer = get_size("num_hidden_layers");
    // A mixture of experts has no dense FFN (its config may still name one).
    t.n_ff = moe ? get_size("intermediate_size", 0) : get_size("intermediate_size");
    t.n_head = get_size("num_attention_heads");
    t.n_head_kv = get_size("num_key_value_heads", t.n_head);
    t.head_dim = get_size("head_dim", t.n_embd / t.n_head);
    if (t.head_dim < 1)
        fail("{}/config.json: hidden_size {} leaves no dimensions for {} attention heads", dir,
             t.n_embd, t.n_head);
    return t;
}

double HfModel::get_float(const char* key, double def) const {
    const json* j = find(key);
    if (!j) return def;
    if (!j->is_number()) fail("{}/config.json: '{}' is not a number", dir, key);
    return j->get<double>();
}

bool HfModel::get_bool(const char* key, bool def) const {
    const json* j = find(key);
    if (!j) return def;
    if (!j->is_boolean()) fail("{}/config.json: '{}' is not a boolean", dir, key);
    return j->get<bool>();
}

const json* HfModel::rope_param(const char* key) const {
    for (const char* holder : {"rope_parameters", "rope_scaling"}) {
        const json* r = find(holder);
        if (r && r->is_object())
            if (auto it = r->find(key); it != r->end() && !it->is_null()) return &*it;
    }
    return find(key);
}

double HfModel::rope_theta(double def) const {
    const json* j = rope_param("rope_theta");
    if (!j) return def;
    if (!j->is_number()) fail("{}/config.json: 'rope_theta' is not a number", dir);
    return j->get<double>();
}

const safetensors::Tensor* HfModel::tensor(const std::string& name) const {
    if (name.rfind("lm_head.", 0) == 0) return ckpt.tensor(name);
    return ckpt.tensor(prefix + name);
}

std::vector<float> HfModel::read(const std::string& name, const std::vector<int64_t>& shape) const {
    const safetensors::Tensor* t = tensor(name);
    if (!t)
        fail("{}: tensor '{}' is missing from the checkpoint", dir,
             name.rfind("lm_head.", 0) == 0 ? name : prefix + name);
    using safetensors::DType;
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16 &&
        t->dtype != DType::F64)
        fail("{}: tensor '{}' has dtype {}, not a floating-point weight type (F32, F16, BF16)", dir,
             t->name, safetensors::dtype_name(t->dtype));
    if (t->shape != shape) {
        std::string want, got;
        for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
        for (int64_t d : t->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
        fail("{}: tensor '{}' has shape [{}], expected [{}] from config.json", dir, t->name, got,
             want);
    }
    return safetensors::read_f32(*t);
}

void plan_attention_keys(const HfModel& m, Plan& plan, int64_t head_dim) {
    const std::string a = plan.arch + ".";
    auto u32 = [](int64_t x) { return gguf::Value::u32((uint32_t)x); };
    plan.set(a + "context_length", u32(m.get_size("max_position_embeddings", 4096)));
    plan.set(a + "embedding_length", u32(m.get_size("hidden_size")));
    plan.set(a + "block_count", u32(m.get_size("num_hidden_layers")));
    if (!m.moe) plan.set(a + "feed_forward_length", u32(m.get_size("intermediate_size")));
    const int64_t n_head = m.get_size("num_attention_heads");
    plan.set(a + "attention.head_count", u32(n_head));
    plan.set(a + "attention.head_count_kv", u32(m.get_size("num_key_value_heads", n_head)));
    plan.set(a + "rope.freq_base", gguf::Value::f32((float)m.rope_theta(10000.0)));
    plan.set(a + "attention.layer_norm_rms_epsilon",
             gguf::Value::f32((float)m.get_float("rms_norm_eps", 1e-6)));
    plan.set(a + "attention.key_length", u32(head_dim));
    plan.set(a + "attention.value_length", u32(head_dim));
}

static Plan plan_hf(const std::string& hf_dir, const ConvertOptions& options,
                    std::shared_ptr<HfModel>& keep) {
    keep = HfModel::open(hf_dir);
    Plan plan;
    plan.arch = arch_name(keep->arch) + (keep->moe ? "moe" : "");
    plan.n_layer = keep->get_size("num_hidden_layers");
    std::string name = options.name;
    if (name.empty()) name = fs::path(hf_dir).lexically_normal().filename().string();
    if (name.empty() || name == ".") name = fs::absolute(hf_dir).parent_path().filename().string();
    plan.set("general.architecture", gguf::Value::str(plan.arch));
    plan.set("general.type", gguf::Value::str("model"));
    plan.set("general.name", gguf::Value::str(name));
    if (keep->arch == Arch::qwen35)
        plan_qwen35(keep, plan);
    else
        plan_llama_like(keep, plan);
    plan_tokenizer(*keep, keep->get_size("vocab_size"), plan);
    return plan;
}

void convert_hf(const std::string& hf_dir, const std::string& out_path,
                const ConvertOptions& options) {
    OutputType out = parse_output_type(options.type);
    std::shared_ptr<HfModel> keep;
    Plan plan = plan_hf(hf_dir, options, keep);
    gguf::Writer w;
    fill_writer(plan, out, w);
    w.write(out_path);
}

std::vector<uint8_t> convert_hf_to_bytes(const std::string& hf_dir, const ConvertOptions& options) {
    OutputType out = parse_output_type(options.type);
    std::shared_ptr<HfModel> keep;
    Plan plan = plan_hf(hf_dir, options, keep);
    gguf::Writer w;
    fill_writer(plan, out, w);
    return w.to_bytes();
}

}  // namespace dl::convert
