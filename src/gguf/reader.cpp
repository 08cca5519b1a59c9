// The GGUF reader: parses and validates a whole file image (mmap or memory) before any of it is
// trusted, so that a corrupt or truncated file is one clear dl::Error, never a crash.
//
// Every length read from the file is compared with the bytes that remain before it is used, and
// every sum of offsets is checked for overflow: a hostile file must not make the reader allocate
// more than a small multiple of its own size or read outside it.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "gguf/gguf.h"

namespace dl::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
// Arrays of arrays are legal but no writer nests deeply; the bound keeps recursion shallow.
constexpr int kMaxArrayDepth = 4;
// Smallest possible encodings, used to bound counts by the bytes that remain.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, type, uint8 value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;  // name length, n_dims, ne[0], type, offset

bool known_value_type(uint32_t t) {
    return t <= static_cast<uint32_t>(ValueType::FLOAT64);
}

size_t fixed_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
        case ValueType::INT8:
        case ValueType::BOOL:
            return 1;
        case ValueType::UINT16:
        case ValueType::INT16:
            return 2;
        case ValueType::UINT32:
        case ValueType::INT32:
        case ValueType::FLOAT32:
            return 4;
        case ValueType::UINT64:
        case ValueType::INT64:
        case ValueType::FLOAT64:
            return 8;
        default:
            return 0;  // strings and arrays have a variable size
    }
}

}  // namespace

class Parser {
  public:
    Parser(const uint8_t* data, size_t size, const std::string& name)
        : p_(data), size_(size), name_(name) {}

    void run(File& f);

  private:
    // What is being read, for error sentences (kept as views so the hot path builds no strings).
    enum class Part { header, key, value, tensor_info };
    Part part_ = Part::header;
    std::string_view key_;
    std::string_view tensor_;
    uint64_t index_ = 0;  // kv or tensor number
    int64_t elem_ = -1;   // array element, -1 for none

    const uint8_t* p_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& name_;

    size_t remaining() const { return size_ - pos_; }

    std::string where() const {
        std::string s;
        switch (part_) {
            case Part::header:
                return "the header";
            case Part::key:
                return fmt::format("the key of metadata entry {}", index_);
            case Part::value:
                s = fmt::format("the value of metadata key '{}'", key_);
                break;
            case Part::tensor_info:
                s = tensor_.empty() ? fmt::format("the description of tensor {}", index_)
                                    : fmt::format("the description of tensor '{}'", tensor_);
                break;
        }
        if (elem_ >= 0) s += fmt::format(" (array element {})", elem_);
        return s;
    }

    [[noreturn]] void truncated(uint64_t need) const {
        fail("{} is truncated: {} needs {} bytes at offset {} but the file ends at {}", name_,
             where(), need, pos_, size_);
    }

    void need(uint64_t n) const {
        if (n > remaining()) truncated(n);
    }

