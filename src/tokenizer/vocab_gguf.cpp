// Reading and writing the tokenizer.* metadata keys of a GGUF file (the names llama.cpp's files
// use, including its spelling "seperator_token_id").
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {

namespace {

const gguf::Array& array_of(const gguf::File& f, const char* key, gguf::ValueType elem) {
    const gguf::Array& a = f.get_array(key);
    if (a.elem_type != elem) {
        fail("{} is an array of {}, expected {}", key, gguf::value_type_name(a.elem_type),
             gguf::value_type_name(elem));
    }
    return a;
}

std::vector<std::string> strings_of(const gguf::Array& a) {
    if (!a.strings.empty() || a.items.empty()) return a.strings;
    std::vector<std::string> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) out.push_back(a.string_at(i));
    return out;
}

int32_t optional_id(const gguf::File& f, const char* key) {
    const gguf::Value* v = f.find(key);
    if (!v) return -1;
    const int64_t id = v->as_int();
    // Some converters write -1 (or its uint32 image) for "none".
    if (id == -1 || id == int64_t(std::numeric_limits<uint32_t>::max())) return -1;
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
        fail("{} is {}, not a token id", key, id);
    return int32_t(id);
}

bool optional_bool(const gguf::File& f, const char* key, bool def) {
    const gguf::Value* v = f.find(key);
    return v ? v->as_bool() : def;
}

}  // namespace

Vocab Vocab::from_gguf(const gguf::File& f) {
    Vocab v;
    v.model = f.get_string("tokenizer.ggml.model");
    if (v.model == "gpt2") {
        v.kind = VocabKind::BPE;
    } else if (v.model == "llama") {
        v.kind = VocabKind::SPM;
    } else {
        fail("tokenizer.ggml.model '{}' is not supported (only 'gpt2' and 'llama')", v.model);
    }
    v.pre = f.get_string("tokenizer.ggml.pre", "default");
    v.tokens = strings_of(array_of(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING));
    const size_t n = v.tokens.size();

    if (f.has("tokenizer.ggml.token_type")) {
        const gguf::Array& a = f.get_array("tokenizer.ggml.token_type");
        if (a.size() != n) {
            fail("tokenizer.ggml.token_type has {} entries for {} tokens", a.size(), n);
        }
        v.types.resize(n);
        for (size_t i = 0; i < n; ++i) {
            const int64_t t = a.ints.size() == n ? a.ints[i] : a.int_at(i);
            if (t < 0 || t > int64_t(TokenType::BYTE)) {
                fail("tokenizer.ggml.token_type[{}] is {}, not a token type (0..6)", i, t);
            }
            v.types[i] = TokenType(t);
        }
    }
    if (f.has("tokenizer.ggml.scores")) {
        const gguf::Array& a = f.get_array("tokenizer.ggml.scores");
        if (a.size() != n) fail("tokenizer.ggml.scores has {} entries for {} tokens", a.size(), n);
        if (a.floats.size() == n) {
            v.scores = a.floats;
        } else {
            v.scores.resize(n);
            for (size_t i = 0; i < n; ++i) v.scores[i] = float(a.float_at(i));
        }
    }
    if (f.has("tokenizer.ggml.merges")) {
        v.merges = strings_of(array_of(f, "tokenizer.ggml.merges", gguf::ValueType::STRING));
    }
    if (v.kind == VocabKind::SPM) {
        // SentencePiece vocabularies reserve these ids when the file does not say otherwise.
        v.unk = 0, v.bos = 1, v.eos = 2;
        v.add_bos = true;
    }
    auto id_or = [&](const char* key, int32_t def) {
        return f.has(key) ? optional_id(f, key) : def;
    };
    v.bos = id_or("tokenizer.ggml.bos_token_id", v.bos);
    v.eos = id_or("tokenizer.ggml.eos_token_id", v.eos);
    v.eot = id_or("tokenizer.ggml.eot_token_id", -1);
    v.eom = id_or("tokenizer.ggml.eom_token_id", -1);
    v.unk = id_or("tokenizer.ggml.unknown_token_id", v.unk);
    v.pad = id_or("tokenizer.ggml.padding_token_id", -1);
    v.sep = id_or("tokenizer.ggml.seperator_token_id", -1);
    v.add_bos = optional_bool(f, "tokenizer.ggml.add_bos_token", v.add_bos);
    v.add_eos = optional_bool(f, "tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix =
        optional_bool(f, "tokenizer.ggml.add_space_prefix", v.kind == VocabKind::SPM);
    v.chat_template = f.get_string("tokenizer.chat_template", "");
    for (auto [key, id] : {std::pair<const char*, int32_t>{"bos", v.bos},
                           {"eos", v.eos},
                           {"eot", v.eot},
                           {"eom", v.eom},
                           {"unknown", v.unk},
                           {"padding", v.pad},
                           {"seperator", v.sep}}) {
        if (id >= int64_t(n)) {
            fail("tokenizer.ggml.{}_token_id is {}, outside the vocabulary of {} tokens", key, id,
                 n);
        }
    }
    return v;
}

void Vocab::to_gguf(gguf::Writer& w) const {
    using gguf::Value;
    w.set("tokenizer.ggml.model", Value::str(model));
    w.set("tokenizer.ggml.pre", Value::str(pre));
    w.set("tokenizer.ggml.tokens", Value::array_of_strings(tokens));
    if (!types.empty()) {
        std::vector<int32_t> t(types.size());
        for (size_t i = 0; i < types.size(); ++i) t[i] = int32_t(types[i]);
        w.set("tokenizer.ggml.token_type", Value::array_of_i32(std::move(t)));
    }
    if (!scores.empty()) w.set("tokenizer.ggml.scores", Value::array_of_f32(scores));
    if (!merges.empty()) w.set("tokenizer.ggml.merges", Value::array_of_strings(merges));
    for (auto [key, id] : {std::pair<const char*, int32_t>{"tokenizer.ggml.bos_token_id", bos},
                           {"tokenizer.ggml.eos_token_id", eos},
                           {"tokenizer.ggml.eot_token_id", eot},
                           {"tokenizer.ggml.eom_token_id", eom},
                           {"tokenizer.ggml.unknown_token_id", unk},
                           {"tokenizer.ggml.padding_token_id", pad},
                           {"tokenizer.ggml.seperator_token_id", sep}}) {
        if (id >= 0) w.set(key, Value::u32(uint32_t(id)));
    }
    w.set("tokenizer.ggml.add_bos_token", Value::boolean(add_bos));
    w.set("tokenizer.ggml.add_eos_token", Value::boolean(add_eos));
    if (kind == VocabKind::SPM || add_space_prefix) {
        w.set("tokenizer.ggml.add_space_prefix", Value::boolean(add_space_prefix));
    }
    if (!chat_template.empty()) w.set("tokenizer.chat_template", Value::str(chat_template));
}

}  // namespace dl::tokenizer
