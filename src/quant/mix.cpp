// Per-tensor format choice of the quantization mixes (see mix.h for the rules in words).
#include "quant/mix.h"

#include <cctype>
#include <string>

#include "core/error.h"

namespace dl::quant {

namespace {

struct MixInfo {
    Mix mix;
    std::string_view name;
    QType base;
    uint32_t file_type;
};

// clang-format off
constexpr MixInfo kMixes[] = {
    {Mix::f32, "f32", QType::F32, 0},
    {Mix::f16, "f16", QType::F16, 1},
    {Mix::bf16, "bf16", QType::BF16, 32},
    {Mix::q8_0, "q8_0", QType::Q8_0, 7},
    {Mix::q4_0, "q4_0", QType::Q4_0, 2},
    {Mix::q4_k_s, "q4_k_s", QType::Q4_K, 14},
    {Mix::q4_k_m, "q4_k_m", QType::Q4_K, 15},
    {Mix::q5_k_s, "q5_k_s", QType::Q5_K, 16},
    {Mix::q5_k_m, "q5_k_m", QType::Q5_K, 17},
    {Mix::q6_k, "q6_k", QType::Q6_K, 18},
};
// clang-format on

const MixInfo& mix_info(Mix m) {
    for (const auto& i : kMixes)
        if (i.mix == m) return i;
    DL_ASSERT(!"unknown mix");
    __builtin_unreachable();
}

bool contains(std::string_view s, std::string_view part) {
    return s.find(part) != s.npos;
}
bool ends_with(std::string_view s, std::string_view end) {
    return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

int n_dims(std::span<const int64_t> ne) {
    int n = 1;
    for (size_t i = 0; i < ne.size(); ++i)
        if (ne[i] > 1) n = (int)i + 1;
    return n;
}

// Tensors that keep full precision whatever the mix: 1-D tensors, norms, and small 2-D tensors
// where quantization would save nothing and cost accuracy.
bool quantizable(std::string_view name, std::span<const int64_t> ne) {
    if (n_dims(ne) < 2 || !ends_with(name, "weight")) return false;
    for (std::string_view keep : {"_norm.weight",
                                  "ffn_gate_inp.weight",
                                  "ssm_conv1d",
                                  "shortconv.conv.weight",
                                  "altup",
                                  "laurel",
                                  "per_layer_model_proj",
                                  "attn_rel_b.weight",
                                  "time_mix_first.weight",
                                  "time_mix_w0.weight",
                                  "time_mix_w1.weight",
                                  "time_mix_w2.weight",
                                  "time_mix_v0.weight",
                                  "time_mix_v1.weight",
                                  "time_mix_v2.weight",
                                  "time_mix_a0.weight",
                                  "time_mix_a1.weight",
                                  "time_mix_a2.weight",
                                  "time_mix_g1.weight",
                                  "time_mix_g2.weight",
                                  "time_mix_decay_w1.weight",
                                  "time_mix_decay_w2.weight",
                                  "time_mix_lerp_fused.weight"})
        if (contains(name, keep)) return false;
    return name != "position_embd.weight" && name != "token_types.weight";
}

int layer_of(std::string_view name) {
    if (name.substr(0, 4) != "blk.") return 0;
    int v = 0;
    for (size_t i = 4; i < name.size() && std::isdigit((unsigned char)name[i]); ++i)
        v = v * 10 + (name[i] - '0');
    return v;
}

// The "more bits" layers: the first and last eighth, and every third layer in between.
bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// A row length the chosen format's block does not divide falls back to a format with 32-element
// blocks of similar size, and to F16 when even that does not fit.
QType fallback(QType t, int64_t ncols) {
    if (ncols % block_size(t) == 0) return t;
    QType r;
    switch (t) {
        case QType::IQ4_XS:
            r = QType::IQ4_NL;
            break;
        case QType::Q2_K:
        case QType::Q3_K:
            r = QType::Q4_0;
            break;
        case QType::Q4_K:
            r = QType::Q5_0;
            break;
        case QType::Q5_K:
            r = QType::Q5_1;
            break;
        case QType::Q6_K:
            r = QType::Q8_0;
            break;
        default:
            r = QType::F16;
            break;
    }
    return ncols % block_size(r) == 0 ? r : QType::F16;
}

}  // namespace

Mix parse_mix(std::string_view name) {
    std::string lower;
    for (char c : name) lower += (char)std::tolower((unsigned char)c);
    std::string known;
    for (const auto& i : kMixes) {
        if (i.name == lower) return i.mix;
        known += (known.empty() ? "" : ", ") + std::string(i.name);
    }
    fail("unknown quantization type '{}' (known: {})", name, known);
}

std::string_view mix_name(Mix m) {
    return mix_info(m).name;
}
QType mix_base_type(Mix m) {
    return mix_info(m).base;
}
uint32_t mix_file_type(Mix m) {
    return mix_info(m).file_type;
}

const std::vector<Mix>& list_mixes() {
    static const std::vector<Mix> all = [] {
        std::vector<Mix> v;
        for (const auto& i : kMixes) v.push_back(i.mix);
        return v;
    }();
    return all;
}

QType mix_tensor_type(Mix m, const MixTensor& t) {
    DL_ASSERT(!t.ne.empty());
    if (!quantizable(t.name, t.ne)) return QType::F32;
    const QType base = mix_base_type(m);
    if (base == QType::F32 || base == QType::F16 || base == QType::BF16) return base;

    const std::string_view name = t.name;
    const int64_t ncols = t.ne[0];
    const int layer = layer_of(name), n = t.n_layer;
    const bool is_output = name == "output.weight";
    const bool is_token_embd = name == "token_embd.weight" || name == "per_layer_token_embd.weight";
    const bool attn_v_like = contains(name, "attn_qkv.weight") ||
                             contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight");
    QType type = base;

    if (is_output || (!t.has_output && is_token_embd)) {
        if (t.arch == "falcon" || ncols % block_size(base) != 0)
            type = QType::Q8_0;
        else if (base != QType::Q8_0)
            type = QType::Q6_K;
    } else if (is_token_embd) {
        // the base type
    } else if (attn_v_like) {
        if ((m == Mix::q4_k_m || m == Mix::q5_k_m) && use_more_bits(layer, n))
            type = QType::Q6_K;
        else if (m == Mix::q4_k_s && layer < 4)
            type = QType::Q5_K;
        if (t.n_expert == 8) type = QType::Q8_0;
    } else if (contains(name, "attn_k.weight")) {
        if (t.n_expert == 8) type = QType::Q8_0;
    } else if (contains(name, "ffn_down")) {
        if (m == Mix::q4_k_m) {
            if (t.arch == "falcon")
                type = layer < n / 16            ? QType::Q6_K
                       : use_more_bits(layer, n) ? QType::Q5_K
                                                 : QType::Q4_K;
            else if (use_more_bits(layer, n))
                type = QType::Q6_K;
        } else if (m == Mix::q5_k_m && use_more_bits(layer, n)) {
            type = QType::Q6_K;
        } else if (m == Mix::q4_k_s && t.arch != "falcon" && layer < n / 8) {
            type = QType::Q5_K;
        }
    } else if (contains(name, "attn_output.weight")) {
        if (t.arch != "falcon" && t.n_expert == 8 && (m == Mix::q4_k_s || m == Mix::q4_k_m))
            type = QType::Q5_K;
    }
    return fallback(type, ncols);
}

}  // namespace dl::quant
