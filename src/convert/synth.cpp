// Synthetic models: the real shapes of Qwen3.5, Qwen3 and Llama checkpoints with random weights
// (written directly as blocks of each tensor's type) and a synthetic byte-level BPE vocabulary of
// the real size, for benchmarks and tests that need a file of the right size and layout.
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "convert/plan.h"
#include "convert/random_blocks.h"
#include "core/error.h"

namespace dl::convert {

namespace {

struct Shape {
    const char* arch;
    const char* name;
    int64_t n_vocab, E, n_layer, ffn, n_head, n_kv, D;
    int64_t H_k = 0, H_v = 0, d_state = 0;  // qwen35 Gated DeltaNet
    bool tied = false;
    double rope_base = 1e6;
    int64_t ctx = 32768;
    // Mixture of experts: experts, used per token, an expert's and the shared expert's width.
    int64_t n_expert = 0, n_used = 0, ffn_exp = 0, ffn_shexp = 0;
};

// The dense family of an architecture name (qwen35moe -> qwen35).
std::string_view family(std::string_view arch) {
    return arch.size() > 3 && arch.substr(arch.size() - 3) == "moe"
               ? arch.substr(0, arch.size() - 3)
               : arch;
}

// Hidden size, layers, FFN, attention heads / kv heads x head dim, DeltaNet heads, tied head:
// from the models' published configurations.
const Shape kShapes[] = {
    {"qwen35", "tiny", 1024, 256, 4, 512, 4, 2, 64, 2, 4, 64, false, 1e7, 4096},
    {"qwen35", "0.8b", 248320, 1024, 24, 3584, 8, 2, 256, 16, 16, 128, true, 1e7, 262144},
    {"qwen35", "2b", 248320, 2048, 24, 6144, 8, 2, 256, 16, 16, 128, true, 1e7, 262144},
    {"qwen35", "4b", 248320, 2560, 32, 9216, 16, 4, 256, 16, 32, 128, true, 1e7, 262144},
    {"qwen35", "9b", 248320, 4096, 32, 12288, 16, 4, 256, 16, 32, 128, false, 1e7, 262144},
    {"qwen35", "27b", 248320, 5120, 64, 17408, 24, 4, 256, 16, 48, 128, false, 1e7, 262144},
    {"qwen3", "tiny", 1024, 256, 4, 512, 4, 2, 64, 0, 0, 0, true, 1e6, 4096},
    {"qwen3", "0.6b", 151936, 1024, 28, 3072, 16, 8, 128, 0, 0, 0, true, 1e6, 40960},
    {"qwen3", "8b", 151936, 4096, 36, 12288, 32, 8, 128, 0, 0, 0, false, 1e6, 40960},
    {"llama", "tiny", 1024, 256, 4, 512, 4, 2, 64, 0, 0, 0, false, 5e5, 4096},
    {"llama", "1b", 128256, 2048, 16, 8192, 32, 8, 64, 0, 0, 0, true, 5e5, 131072},
    {"llama", "8b", 128256, 4096, 32, 14336, 32, 8, 128, 0, 0, 0, false, 5e5, 8192},
    // Mixture of experts (ffn: no dense FFN, 0). Qwen3.5-35B-A3B: 40 layers (10 attention),
    // 256 experts of 512 with 8 used and a shared expert of 512; Qwen3.5-122B-A10B: 48 layers (12
    // attention), hidden 3072, attention heads 32/2, DeltaNet heads 16/64, 256 experts of 1024
    // with 8 used and a shared expert of 1024 (122.1B weights, 10B read a token);
    // Qwen3-30B-A3B: 48 layers, 128 experts of 768 with 8 used.
    {"qwen35moe", "tiny", 1024, 256, 4, 0, 4, 2, 64, 2, 4, 64, false, 1e7, 4096, 8, 2, 256, 256},
    {"qwen35moe", "35b-a3b", 248320, 2048, 40, 0, 16, 2, 256, 16, 32, 128, false, 1e7, 262144, 256,
     8, 512, 512},
    {"qwen35moe", "122b-a10b", 248320, 3072, 48, 0, 32, 2, 256, 16, 64, 128, false, 1e7, 262144,
     256, 8, 1024, 1024},
    {"qwen3moe", "tiny", 1024, 256, 4, 0, 4, 2, 64, 0, 0, 0, false, 1e6, 4096, 8, 2, 256, 0},
    {"qwen3moe", "30b-a3b", 151936, 2048, 48, 0, 32, 4, 128, 0, 0, 0, false, 1e6, 40960, 128, 8,
     768, 0},
};

const Shape& find_shape(const std::string& arch, const std::string& name) {
    bool arch_known = false;
    for (const Shape& s : kShapes) {
        if (arch == s.arch) {
            arch_known = true;
            if (name == s.name) return s;
        }
    }
    if (!arch_known)
        fail("synth: unknown architecture '{}' (use qwen35, qwen35moe, qwen3, qwen3moe or llama)",
             arch);
    std::string names;
    for (const std::string& n : synth_shapes(arch)) names += (names.empty() ? "" : ", ") + n;
    fail("synth: unknown shape '{}' for {} (use {})", name, arch, names);
}

std::string byte_token(int b) {
    // GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for themselves, the others
    // map to U+0100 onwards in byte order.
    auto printable = [](int c) {
        return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    };
    int cp = b;
    if (!printable(b)) {
        int n = 0;
        for (int c = 0; c < b; ++c)
            if (!printable(c)) ++n;
        cp = 256 + n;
    }
    std::string s;
    if (cp < 0x80) {
        s += (char)cp;
    } else {
        s += (char)(0xC0 | (cp >> 6));
        s += (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

// A vocabulary of n tokens a BPE tokenizer accepts: the 256 byte tokens, then tokens each made by
// a merge of an earlier token with a byte token (so every merge's parts exist before it), then the
// special tokens.
void plan_vocab(const Shape& s, uint64_t seed, Plan& plan) {
    const bool llama = family(s.arch) == "llama";
    std::vector<std::string> specials =
        llama ? std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                                         "<|start_header_id|>", "<|end_header_id|>"}
              : std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>",
                                         "</think>"};
    const int64_t n = s.n_vocab, n_normal = n - (int64_t)specials.size();
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    tokens.reserve((size_t)n);
    for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b));
    std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
    seen.reserve((size_t)n * 2);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
    auto next = [&x]() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    // Bytes the merges prefer: letters and the space marker, so tokens look like text.
    std::vector<int> common;
    for (int c = 'a'; c <= 'z'; ++c) common.push_back(c);
    common.push_back(0x20);
    while ((int64_t)tokens.size() < n_normal) {
        const std::string& left = tokens[next() % tokens.size()];
        int byte = next() % 4 ? common[next() % common.size()] : (int)(next() % 256);
        std::string right = byte_token(byte);
        std::string t = left + right;
        if (t.size() > 24 || !seen.insert(t).second) continue;
        merges.push_back(left + " " + right);
        tokens.push_back(std::move(t));
    }
    types.assign(tokens.size(), 1);
    for (const std::string& sp : specials) {
        tokens.push_back(sp);
        types.push_back(3);
    }
    const int32_t first_special = (int32_t)n_normal;
    plan.set("tokenizer.ggml.model", gguf::Value::str("gpt2"));
    plan.set("tokenizer.ggml.pre", gguf::Value::str(llama                        ? "llama-bpe"
                                                    : family(s.arch) == "qwen35" ? "qwen35"
                                                                                 : "qwen2"));
    plan.set("tokenizer.ggml.tokens", gguf::Value::array_of_strings(std::move(tokens)));
    plan.set("tokenizer.ggml.token_type", gguf::Value::array_of_i32(std::move(types)));
    plan.set("tokenizer.ggml.merges", gguf::Value::array_of_strings(std::move(merges)));
    if (llama) {
        plan.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(first_special));
        plan.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(first_special + 2));
        plan.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
        plan.set("tokenizer.chat_template",
                 gguf::Value::str("{{ bos_token }}{% for m in messages %}<|start_header_id|>"
                                  "{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
                                  "<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
                                  "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"));
    } else {
        plan.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(first_special));
        plan.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(first_special + 2));
        plan.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(first_special));
        plan.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(false));
        plan.set("tokenizer.chat_template",
                 gguf::Value::str("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                                  "{{ m['content'] }}<|im_end|>\n{% endfor %}"
                                  "{% if add_generation_prompt %}<|im_start|>assistant\n"
                                  "{% endif %}"));
    }
}

