// `deltallm info`: what a GGUF file holds (metadata, with big arrays summarised), the model's
// architecture and hyper-parameters, tensor types and bytes, the memory a run needs, and what
// each device would do with it.
#include <cstdio>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/memory.h"
#include "core/printable.h"
#include "core/threads.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tools/common.h"
#include "tools/default_model.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct InfoArgs {
    ModelArgs model;
    bool tensors = false;
    bool devices = false;
    std::string device = "auto";  // whose plan to show: auto (every device), cpu, vulkan[:N]
    int64_t n_ctx = 0;
    int64_t parallel = 1;  // sequences at once: a device's KV cache pool is planned for them
};

const char* type_name(gguf::ValueType t) {
    switch (t) {
        case gguf::ValueType::UINT8:
            return "u8";
        case gguf::ValueType::INT8:
            return "i8";
        case gguf::ValueType::UINT16:
            return "u16";
        case gguf::ValueType::INT16:
            return "i16";
        case gguf::ValueType::UINT32:
            return "u32";
        case gguf::ValueType::INT32:
            return "i32";
        case gguf::ValueType::FLOAT32:
            return "f32";
        case gguf::ValueType::BOOL:
            return "bool";
        case gguf::ValueType::STRING:
            return "string";
        case gguf::ValueType::ARRAY:
            return "array";
        case gguf::ValueType::UINT64:
            return "u64";
        case gguf::ValueType::INT64:
            return "i64";
        case gguf::ValueType::FLOAT64:
            return "f64";
    }
    return "?";
}

// A string shown on one line: escapes for control characters, long ones cut.
std::string short_string(const std::string& s, size_t max = 80) {
    std::string out = "\"";
    for (char c : printable(std::string_view(s).substr(0, max))) {
        if (c == '"') out += '\\';
        out += c;
    }
    out += "\"";
    if (s.size() > max) out += fmt::format("... ({} bytes)", s.size());
    return out;
}

std::string show_value(const gguf::Value& v) {
    switch (v.type) {
        case gguf::ValueType::STRING:
            return short_string(v.as_string());
        case gguf::ValueType::BOOL:
            return v.as_bool() ? "true" : "false";
        case gguf::ValueType::FLOAT32:
            return fmt::format("{}", (float)v.as_float());
        case gguf::ValueType::FLOAT64:
            return fmt::format("{}", v.as_float());
        case gguf::ValueType::ARRAY: {
            const gguf::Array& a = v.as_array();
            const size_t n = a.size();
            std::string head = fmt::format("[{} x {}]", n, type_name(a.elem_type));
            if (n > 16) return head;  // the 250k-entry vocabulary arrays: the count says enough
            std::string items;
            for (size_t i = 0; i < n; ++i) {
                if (i) items += ", ";
                if (a.elem_type == gguf::ValueType::STRING)
                    items +=
                        short_string(a.strings.empty() ? a.items[i].as_string() : a.strings[i], 24);
                else if (!a.ints.empty())
                    items += std::to_string(a.ints[i]);
                else if (!a.floats.empty())
                    items += fmt::format("{}", a.floats[i]);
                else if (i < a.items.size())
                    items += show_value(a.items[i]);
            }
            return head + " " + items;
        }
        default:
            if (v.is_integer()) return std::to_string(v.as_int());
            return "?";
    }
}

void print_metadata(const gguf::File& f) {
    std::printf("file: %s\n", f.path().c_str());
    std::printf("  size %s, GGUF version %u, alignment %llu, %zu metadata keys, %zu tensors\n",
                human_bytes(f.file_size()).c_str(), f.version(), (unsigned long long)f.alignment(),
                f.metadata().size(), f.tensors().size());
    std::printf("metadata:\n");
    for (const auto& [key, value] : f.metadata())
        std::printf("  %-44s %s\n", printable(key).c_str(), show_value(value).c_str());
}

void print_tensor_types(const gguf::File& f) {
    struct Row {
        int64_t count = 0;
        uint64_t bytes = 0, elements = 0;
    };
    std::map<std::string, Row> by_type;
    uint64_t total = 0;
    for (const gguf::TensorInfo& t : f.tensors()) {
        Row& r = by_type[std::string(qtype_name(t.type))];
        r.count++;
        r.bytes += t.nbytes;
        r.elements += (uint64_t)t.n_elements();
        total += t.nbytes;
    }
    std::printf("tensor types:\n");
    for (const auto& [name, r] : by_type)
        std::printf("  %-8s %5lld tensors %12s  %5.1f%%  %6.3f bits/weight\n", name.c_str(),
                    (long long)r.count, human_bytes(r.bytes).c_str(),
                    total ? 100.0 * r.bytes / total : 0.0,
                    r.elements ? 8.0 * r.bytes / r.elements : 0.0);
    std::printf("  total    %5zu tensors %12s\n", f.tensors().size(), human_bytes(total).c_str());
}

