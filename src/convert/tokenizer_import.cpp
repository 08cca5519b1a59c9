// tokenizer.json (byte-level BPE) + tokenizer_config.json -> the tokenizer.ggml.* metadata a
// GGUF file carries: tokens padded to the model's vocabulary, token types, merges, the
// pre-tokenizer name, special token ids and the chat template.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "convert/hf.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/read_file.h"

namespace dl::convert {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// GGUF token types (llama.cpp numbering).
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4;

// tokenizer.json of a 250k vocabulary is about 20 MiB; the bound only stops a wrong file.
constexpr size_t kMaxTokenizerFileBytes = 512u << 20;

json load(const fs::path& p, bool required) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
        if (required) fail("{}: {} not found", p.parent_path().string(), p.filename().string());
        return json();
    }
    const std::string name = p.filename().string();
    return parse_json(
        read_file_bounded(p.string(), kMaxTokenizerFileBytes, FileKind::regular_only, name.c_str()),
        p.string());
}

// The pre-tokenizer name llama.cpp files use, recognised by the split regex's distinctive parts.
std::string pre_tokenizer_name(const json& tok, Arch arch) {
    std::string patterns;
    std::function<void(const json&)> collect = [&](const json& j) {
        if (j.is_object()) {
            if (auto it = j.find("Regex"); it != j.end() && it->is_string())
                patterns += it->get<std::string>() + "\n";
            for (const auto& [k, v] : j.items()) collect(v);
        } else if (j.is_array()) {
            for (const auto& v : j) collect(v);
        }
    };
    if (tok.contains("pre_tokenizer")) collect(tok["pre_tokenizer"]);
    if (patterns.find("\\p{M}") != std::string::npos) return "qwen35";
    if (patterns.find("\\p{N}{1,3}") != std::string::npos) return "llama-bpe";
    if (patterns.find("\\p{N}|") != std::string::npos) return "qwen2";
    if (!patterns.empty()) return "default";
    switch (arch) {
        case Arch::qwen35:
            return "qwen35";
        case Arch::qwen3:
            return "qwen2";
        default:
            return "llama-bpe";
    }
}

// A special-token entry of tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> token_text(const json& cfg, const char* key) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