uint64_t name_hash(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

std::vector<std::string> synth_shapes(const std::string& arch) {
    std::vector<std::string> out;
    for (const Shape& s : kShapes)
        if (arch == s.arch) out.push_back(s.name);
    return out;
}

static Plan synth_plan(const SynthOptions& o) {
    const Shape& s = find_shape(o.arch, o.shape);
    const bool q35 = family(s.arch) == "qwen35";
    Plan plan;
    plan.arch = s.arch;
    plan.n_layer = s.n_layer;
    plan.n_expert = (int)s.n_expert;
    const std::string a = plan.arch + ".";
    auto u32 = [](int64_t x) { return gguf::Value::u32((uint32_t)x); };
    plan.set("general.architecture", gguf::Value::str(plan.arch));
    plan.set("general.type", gguf::Value::str("model"));
    plan.set("general.name", gguf::Value::str("synthetic " + o.arch + " " + o.shape));
    plan.set(a + "context_length", u32(s.ctx));
    plan.set(a + "embedding_length", u32(s.E));
    plan.set(a + "block_count", u32(s.n_layer));
    if (s.n_expert > 0) {
        plan.set(a + "expert_count", u32(s.n_expert));
        plan.set(a + "expert_used_count", u32(s.n_used));
        plan.set(a + "expert_feed_forward_length", u32(s.ffn_exp));
        if (s.ffn_shexp > 0) plan.set(a + "expert_shared_feed_forward_length", u32(s.ffn_shexp));
    } else {
        plan.set(a + "feed_forward_length", u32(s.ffn));
    }
    plan.set(a + "attention.head_count", u32(s.n_head));
    plan.set(a + "attention.head_count_kv", u32(s.n_kv));
    plan.set(a + "rope.freq_base", gguf::Value::f32((float)s.rope_base));
    plan.set(a + "attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f));
    plan.set(a + "attention.key_length", u32(s.D));
    plan.set(a + "attention.value_length", u32(s.D));
    if (q35) {
        plan.set(a + "rope.dimension_count", u32(s.D / 4));
        plan.set(a + "rope.dimension_sections", gguf::Value::array_of_i32({11, 11, 10, 0}));
        plan.set(a + "ssm.conv_kernel", u32(4));
        plan.set(a + "ssm.state_size", u32(s.d_state));
        plan.set(a + "ssm.group_count", u32(s.H_k));
        plan.set(a + "ssm.time_step_rank", u32(s.H_v));
        plan.set(a + "ssm.inner_size", u32(s.H_v * s.d_state));
        plan.set(a + "full_attention_interval", u32(4));
    } else {
        plan.set(a + "rope.dimension_count", u32(s.D));
        if (family(s.arch) == "llama") plan.set(a + "vocab_size", u32(s.n_vocab));
    }
    plan_vocab(s, o.seed, plan);

    // Each tensor: random values of a spread that keeps the forward finite and well scaled.
    const uint64_t seed = o.seed;
    auto add = [&](const std::string& name, std::vector<int64_t> ne, float mean, float sigma) {
        const uint64_t h = name_hash(name) ^ (seed * 0x2545F4914F6CDD1Dull);
        PlannedTensor t;
        t.name = name;
        t.ne = ne;
        int64_t n = 1;
        for (int64_t d : ne) n *= d;
        t.values = [n, mean, sigma, h](float* dst) { random_floats(dst, n, mean, sigma, h); };
        if (mean == 0.f) {
            const int64_t ne0 = ne[0], rows = n / ne[0];
            t.bytes = [ne0, rows, sigma, h](QType q, uint8_t* dst) {
                return random_blocks(q, dst, rows, ne0, sigma, h);
            };
        }
        plan.tensors.push_back(std::move(t));
    };
    auto matrix = [&](const std::string& name, int64_t in, int64_t out) {
        add(name, {in, out}, 0.f, 1.f / std::sqrt((float)in));
    };
    const int64_t E = s.E, D = s.D;
    add("token_embd.weight", {E, s.n_vocab}, 0.f, 1.f / std::sqrt((float)E));
    for (int64_t il = 0; il < s.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add(b + "attn_norm.weight", {E}, 1.f, 0.05f);
        const bool recurrent = q35 && (il + 1) % 4 != 0;
        if (recurrent) {
            const int64_t d_inner = s.H_v * s.d_state, conv_dim = 2 * s.H_k * s.d_state + d_inner;
            matrix(b + "attn_qkv.weight", E, conv_dim);
            matrix(b + "attn_gate.weight", E, d_inner);
            matrix(b + "ssm_beta.weight", E, s.H_v);
            matrix(b + "ssm_alpha.weight", E, s.H_v);
            add(b + "ssm_conv1d.weight", {4, conv_dim}, 0.f, 0.3f);
            add(b + "ssm_dt.bias", {s.H_v}, 0.5f, 0.25f);
            add(b + "ssm_a", {s.H_v}, -4.f, 2.f);  // -exp(A_log): negative decay rates
            add(b + "ssm_norm.weight", {s.d_state}, 1.f, 0.05f);
            matrix(b + "ssm_out.weight", d_inner, E);
        } else {
            matrix(b + "attn_q.weight", E, s.n_head * D * (q35 ? 2 : 1));
            matrix(b + "attn_k.weight", E, s.n_kv * D);
            matrix(b + "attn_v.weight", E, s.n_kv * D);
            matrix(b + "attn_output.weight", s.n_head * D, E);
            if (family(s.arch) != "llama") {
                add(b + "attn_q_norm.weight", {D}, 1.f, 0.05f);
                add(b + "attn_k_norm.weight", {D}, 1.f, 0.05f);
            }
        }
        add(b + (q35 ? "post_attention_norm.weight" : "ffn_norm.weight"), {E}, 1.f, 0.05f);
        if (s.n_expert > 0) {
            const int64_t F = s.ffn_exp, X = s.n_expert;
            matrix(b + "ffn_gate_inp.weight", E, X);
            add(b + "ffn_gate_exps.weight", {E, F, X}, 0.f, 1.f / std::sqrt((float)E));
            add(b + "ffn_up_exps.weight", {E, F, X}, 0.f, 1.f / std::sqrt((float)E));
            add(b + "ffn_down_exps.weight", {F, E, X}, 0.f, 1.f / std::sqrt((float)F));
            if (s.ffn_shexp > 0) {
                add(b + "ffn_gate_inp_shexp.weight", {E}, 0.f, 1.f / std::sqrt((float)E));
                matrix(b + "ffn_gate_shexp.weight", E, s.ffn_shexp);
                matrix(b + "ffn_up_shexp.weight", E, s.ffn_shexp);
                matrix(b + "ffn_down_shexp.weight", s.ffn_shexp, E);
            }
        } else {
            matrix(b + "ffn_gate.weight", E, s.ffn);
            matrix(b + "ffn_up.weight", E, s.ffn);
            matrix(b + "ffn_down.weight", s.ffn, E);
        }
    }
    add("output_norm.weight", {E}, 1.f, 0.05f);
    if (!s.tied) matrix("output.weight", E, s.n_vocab);
    return plan;
}

void synth(const SynthOptions& options, const std::string& out_path) {
    OutputType out = parse_output_type(options.type);
    Plan plan = synth_plan(options);
    gguf::Writer w;
    fill_writer(plan, out, w);
    w.write(out_path);
}

int64_t synth_weight_count(const SynthOptions& options) {
    int64_t n = 0;
    for (const PlannedTensor& t : synth_plan(options).tensors) n += t.n_elements();
    return n;
}

std::vector<uint8_t> synth_to_bytes(const SynthOptions& options) {
    OutputType out = parse_output_type(options.type);
    Plan plan = synth_plan(options);
    gguf::Writer w;
    fill_writer(plan, out, w);
    return w.to_bytes();
}

}  // namespace dl::convert
