// The safetensors reader: header JSON parsed with nlohmann-json, every tensor's dtype, shape and
// byte range checked against the file before use; shards joined through the index file.
#include "gguf/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/half.h"
#include "core/json_text.h"
#include "core/read_file.h"

namespace dl::safetensors {

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; a real one is a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeInfo {
    DType type;
    std::string_view name;
    size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::BOOL, "BOOL", 1}, {DType::U8, "U8", 1},           {DType::I8, "I8", 1},
    {DType::U16, "U16", 2},   {DType::I16, "I16", 2},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::U32, "U32", 4},         {DType::I32, "I32", 4},
    {DType::F32, "F32", 4},   {DType::U64, "U64", 8},         {DType::I64, "I64", 8},
    {DType::F64, "F64", 8},   {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeInfo& dtype_info(DType t) {
    for (const auto& d : kDTypes)
        if (d.type == t) return d;
    fail("unknown safetensors dtype number {}", (int)t);
}

// A non-negative JSON integer that fits int64, or nullopt.
std::optional<uint64_t> as_index(const json& j) {
    if (j.is_number_unsigned()) {
        uint64_t v = j.get<uint64_t>();
        if (v <= (uint64_t)std::numeric_limits<int64_t>::max()) return v;
        return std::nullopt;
    }
    if (j.is_number_integer()) {
        int64_t v = j.get<int64_t>();
        if (v >= 0) return (uint64_t)v;
    }
    return std::nullopt;
}

// Checks one header entry; begin receives its offset within the data section.
Tensor parse_entry(const std::string& file, const std::string& name, const json& e,
                   uint64_t& begin_out) {
    if (!e.is_object())
        fail("{}: the header entry for tensor '{}' is not a JSON object", file, name);
    Tensor t;
    t.name = name;
    t.file = file;

    auto dt = e.find("dtype");
    if (dt == e.end() || !dt->is_string())
        fail("{}: tensor '{}' has no dtype string in the header", file, name);
    auto d = parse_dtype(dt->get_ref<const std::string&>());
    if (!d)
        fail("{}: tensor '{}' has unknown dtype '{}'", file, name,
             dt->get_ref<const std::string&>());
    t.dtype = *d;

    auto sh = e.find("shape");
    if (sh == e.end() || !sh->is_array())
        fail("{}: tensor '{}' has no shape array in the header", file, name);
    uint64_t n = 1;
    for (const json& x : *sh) {
        auto dim = as_index(x);
        if (!dim)
            fail("{}: tensor '{}' has a shape entry {} that is not a size", file, name, x.dump());
        if (__builtin_mul_overflow(n, *dim, &n) ||
            n > (uint64_t)std::numeric_limits<int64_t>::max())
            fail("{}: tensor '{}' has more elements than a 64-bit count can hold", file, name);
        t.shape.push_back((int64_t)*dim);
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(n, (uint64_t)dtype_size(t.dtype), &nbytes))
        fail("{}: tensor '{}' has a byte size beyond 64 bits", file, name);

    auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2)
        fail("{}: tensor '{}' has no [begin, end] data_offsets in the header", file, name);
    auto begin = as_index((*off)[0]);
    auto end = as_index((*off)[1]);
    if (!begin || !end || *begin > *end)
        fail("{}: tensor '{}' has invalid data_offsets {}", file, name, off->dump());
    if (*end - *begin != nbytes)
        fail("{}: tensor '{}' ({} of shape {}) needs {} bytes but its data_offsets span {}", file,
             name, dtype_name(t.dtype), sh->dump(), nbytes, *end - *begin);
    t.nbytes = nbytes;
    begin_out = *begin;
    return t;
}

bool is_directory(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

// Float8 E4M3 (the "fn" variant: no infinities, S.1111.111 is NaN), bias 7.
float f8_e4m3_to_f32(uint8_t x) {
    const float sign = (x & 0x80) ? -1.0f : 1.0f;
    const int e = (x >> 3) & 0xf, m = x & 7;
    if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
    if (e == 0) return sign * std::ldexp((float)m, -9);  // subnormal: m/8 * 2^-6
    return sign * std::ldexp(1.0f + m / 8.0f, e - 7);
}

}  // namespace

