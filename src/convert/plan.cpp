// Output types, per-tensor type choice and float <-> block encoding for every GGUF producer.
#include "convert/plan.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "convert/mix_bridge.h"
#include "core/error.h"
#include "core/half.h"
#include "core/threads.h"
#include "quant/quant.h"

namespace dl::convert {

int64_t PlannedTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

void Plan::set(const std::string& key, gguf::Value v) {
    for (auto& [k, val] : kv)
        if (k == key) {
            val = std::move(v);
            return;
        }
    kv.emplace_back(key, std::move(v));
}

namespace {
struct PlainType {
    const char* name;
    QType type;
    uint32_t file_type;  // llama_ftype
};
// llama_ftype numbers of the files' general.file_type for the "mostly one type" outputs.
constexpr PlainType kPlain[] = {
    {"f32", QType::F32, 0},   {"f16", QType::F16, 1},   {"bf16", QType::BF16, 32},
    {"q8_0", QType::Q8_0, 7}, {"q4_0", QType::Q4_0, 2}, {"q4_1", QType::Q4_1, 3},
    {"q5_0", QType::Q5_0, 8}, {"q5_1", QType::Q5_1, 9}, {"iq4_nl", QType::IQ4_NL, 25},
};
}  // namespace

OutputType parse_output_type(const std::string& name) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return (char)std::tolower(c); });
    // The mixes (which include f16, q8_0, ...) carry llama.cpp's per-tensor rules.
    if (auto mix = find_mix(lower)) return *mix;
    for (const PlainType& p : kPlain)
        if (lower == p.name) {
            if (p.type != QType::F32 && p.type != QType::F16 && p.type != QType::BF16 &&
                !quant::can_quantize(p.type))
                fail("output type '{}' cannot be produced (no quantizer for {})", name,
                     qtype_name(p.type));
            return OutputType{lower, false, p.type, p.file_type};
        }
    fail(
        "unknown output type '{}' (use f32, f16, bf16, q8_0, q4_0, ... or a mix such as "
        "q4_k_m, q5_k_m, q6_k)",
        name);
}

static bool is_plain_f32(const PlannedTensor& t) {
    // Norms, biases, ssm_a, dt bias and the conv taps are read once per token as floats and are
    // tiny: every llama.cpp output keeps them in f32.
    // The router (ffn_gate_inp) is small and decides which experts run: llama-quantize never
    // quantizes it either.
    return t.ne.size() < 2 || t.name.find("ssm_conv1d") != std::string::npos ||
           t.name.find("rope_freqs") != std::string::npos ||
           t.name.find("ffn_gate_inp.weight") != std::string::npos;
}

QType stored_type(const OutputType& out, const Plan& plan, const PlannedTensor& t,
                  bool has_output) {
    if (out.is_mix) return mix_type(out, plan, t, has_output);
    if (is_plain_f32(t)) return QType::F32;
    QType q = out.base;
    if (t.ne[0] % block_size(q) != 0) {
        // Rows the block does not divide cannot hold this type at all.
        q = QType::F16;
    }
    return q;
}

void encode(QType t, const float* src, int64_t n, int64_t ne0, uint8_t* dst) {
    if (t == QType::F32) {
        std::memcpy(dst, src, (size_t)n * 4);
        return;
    }
    if (t == QType::F16 || t == QType::BF16) {
        uint16_t* d = reinterpret_cast<uint16_t*>(dst);
        ThreadPool::global().for_range(
            n,
            [&](int64_t b, int64_t e, int) {
                if (t == QType::F16)
                    for (int64_t i = b; i < e; ++i) d[i] = f32_to_f16(src[i]);
                else
                    for (int64_t i = b; i < e; ++i) d[i] = f32_to_bf16(src[i]);
            },
            1 << 16);
        return;
    }
    if (!quant::can_quantize(t)) fail("no quantizer for type {}", qtype_name(t));
    DL_ASSERT(ne0 > 0 && n % ne0 == 0);
    const int64_t rows = n / ne0;
    const size_t rb = row_size(t, ne0);
    ThreadPool::global().for_range(
        rows,
        [&](int64_t b, int64_t e, int) {
            quant::quantize(t, src + b * ne0, dst + (size_t)b * rb, (e - b) * ne0);
        },
        std::max<int64_t>(1, (1 << 16) / ne0));
}

void decode(QType t, const uint8_t* src, int64_t n, float* dst) {
    if (t == QType::F32) {
        std::memcpy(dst, src, (size_t)n * 4);
        return;
    }
    if (t == QType::F16 || t == QType::BF16) {
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            dst[i] = t == QType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        return;
    }
    if (!quant::can_dequantize(t)) fail("cannot read tensors of type {}", qtype_name(t));
    quant::dequantize(t, src, dst, n);
}

void fill_writer(const Plan& plan, const OutputType& out, gguf::Writer& w) {
    for (const auto& [k, v] : plan.kv) {
        if (k == "general.file_type" || k == "general.quantization_version") continue;
        w.set(k, v);
    }
    w.set("general.file_type", gguf::Value::u32(out.file_type));
    w.set("general.quantization_version", gguf::Value::u32(2));
    bool has_output = false;
    for (const PlannedTensor& t : plan.tensors)
        has_output = has_output || t.name == "output.weight";
    for (const PlannedTensor& t : plan.tensors) {
        QType q = stored_type(out, plan, t, has_output);
        const PlannedTensor* tp = &t;
        w.add_tensor(t.name, q, t.ne, [tp, q](uint8_t* dst, size_t nbytes) {
            const int64_t n = tp->n_elements();
            if (tp->bytes && tp->bytes(q, dst)) return;
            std::vector<float> f((size_t)n);
            tp->values(f.data());
            DL_ASSERT(nbytes == row_size(q, tp->ne[0]) * (size_t)(n / tp->ne[0]));
            encode(q, f.data(), n, tp->ne[0], dst);
        });
    }
}

}  // namespace dl::convert