    template <typename T>
    T read() {
        need(sizeof(T));
        T x;
        std::memcpy(&x, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return x;
    }

    // A count of things that each take at least `min_bytes`; rejects counts the rest of the file
    // cannot hold, so that later reserve() calls stay proportional to the file size.
    uint64_t read_count(std::string_view what, uint64_t min_bytes) {
        size_t at = pos_;
        uint64_t n = read<uint64_t>();
        if (n > remaining() / min_bytes)
            fail(
                "{} is corrupt or truncated: {} at offset {} claims {} {} but only {} bytes follow",
                name_, where(), at, n, what, remaining());
        return n;
    }

    std::string_view read_string_view() {
        size_t at = pos_;
        uint64_t len = read<uint64_t>();
        if (len > remaining())
            fail(
                "{} is corrupt or truncated: {} at offset {} claims a string of {} bytes but only "
                "{} bytes follow",
                name_, where(), at, len, remaining());
        std::string_view s(reinterpret_cast<const char*>(p_ + pos_), len);
        pos_ += len;
        return s;
    }

    ValueType read_value_type() {
        size_t at = pos_;
        uint32_t t = read<uint32_t>();
        if (!known_value_type(t))
            fail("{} is corrupt: {} has unknown value type {} at offset {}", name_, where(), t, at);
        return static_cast<ValueType>(t);
    }

    Value read_value(ValueType t, int depth);
    std::shared_ptr<Array> read_array(int depth);
    void read_kvs(File& f, uint64_t n_kv);
    void read_tensor_infos(File& f, uint64_t n_tensors);
    void check_alignment(File& f);
    void place_tensors(File& f);
};

Value Parser::read_value(ValueType t, int depth) {
    Value v;
    v.type = t;
    switch (t) {
        case ValueType::UINT8:
            v.v = uint64_t{read<uint8_t>()};
            break;
        case ValueType::INT8:
            v.v = int64_t{read<int8_t>()};
            break;
        case ValueType::UINT16:
            v.v = uint64_t{read<uint16_t>()};
            break;
        case ValueType::INT16:
            v.v = int64_t{read<int16_t>()};
            break;
        case ValueType::UINT32:
            v.v = uint64_t{read<uint32_t>()};
            break;
        case ValueType::INT32:
            v.v = int64_t{read<int32_t>()};
            break;
        case ValueType::UINT64:
            v.v = read<uint64_t>();
            break;
        case ValueType::INT64:
            v.v = read<int64_t>();
            break;
        case ValueType::FLOAT32:
            v.v = double{read<float>()};
            break;
        case ValueType::FLOAT64:
            v.v = read<double>();
            break;
        case ValueType::BOOL: {
            size_t at = pos_;
            uint8_t b = read<uint8_t>();
            if (b > 1)
                fail("{} is corrupt: {} is a bool of value {} at offset {} (must be 0 or 1)", name_,
                     where(), b, at);
            v.v = b == 1;
            break;
        }
        case ValueType::STRING:
            v.v = std::string(read_string_view());
            break;
        case ValueType::ARRAY:
            v.v = read_array(depth + 1);
            break;
    }
    return v;
}

std::shared_ptr<Array> Parser::read_array(int depth) {
    if (depth > kMaxArrayDepth)
        fail("{} is corrupt: {} nests arrays more than {} deep at offset {}", name_, where(),
             kMaxArrayDepth, pos_);
    auto a = std::make_shared<Array>();
    a->elem_type = read_value_type();
    const ValueType et = a->elem_type;
    // Each element takes at least its fixed size; a string at least its length, an array at
    // least its element type and count.
    uint64_t min_bytes = fixed_size(et);
    if (et == ValueType::STRING) min_bytes = 8;
    if (et == ValueType::ARRAY) min_bytes = 12;
    const uint64_t n = read_count("array elements", min_bytes);
    const int64_t outer_elem = elem_;
    const uint8_t* src = p_ + pos_;

    switch (et) {
        case ValueType::STRING:
            a->strings.reserve(n);
            for (uint64_t i = 0; i < n; ++i) {
                elem_ = (int64_t)i;
                a->strings.emplace_back(read_string_view());
            }
            break;
        case ValueType::FLOAT32:
            a->floats.resize(n);
            if (n) std::memcpy(a->floats.data(), src, n * 4);
            pos_ += n * 4;
            break;
        case ValueType::UINT8:
            a->ints.assign(src, src + n);
            pos_ += n;
            break;
        case ValueType::INT8:
            a->ints.resize(n);
            for (uint64_t i = 0; i < n; ++i) a->ints[i] = (int8_t)src[i];
            pos_ += n;
            break;
        case ValueType::UINT16:
        case ValueType::INT16:
            a->ints.resize(n);
            for (uint64_t i = 0; i < n; ++i) {
                uint16_t x;
                std::memcpy(&x, src + 2 * i, 2);
                a->ints[i] = et == ValueType::INT16 ? (int32_t)(int16_t)x : (int32_t)x;
            }
            pos_ += n * 2;
            break;
        case ValueType::INT32:
            a->ints.resize(n);
            if (n) std::memcpy(a->ints.data(), src, n * 4);
            pos_ += n * 4;
            break;
        case ValueType::UINT32: {
            // Into the narrow-int fast path when every element fits an int32 (the usual case),
            // otherwise as items so that no value silently changes.
            bool fits = true;
            for (uint64_t i = 0; i < n && fits; ++i) fits = src[4 * i + 3] < 0x80;
            if (fits) {
                a->ints.resize(n);
                if (n) std::memcpy(a->ints.data(), src, n * 4);
                pos_ += n * 4;
                break;
            }
            [[fallthrough]];
        }
        default:
            a->items.reserve(n);
            for (uint64_t i = 0; i < n; ++i) {
                elem_ = (int64_t)i;
                a->items.push_back(read_value(et, depth));
            }
            break;
    }
    elem_ = outer_elem;
    return a;
}

void Parser::read_kvs(File& f, uint64_t n_kv) {
    for (uint64_t i = 0; i < n_kv; ++i) {
        part_ = Part::key;
        index_ = i;
        std::string_view key = read_string_view();
        if (key.empty())
            fail("{} is corrupt: metadata entry {} has an empty key (offset {})", name_, i, pos_);
        key_ = key;
        part_ = Part::value;
        ValueType t = read_value_type();
        Value v = read_value(t, 0);
        if (!f.kv_.emplace(std::string(key), std::move(v)).second)
            fail("{} is corrupt: metadata key '{}' appears more than once", name_, key);
    }
}

void Parser::read_tensor_infos(File& f, uint64_t n_tensors) {
    part_ = Part::tensor_info;
    f.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        index_ = i;
        tensor_ = {};
        std::string_view name = read_string_view();
        if (name.empty())
            fail("{} is corrupt: tensor {} has an empty name (offset {})", name_, i, pos_);
        tensor_ = name;
        TensorInfo t;
        t.name = std::string(name);

        size_t at = pos_;
        uint32_t n_dims = read<uint32_t>();
        if (n_dims < 1 || n_dims > kMaxDims)
            fail("{} is corrupt: tensor '{}' has {} dimensions at offset {} (must be 1 to {})",
                 name_, name, n_dims, at, kMaxDims);
        int64_t n_elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            at = pos_;
            uint64_t ne = read<uint64_t>();
            // A zero dimension is legal in ggml but no model tensor has one; refusing it spares
            // every consumer the empty case.
            if (ne == 0 || ne > (uint64_t)std::numeric_limits<int64_t>::max())
                fail("{} is corrupt: tensor '{}' has dimension {} of size {} at offset {}", name_,
                     name, d, ne, at);
            if (__builtin_mul_overflow(n_elements, (int64_t)ne, &n_elements))
                fail("{} is corrupt: tensor '{}' has more elements than a 64-bit count can hold",
                     name_, name);
            t.ne.push_back((int64_t)ne);
        }