std::string_view dtype_name(DType t) {
    return dtype_info(t).name;
}
size_t dtype_size(DType t) {
    return dtype_info(t).size;
}

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& d : kDTypes)
        if (d.name == name) return d.type;
    return std::nullopt;
}

int64_t Tensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

File File::parse(const uint8_t* data, size_t size, std::string name) {
    File f;
    f.path_ = std::move(name);
    const std::string& file = f.path_;
    if (size < 8)
        fail("{} is not a safetensors file (it is {} bytes, shorter than the 8-byte header length)",
             file, size);
    uint64_t header_len;
    std::memcpy(&header_len, data, 8);
    if (header_len > size - 8)
        fail(
            "{} is truncated or not a safetensors file: the header claims {} bytes but only {} "
            "follow",
            file, header_len, size - 8);
    if (header_len > kMaxHeaderBytes)
        fail(
            "{} is not a usable safetensors file: its header of {} bytes exceeds the {} byte limit",
            file, header_len, kMaxHeaderBytes);

    json header =
        parse_json(std::string_view(reinterpret_cast<const char*>(data + 8), (size_t)header_len),
                   fmt::format("the safetensors header of {}", file));
    if (!header.is_object()) fail("{} has a safetensors header that is not a JSON object", file);

    const uint8_t* data_section = data + 8 + header_len;
    const uint64_t data_size = size - 8 - header_len;
    for (const auto& [key, e] : header.items()) {
        if (key == "__metadata__") {
            if (!e.is_object()) fail("{}: __metadata__ is not a JSON object", file);
            for (const auto& [mk, mv] : e.items()) {
                if (!mv.is_string()) fail("{}: __metadata__ entry '{}' is not a string", file, mk);
                f.metadata_[mk] = mv.get<std::string>();
            }
            continue;
        }
        uint64_t begin = 0;
        Tensor t = parse_entry(file, key, e, begin);
        if (begin > data_size || t.nbytes > data_size - begin)
            fail("{} is truncated: tensor '{}' needs {} bytes at offset {} but the file ends at {}",
                 file, key, t.nbytes, 8 + header_len + begin, size);
        t.data = data_section + begin;
        f.tensors_.push_back(std::move(t));
    }

    std::sort(f.tensors_.begin(), f.tensors_.end(),
              [](const Tensor& a, const Tensor& b) { return a.data < b.data; });
    for (size_t i = 0; i < f.tensors_.size(); ++i) {
        const Tensor& t = f.tensors_[i];
        if (i > 0) {
            const Tensor& p = f.tensors_[i - 1];
            if (p.data + p.nbytes > t.data)
                fail("{} is corrupt: tensors '{}' and '{}' overlap", file, p.name, t.name);
        }
        f.by_name_.emplace(t.name, i);
    }
    return f;
}

File File::open(const std::string& path) {
    auto map = std::make_shared<MappedFile>(path);
    File f = parse(map->data(), map->size(), path);
    f.map_ = std::move(map);
    return f;
}