void print_tensors(const gguf::File& f) {
    std::printf("tensors:\n");
    for (const gguf::TensorInfo& t : f.tensors()) {
        std::string shape;
        for (size_t i = 0; i < t.ne.size(); ++i)
            shape += (i ? " x " : "") + std::to_string(t.ne[i]);
        std::printf("  %-40s %-8s [%s] %s @ %llu\n", printable(t.name).c_str(),
                    std::string(qtype_name(t.type)).c_str(), shape.c_str(),
                    human_bytes(t.nbytes).c_str(), (unsigned long long)t.offset);
    }
}

void print_model(const Model& m, int64_t n_ctx) {
    const Hparams& hp = m.hp;
    int64_t n_gdn = 0;
    for (int64_t il = 0; il < hp.n_layer; ++il) n_gdn += hp.is_recurrent(il) ? 1 : 0;
    std::printf("model:\n");
    std::printf("  architecture   %s%s\n", printable(hp.arch_name).c_str(),
                hp.model_name.empty() ? "" : (" (" + printable(hp.model_name) + ")").c_str());
    std::printf("  vocabulary     %lld\n", (long long)hp.n_vocab);
    std::printf("  layers         %lld", (long long)hp.n_layer);
    if (n_gdn)
        std::printf(" (%lld Gated DeltaNet, %lld attention)", (long long)n_gdn,
                    (long long)(hp.n_layer - n_gdn));
    if (hp.n_nextn) std::printf(", + %lld MTP block(s) not run", (long long)hp.n_nextn);
    std::printf("\n  hidden         %lld\n", (long long)hp.n_embd);
    if (hp.ffn_kind == FfnKind::experts)
        std::printf(
            "  feed-forward   %lld experts of %lld, %lld per token%s\n", (long long)hp.n_expert,
            (long long)hp.n_ff_exp, (long long)hp.n_expert_used,
            hp.n_ff_shexp > 0 ? fmt::format(", a shared expert of {}", hp.n_ff_shexp).c_str() : "");
    else
        std::printf("  feed-forward   %lld\n", (long long)hp.n_ff);
    std::printf("  attention      %lld heads, %lld KV heads, head size %lld\n",
                (long long)hp.n_head, (long long)hp.n_head_kv, (long long)hp.head_dim);
    std::printf("  rope           base %g, %lld rotated dims\n", hp.rope_base,
                (long long)hp.rope_dims);
    if (n_gdn)
        std::printf(
            "  DeltaNet       %lld key heads, %lld value heads, state %lld, conv kernel %lld\n",
            (long long)hp.ssm_n_k_heads, (long long)hp.ssm_n_v_heads, (long long)hp.ssm_d_state,
            (long long)hp.ssm_conv_kernel);
    std::printf("  context        %lld trained\n  rms eps        %g\n  tied head      %s\n",
                (long long)hp.n_ctx_train, hp.rms_eps, hp.tied_embeddings ? "yes" : "no");

    MemoryEstimate me = estimate_memory(m, n_ctx);
    std::printf("memory (context %lld tokens, one sequence):\n", (long long)n_ctx);
    std::printf("  weights          %12s\n", human_bytes(me.weights).c_str());
    std::printf("  KV cache (f16)   %12s\n", human_bytes(me.kv_cache).c_str());
    std::printf("  recurrent state  %12s\n", human_bytes(me.recurrent_state).c_str());
    std::printf("  total            %12s\n", human_bytes(me.total()).c_str());
}