        at = pos_;
        uint32_t type = read<uint32_t>();
        auto qi = qtype_info(type);
        if (!qi)
            fail("{} is corrupt or too new: tensor '{}' has unknown type number {} at offset {}",
                 name_, name, type, at);
        t.type = qi->type;
        if (t.ne[0] % qi->block_size != 0)
            fail(
                "{} is corrupt: tensor '{}' of type {} has rows of {} elements, not a multiple "
                "of the block size {}",
                name_, name, qi->name, t.ne[0], qi->block_size);
        uint64_t nbytes = (uint64_t)(t.ne[0] / qi->block_size) * qi->type_size;
        for (size_t d = 1; d < t.ne.size(); ++d)
            if (__builtin_mul_overflow(nbytes, (uint64_t)t.ne[d], &nbytes))
                fail("{} is corrupt: tensor '{}' has a byte size beyond 64 bits", name_, name);
        t.nbytes = nbytes;
        t.offset = read<uint64_t>();

        if (!f.by_name_.emplace(t.name, f.tensors_.size()).second)
            fail("{} is corrupt: tensor '{}' appears more than once", name_, name);
        f.tensors_.push_back(std::move(t));
    }
    tensor_ = {};
}

void Parser::check_alignment(File& f) {
    f.alignment_ = kDefaultAlignment;
    auto it = f.kv_.find("general.alignment");
    if (it == f.kv_.end()) return;
    const Value& v = it->second;
    if (!v.is_integer())
        fail("{} is corrupt: general.alignment is a {}, not an integer", name_,
             value_type_name(v.type));
    uint64_t a = 0;
    if (auto* u = std::get_if<uint64_t>(&v.v)) a = *u;
    if (auto* i = std::get_if<int64_t>(&v.v)) a = *i < 0 ? 0 : (uint64_t)*i;
    if (a == 0 || (a & (a - 1)) != 0)
        fail("{} is corrupt: general.alignment is {}, which is not a power of two", name_,
             format_value(v));
    f.alignment_ = a;
}

void Parser::place_tensors(File& f) {
    const uint64_t align = f.alignment_;
    // The data section starts at the first aligned offset after the tensor descriptions.
    uint64_t pad = (align - pos_ % align) % align;
    uint64_t data_start = 0;
    if (__builtin_add_overflow((uint64_t)pos_, pad, &data_start))
        fail("{} is corrupt: the data section offset overflows", name_);
    if (f.tensors_.empty()) return;
    if (data_start > size_)
        fail("{} is truncated: the tensor data should start at offset {} but the file ends at {}",
             name_, data_start, size_);
    const uint64_t data_size = size_ - data_start;

    for (TensorInfo& t : f.tensors_) {
        if (t.offset % align != 0)
            fail(
                "{} is corrupt: tensor '{}' starts at data offset {}, which is not a multiple of "
                "the alignment {}",
                name_, t.name, t.offset, align);
        if (t.nbytes > data_size || t.offset > data_size - t.nbytes) {
            if (t.offset > data_size)
                fail(
                    "{} is truncated: tensor '{}' needs {} bytes at data offset {} but the data "
                    "section (from file offset {}) holds only {} bytes",
                    name_, t.name, t.nbytes, t.offset, data_start, data_size);
            fail("{} is truncated: tensor '{}' needs {} bytes at offset {} but the file ends at {}",
                 name_, t.name, t.nbytes, data_start + t.offset, size_);
        }
        t.data = p_ + data_start + t.offset;
    }

    // Tensors may come in any order but must not share bytes.
    std::vector<size_t> order(f.tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const TensorInfo& a = f.tensors_[order[i - 1]];
        const TensorInfo& b = f.tensors_[order[i]];
        if (a.offset + a.nbytes > b.offset)
            fail("{} is corrupt: tensors '{}' and '{}' overlap in the data section", name_, a.name,
                 b.name);
    }
}

