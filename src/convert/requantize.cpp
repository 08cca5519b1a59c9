// GGUF -> GGUF re-quantization: metadata copied, every tensor decoded to float32 and encoded in
// the type the output type or mix gives it, one tensor at a time.
#include <cstring>

#include "convert/plan.h"
#include "core/error.h"
#include "quant/quant.h"

namespace dl::convert {

void quantize_gguf(const std::string& in_path, const std::string& out_path,
                   const std::string& type) {
    OutputType out = parse_output_type(type);
    auto file = std::make_shared<gguf::File>(gguf::File::open(in_path));
    Plan plan;
    plan.arch = file->get_string("general.architecture", "");
    if (plan.arch.empty()) fail("{}: general.architecture is missing", in_path);
    plan.n_layer = file->get_int(plan.arch + ".block_count", 0);
    plan.n_expert = (int)file->get_int(plan.arch + ".expert_count", 0);
    for (const auto& [k, v] : file->metadata()) plan.set(k, v);
    for (const gguf::TensorInfo& ti : file->tensors()) {
        const uint8_t* data = ti.data;
        QType src = ti.type;
        if (src != QType::F32 && src != QType::F16 && src != QType::BF16 &&
            !quant::can_dequantize(src))
            fail("{}: tensor '{}' is of type {}, which cannot be re-quantized", in_path, ti.name,
                 qtype_name(src));
        int64_t n = ti.n_elements();
        // file keeps the mapping alive while the writer streams.
        size_t nbytes = ti.nbytes;
        plan.tensors.push_back(
            {ti.name, ti.ne, [file, data, src, n](float* dst) { decode(src, data, n, dst); },
             [file, data, src, nbytes](QType t, uint8_t* dst) {
                 if (t != src) return false;
                 std::memcpy(dst, data, nbytes);  // unchanged type: bit-exact copy
                 return true;
             }});
    }
    gguf::Writer w;
    w.set_alignment(file->alignment());
    fill_writer(plan, out, w);
    w.write(out_path);
}

}  // namespace dl::convert