// What each device of `spec` would do with the model (auto: every device).
void print_devices(std::shared_ptr<const Model> m, int64_t n_ctx, int64_t parallel,
                   const DeviceSpec& spec) {
    using Kind = DeviceSpec::Kind;
    std::printf("devices:\n");
    if (spec.kind != Kind::vulkan) {
        try {
            cpu::Chain chain(m);
            // Sequences of this context that fit beside the weights and the shared scratch.
            const uint64_t ram = usable_memory_bytes(), seq = chain.session_bytes(n_ctx);
            const uint64_t shared = m->weight_bytes() + chain.workspace_bytes(n_ctx);
            const std::string fit = ram > 0 ? fmt::format(", {} sequences of {} tokens fit in {}",
                                                          ram > shared ? (ram - shared) / seq : 0,
                                                          n_ctx, human_bytes(ram))
                                            : "";
            std::printf("  cpu      runs: CPU chain, %d threads, %s kernels, session %s%s\n",
                        ThreadPool::global().size(), quant::cpu_backend(), human_bytes(seq).c_str(),
                        fit.c_str());
        } catch (const Error& e) {
            std::printf("  cpu      cannot run: %s\n", printable(e.what()).c_str());
        }
    }
    if (spec.kind == Kind::cpu) return;
    bool vulkan = false;
    for (const DeviceDriver& d : registered_devices()) {
        vulkan = vulkan || d.name == "vulkan";
        // A line a device, each naming it ("vulkan:0 (NAME): ...").
        std::string what = d.describe ? d.describe(*m, Capacity{n_ctx, parallel}, spec.index)
                                      : d.name + " registered";
        for (size_t at = 0; at < what.size();) {
            size_t end = std::min(what.find('\n', at), what.size());
            std::printf("  %s\n", what.substr(at, end - at).c_str());
            at = end + 1;
        }
    }
    if (!vulkan) std::printf("  vulkan   not in this build\n");
}

// `info --devices`: every device each registered driver sees, with its features.
int list_devices() {
    std::printf("cpu: %u hardware threads, %s kernels\n", std::thread::hardware_concurrency(),
                quant::cpu_backend());
    bool vulkan = false;
    for (const DeviceDriver& d : registered_devices()) {
        vulkan = vulkan || d.name == "vulkan";
        std::printf("%s\n", d.list_devices ? d.list_devices().c_str() : d.name.c_str());
    }
    if (!vulkan) std::printf("vulkan: not in this build\n");
    return 0;
}

int info(const InfoArgs& a) {
    const DeviceSpec spec = DeviceSpec::parse(a.device);
    if (a.devices && a.model.path.empty()) return list_devices();
    if (a.n_ctx < 0 || a.n_ctx > kMaxContext)
        fail("-c must be 0 (the model's) or a number of tokens up to {}, not {}", kMaxContext,
             a.n_ctx);
    if (a.parallel < 1 || a.parallel > 1024)
        fail("--parallel must be 1 to 1024, not {}", a.parallel);
    std::shared_ptr<gguf::File> file;
    std::vector<uint8_t> image;
    if (a.model.path.empty()) {
        std::fprintf(stderr, "deltallm: no model given (-m): showing the built-in model, %s\n",
                     default_model_description().c_str());
        image = default_model_image();
        file = std::make_shared<gguf::File>(
            gguf::File::parse(image.data(), image.size(), "built-in model"));
    } else {
        file = std::make_shared<gguf::File>(gguf::File::open(a.model.path));
    }
    print_metadata(*file);
    print_tensor_types(*file);
    if (a.tensors) print_tensors(*file);
    std::shared_ptr<const Model> model;
    try {
        model = Model::from_file(file);
    } catch (const Error& e) {
        std::printf("model: cannot be run: %s\n", printable(e.what()).c_str());
        return 0;
    }
    int64_t n_ctx = a.n_ctx;
    if (n_ctx == 0)
        n_ctx = model->hp.n_ctx_train > 0 ? std::min(model->hp.n_ctx_train, kDefaultContext)
                                          : kDefaultContext;
    print_model(*model, n_ctx);
    print_devices(model, n_ctx, a.parallel, spec);
    return 0;
}

Registrar reg("info", "show a model's metadata, tensors and the memory it needs",
              [](CLI::App& app) -> Run {
                  auto a = std::make_shared<InfoArgs>();
                  a->model.add_to(app, /*with_device=*/false);
                  app.add_flag("--tensors", a->tensors, "list every tensor");
                  app.add_flag("--devices", a->devices,
                               "list the devices and their features (with -m: also the model's "
                               "plan on each)");
                  app.add_option("--device", a->device,
                                 "whose plan to show: auto (every device), cpu, vulkan or "
                                 "vulkan:N")
                      ->capture_default_str();
                  app.add_option(
                      "-c,--ctx", a->n_ctx,
                      "context size for the memory estimate (0: the model's, at most 4096)");
                  app.add_option("--parallel,--np", a->parallel,
                                 "sequences at once to plan a device's KV cache for");
                  return [a] { return info(*a); };
              });

}  // namespace

}  // namespace dl::tools