void plan_tokenizer(const HfModel& m, int64_t n_vocab, Plan& plan) {
    const fs::path dir(m.dir);
    json tok = load(dir / "tokenizer.json", true);
    json cfg = load(dir / "tokenizer_config.json", false);
    if (!cfg.is_object()) cfg = json::object();
    if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object())
        fail("{}/tokenizer.json: no tokenizer model", m.dir);
    const json& model = tok["model"];
    std::string type = model.value("type", std::string());
    if (type != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
        fail("{}/tokenizer.json: only byte-level BPE tokenizers are supported (model type '{}')",
             m.dir, type);

    std::vector<std::string> tokens((size_t)n_vocab);
    std::vector<int32_t> types((size_t)n_vocab, 0);
    auto put = [&](int64_t id, const std::string& text, int32_t t) {
        if (id < 0 || id >= n_vocab)
            fail("{}/tokenizer.json: token '{}' has id {}, outside the model's vocabulary of {}",
                 m.dir, text, id, n_vocab);
        tokens[(size_t)id] = text;
        types[(size_t)id] = t;
    };
    for (const auto& [text, id] : model["vocab"].items()) {
        if (!id.is_number_integer())
            fail("{}/tokenizer.json: vocab id of '{}' is not an integer", m.dir, text);
        put(id.get<int64_t>(), text, kNormal);
    }
    std::map<std::string, int64_t> added;
    if (auto it = tok.find("added_tokens"); it != tok.end() && it->is_array())
        for (const json& t : *it) {
            std::string text = t.value("content", std::string());
            int64_t id = t.value("id", (int64_t)-1);
            bool special = t.value("special", false);
            bool looks_control = text.size() > 4 && text.rfind("<|", 0) == 0 &&
                                 text.compare(text.size() - 2, 2, "|>") == 0;
            put(id, text, special || looks_control ? kControl : kUserDefined);
            added[text] = id;
        }
    for (int64_t i = 0; i < n_vocab; ++i)
        if (types[(size_t)i] == 0) {  // ids the tokenizer does not use: padding rows
            tokens[(size_t)i] = "[PAD" + std::to_string(i) + "]";
            types[(size_t)i] = kUserDefined;
        }

    std::vector<std::string> merges;
    if (auto it = model.find("merges"); it != model.end() && it->is_array()) {
        merges.reserve(it->size());
        for (const json& mj : *it) {
            if (mj.is_string())
                merges.push_back(mj.get<std::string>());
            else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string())
                merges.push_back(mj[0].get<std::string>() + " " + mj[1].get<std::string>());
            else
                fail("{}/tokenizer.json: a merge is neither \"a b\" nor [\"a\", \"b\"]", m.dir);
        }
    }

    plan.set("tokenizer.ggml.model", gguf::Value::str("gpt2"));
    plan.set("tokenizer.ggml.pre", gguf::Value::str(pre_tokenizer_name(tok, m.arch)));
    plan.set("tokenizer.ggml.tokens", gguf::Value::array_of_strings(std::move(tokens)));
    plan.set("tokenizer.ggml.token_type", gguf::Value::array_of_i32(std::move(types)));
    plan.set("tokenizer.ggml.merges", gguf::Value::array_of_strings(std::move(merges)));

    auto id_of = [&](const std::string& text) -> std::optional<int64_t> {
        if (auto it = added.find(text); it != added.end()) return it->second;
        if (auto it = model["vocab"].find(text); it != model["vocab"].end())
            return it->get<int64_t>();
        return std::nullopt;
    };
    std::optional<int64_t> bos_id;
    for (auto [key, cfg_id, gguf_key] :
         {std::tuple{"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"},
          std::tuple{"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
          std::tuple{"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
          std::tuple{"unk_token", "unk_token_id", "tokenizer.ggml.unknown_token_id"}}) {
        std::optional<int64_t> id;
        if (auto text = token_text(cfg, key)) id = id_of(*text);
        if (!id) {
            const json* j = m.find(cfg_id);
            if (j && j->is_number_integer()) id = j->get<int64_t>();
            if (j && j->is_array() && !j->empty() && (*j)[0].is_number_integer())
                id = (*j)[0].get<int64_t>();
        }
        if (id && *id >= 0 && *id < n_vocab) {
            plan.set(gguf_key, gguf::Value::u32((uint32_t)*id));
            if (std::string(key) == "bos_token") bos_id = id;
        }
    }

    // add_bos: the config's flag, else whether the post-processor template starts with bos.
    bool add_bos = false;
    if (auto it = cfg.find("add_bos_token"); it != cfg.end() && it->is_boolean()) {
        add_bos = it->get<bool>();
    } else if (auto pp = tok.find("post_processor"); pp != tok.end() && pp->is_object()) {
        const json* single = nullptr;
        if (pp->value("type", "") == "TemplateProcessing" && pp->contains("single"))
            single = &(*pp)["single"];
        if (single && single->is_array() && !single->empty() &&
            (*single)[0].contains("SpecialToken"))
            add_bos = true;
    }
    plan.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(add_bos && bos_id.has_value()));
    if (auto it = cfg.find("add_eos_token"); it != cfg.end() && it->is_boolean())
        plan.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(it->get<bool>()));

    // The chat template: tokenizer_config.json's (a string, or a list of named templates), else
    // chat_template.jinja / chat_template.json beside it.
    std::string tmpl;
    if (auto it = cfg.find("chat_template"); it != cfg.end()) {
        if (it->is_string()) {
            tmpl = it->get<std::string>();
        } else if (it->is_array()) {
            for (const json& t : *it)
                if (t.value("name", "") == "default" && t.contains("template"))
                    tmpl = t["template"].get<std::string>();
            if (tmpl.empty() && !it->empty() && (*it)[0].contains("template"))
                tmpl = (*it)[0]["template"].get<std::string>();
        }
    }
    if (tmpl.empty()) {
        std::error_code ec;
        if (fs::exists(dir / "chat_template.jinja", ec)) {
            tmpl = read_file_bounded((dir / "chat_template.jinja").string(), kMaxTokenizerFileBytes,
                                     FileKind::regular_only, "chat_template.jinja");
        } else {
            json cj = load(dir / "chat_template.json", false);
            if (cj.is_object() && cj.contains("chat_template") && cj["chat_template"].is_string())
                tmpl = cj["chat_template"].get<std::string>();
        }
    }
    if (!tmpl.empty()) plan.set("tokenizer.chat_template", gguf::Value::str(tmpl));
}

}  // namespace dl::convert