void Parser::run(File& f) {
    f.size_ = size_;
    if (size_ < 4 || std::memcmp(p_, "GGUF", 4) != 0) {
        if (size_ >= 10 && std::memcmp(p_ + 8, "{\"", 2) == 0)
            fail("{} is not a GGUF file (it looks like safetensors)", name_);
        fail("{} is not a GGUF file (it does not start with the bytes 'GGUF')", name_);
    }
    pos_ = 4;
    static_assert(kMagic == 0x46554747);
    const uint32_t version = read<uint32_t>();
    if (version == 1)
        fail(
            "{} is GGUF version 1, which is unsupported (versions 2 and 3 are read; convert the "
            "model again with a current tool)",
            name_);
    if (version != 2 && version != 3) {
        if (version != 0 && (version & 0xffff) == 0 && __builtin_bswap32(version) <= 3)
            fail("{} is a big-endian GGUF file, which is unsupported", name_);
        fail("{} has unsupported GGUF version {} (versions 2 and 3 are read)", name_, version);
    }
    f.version_ = version;

    // Both counts are bounded by what the rest of the file could hold at the smallest encoding.
    size_t at = pos_;
    const uint64_t n_tensors = read<uint64_t>();
    const uint64_t n_kv = read<uint64_t>();
    if (n_tensors > remaining() / kMinTensorInfoBytes)
        fail(
            "{} is corrupt or truncated: the header (offset {}) claims {} tensors but only {} "
            "bytes follow",
            name_, at, n_tensors, remaining());
    if (n_kv > remaining() / kMinKvBytes)
        fail(
            "{} is corrupt or truncated: the header (offset {}) claims {} metadata entries but "
            "only {} bytes follow",
            name_, at + 8, n_kv, remaining());

    read_kvs(f, n_kv);
    if (n_tensors > remaining() / kMinTensorInfoBytes)
        fail(
            "{} is corrupt or truncated: the header claims {} tensors but only {} bytes follow "
            "the metadata",
            name_, n_tensors, remaining());
    check_alignment(f);
    read_tensor_infos(f, n_tensors);
    place_tensors(f);
}

File File::parse(const uint8_t* data, size_t size, std::string name) {
    File f;
    f.path_ = std::move(name);
    Parser(data, size, f.path_).run(f);
    return f;
}

File File::open(const std::string& path) {
    auto map = std::make_shared<MappedFile>(path);
    File f = parse(map->data(), map->size(), path);
    f.map_ = std::move(map);
    return f;
}

const Value* File::find(std::string_view key) const {
    auto it = kv_.find(std::string(key));
    return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* File::tensor(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

// The getters re-throw the value's conversion error with the file and key in front, so the
// sentence says where the bad value is.
namespace {

const Value& require(const File& f, std::string_view key) {
    const Value* v = f.find(key);
    if (!v) fail("{}: metadata key '{}' is missing", f.path(), key);
    return *v;
}

template <typename Fn>
auto convert(const File& f, std::string_view key, const Value& v, Fn fn) -> decltype(fn(v)) {
    try {
        return fn(v);
    } catch (const Error& e) {
        fail("{}: metadata key '{}': {}", f.path(), key, e.what());
    }
}

}  // namespace

int64_t File::get_int(std::string_view key) const {
    return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_int(); });
}
uint64_t File::get_uint(std::string_view key) const {
    return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_uint(); });
}
double File::get_float(std::string_view key) const {
    return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_float(); });
}
bool File::get_bool(std::string_view key) const {
    return convert(*this, key, require(*this, key), [](const Value& v) { return v.as_bool(); });
}
const std::string& File::get_string(std::string_view key) const {
    return convert(*this, key, require(*this, key),
                   [](const Value& v) -> const std::string& { return v.as_string(); });
}
const Array& File::get_array(std::string_view key) const {
    return convert(*this, key, require(*this, key),
                   [](const Value& v) -> const Array& { return v.as_array(); });
}

int64_t File::get_int(std::string_view key, int64_t def) const {
    const Value* v = find(key);
    return v ? convert(*this, key, *v, [](const Value& x) { return x.as_int(); }) : def;
}
double File::get_float(std::string_view key, double def) const {
    const Value* v = find(key);
    return v ? convert(*this, key, *v, [](const Value& x) { return x.as_float(); }) : def;
}
std::string File::get_string(std::string_view key, std::string def) const {
    const Value* v = find(key);
    return v ? convert(*this, key, *v, [](const Value& x) { return x.as_string(); }) : def;
}

}  // namespace dl::gguf