const Tensor* File::tensor(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Checkpoint Checkpoint::open(const std::string& path) {
    Checkpoint c;
    c.path_ = path;
    std::vector<std::string> shard_paths;
    std::optional<json> weight_map;
    std::string index_path;

    if (!is_directory(path)) {
        shard_paths.push_back(path);
    } else {
        std::string dir = path;
        if (dir.back() != '/') dir += '/';
        index_path = dir + "model.safetensors.index.json";
        if (exists(index_path)) {
            json index = parse_json(
                read_file_bounded(index_path, 64u << 20, FileKind::regular_only, "the shard index"),
                index_path);
            if (!index.is_object() || !index.contains("weight_map") ||
                !index["weight_map"].is_object())
                fail("{} has no weight_map object", index_path);
            std::set<std::string> shards;
            for (const auto& [name, shard] : index["weight_map"].items()) {
                if (!shard.is_string())
                    fail("{}: the shard of tensor '{}' is not a file name", index_path, name);
                const auto& s = shard.get_ref<const std::string&>();
                // Shards live beside the index; a path out of the folder is refused.
                if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
                    fail("{}: tensor '{}' names an invalid shard file '{}'", index_path, name, s);
                shards.insert(s);
            }
            for (const auto& s : shards) shard_paths.push_back(dir + s);
            weight_map = index["weight_map"];
        } else if (exists(dir + "model.safetensors")) {
            shard_paths.push_back(dir + "model.safetensors");
        } else {
            fail("{} holds neither model.safetensors.index.json nor model.safetensors", path);
        }
    }

    for (const auto& p : shard_paths) c.files_.push_back(File::open(p));
    for (size_t fi = 0; fi < c.files_.size(); ++fi) {
        const auto& ts = c.files_[fi].tensors();
        for (size_t ti = 0; ti < ts.size(); ++ti)
            if (!c.by_name_.emplace(ts[ti].name, std::make_pair(fi, ti)).second)
                fail("{}: tensor '{}' appears in more than one shard", path, ts[ti].name);
    }
    if (weight_map) {
        for (const auto& [name, shard] : weight_map->items()) {
            const Tensor* t = c.tensor(name);
            std::string expected =
                path + (path.back() == '/' ? "" : "/") + shard.get<std::string>();
            if (!t || t->file != expected)
                fail("{} places tensor '{}' in {}, but that shard does not hold it", index_path,
                     name, shard.get<std::string>());
        }
    }
    return c;
}

std::vector<const Tensor*> Checkpoint::tensors() const {
    std::vector<const Tensor*> out;
    out.reserve(by_name_.size());
    for (const auto& [name, at] : by_name_) out.push_back(&files_[at.first].tensors()[at.second]);
    return out;
}

const Tensor* Checkpoint::tensor(std::string_view name) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return nullptr;
    return &files_[it->second.first].tensors()[it->second.second];
}

const Tensor& Checkpoint::require(std::string_view name) const {
    const Tensor* t = tensor(name);
    if (!t) fail("{} has no tensor '{}'", path_, name);
    return *t;
}

void read_f32(const Tensor& t, float* dst) {
    const uint8_t* s = t.data;
    const size_t n = (size_t)t.n_elements();
    auto load = [&](auto zero, size_t i) {
        decltype(zero) x;
        std::memcpy(&x, s + i * sizeof(x), sizeof(x));
        return x;
    };
    switch (t.dtype) {
        case DType::F32:
            if (n) std::memcpy(dst, s, n * 4);
            return;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load(uint16_t{}, i));
            return;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load(uint16_t{}, i));
            return;
        case DType::F64:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(double{}, i);
            return;
        case DType::F8_E5M2:  // the top byte of an IEEE half
            for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32((uint16_t)(s[i] << 8));
            return;
        case DType::F8_E4M3:
            for (size_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(s[i]);
            return;
        case DType::BOOL:
            for (size_t i = 0; i < n; ++i) dst[i] = s[i] ? 1.0f : 0.0f;
            return;
        case DType::U8:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)s[i];
            return;
        case DType::I8:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)(int8_t)s[i];
            return;
        case DType::U16:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(uint16_t{}, i);
            return;
        case DType::I16:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(int16_t{}, i);
            return;
        case DType::U32:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(uint32_t{}, i);
            return;
        case DType::I32:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(int32_t{}, i);
            return;
        case DType::U64:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(uint64_t{}, i);
            return;
        case DType::I64:
            for (size_t i = 0; i < n; ++i) dst[i] = (float)load(int64_t{}, i);
            return;
    }
    fail("{}: tensor '{}' has a dtype that cannot be read as float32", t.file, t.name);
}

std::vector<float> read_f32(const Tensor& t) {
    std::vector<float> out((size_t)t.n_elements());
    read_f32(t, out.data());
    return out;
}

}  // namespace dl::safetensors
