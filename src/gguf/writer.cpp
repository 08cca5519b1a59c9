// The GGUF v3 writer. The header (metadata and tensor descriptions) is encoded in memory; the
// tensor data goes straight into the output file through a writable mapping, so a producer
// callback fills its tensor in place and a multi-gigabyte file is never held in memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/ranges.h>

#include "core/align.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "gguf/gguf.h"

namespace dl::gguf {

namespace {

constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;  // the reader's bound: what is written must read back

struct IntRange {
    int64_t lo;
    uint64_t hi;
    size_t width;
};

IntRange int_range(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
            return {0, 0xff, 1};
        case ValueType::INT8:
            return {-128, 127, 1};
        case ValueType::UINT16:
            return {0, 0xffff, 2};
        case ValueType::INT16:
            return {-32768, 32767, 2};
        case ValueType::UINT32:
            return {0, 0xffffffffu, 4};
        case ValueType::INT32:
            return {INT32_MIN, INT32_MAX, 4};
        case ValueType::UINT64:
            return {0, UINT64_MAX, 8};
        default:
            return {INT64_MIN, (uint64_t)INT64_MAX, 8};
    }
}

class Encoder {
  public:
    explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

    template <typename T>
    void put(T x) {
        size_t at = out_.size();
        out_.resize(at + sizeof(T));
        std::memcpy(out_.data() + at, &x, sizeof(T));
    }
    void put_string(std::string_view s) {
        put<uint64_t>(s.size());
        out_.insert(out_.end(), s.begin(), s.end());
    }

    // The value without its type tag (array elements carry none).
    void put_value(const std::string& key, const Value& v, int depth) {
        if (is_integer_type(v.type)) {
            if (auto* u = std::get_if<uint64_t>(&v.v)) return put_int(key, v.type, false, *u);
            if (auto* i = std::get_if<int64_t>(&v.v)) return put_int(key, v.type, *i < 0, *i);
            mismatch(key, v);
        }
        switch (v.type) {
            case ValueType::FLOAT32:
            case ValueType::FLOAT64:
                if (auto* d = std::get_if<double>(&v.v)) {
                    if (v.type == ValueType::FLOAT32)
                        put<float>((float)*d);
                    else
                        put<double>(*d);
                    return;
                }
                break;
            case ValueType::BOOL:
                if (auto* b = std::get_if<bool>(&v.v)) return put<uint8_t>(*b ? 1 : 0);
                break;
            case ValueType::STRING:
                if (auto* s = std::get_if<std::string>(&v.v)) return put_string(*s);
                break;
            case ValueType::ARRAY:
                if (auto* a = std::get_if<std::shared_ptr<Array>>(&v.v); a && *a)
                    return put_array(key, **a, depth + 1);
                break;
            default:
                fail("cannot write metadata key '{}': unknown value type {}", key,
                     (uint32_t)v.type);
        }
        mismatch(key, v);
    }

    void put_array(const std::string& key, const Array& a, int depth) {
        if (depth > kMaxArrayDepth)
            fail("cannot write metadata key '{}': arrays nest more than {} deep", key,
                 kMaxArrayDepth);
        const ValueType et = a.elem_type;
        if ((uint32_t)et > (uint32_t)ValueType::FLOAT64)
            fail("cannot write metadata key '{}': unknown array element type {}", key,
                 (uint32_t)et);
        put<uint32_t>((uint32_t)et);
        put<uint64_t>(a.size());
        if (!a.items.empty()) {
            for (const Value& item : a.items) {
                if (item.type != et)
                    fail("cannot write metadata key '{}': an array of {} holds a {}", key,
                         value_type_name(et), value_type_name(item.type));
                put_value(key, item, depth);
            }
            return;
        }
        if (et == ValueType::STRING) {
            for (const auto& s : a.strings) put_string(s);
        } else if (et == ValueType::FLOAT32) {
            size_t at = out_.size();
            out_.resize(at + a.floats.size() * 4);
            if (!a.floats.empty())
                std::memcpy(out_.data() + at, a.floats.data(), a.floats.size() * 4);
        } else if (is_integer_type(et)) {
            for (int32_t x : a.ints) put_int(key, et, x < 0, x);
        }
    }

  private:
    std::vector<uint8_t>& out_;

    // bits is the two's-complement value; negative says how to read it for the range check.
    void put_int(const std::string& key, ValueType t, bool negative, uint64_t bits) {
        IntRange r = int_range(t);
        bool ok = negative ? (int64_t)bits >= r.lo : bits <= r.hi;
        if (!ok)
            fail("cannot write metadata key '{}': {} does not fit a {}", key,
                 negative ? std::to_string((int64_t)bits) : std::to_string(bits),
                 value_type_name(t));
        size_t at = out_.size();
        out_.resize(at + r.width);
        std::memcpy(out_.data() + at, &bits, r.width);  // the low bytes, little-endian
    }

    [[noreturn]] static void mismatch(const std::string& key, const Value& v) {
        fail("cannot write metadata key '{}': a value of type {} holds the wrong kind of data", key,
             value_type_name(v.type));
    }
};

}  // namespace

struct Writer::Layout {
    std::vector<uint8_t> header;
    uint64_t data_start = 0;
    std::vector<uint64_t> offsets;  // within the data section
    uint64_t total = 0;
};

uint64_t Writer::Pending::nbytes() const {
    uint64_t n = row_size(type, ne[0]);
    for (size_t d = 1; d < ne.size(); ++d) n *= (uint64_t)ne[d];
    return n;
}

void Writer::set(const std::string& key, Value v) {
    if (key.empty()) fail("cannot write a metadata entry with an empty key");
    if (key == "general.alignment") {
        if (!v.is_integer()) fail("general.alignment must be an integer");
        alignment_ = v.as_uint();
    }
    for (auto& kv : kv_)
        if (kv.first == key) {
            kv.second = std::move(v);
            return;
        }
    kv_.emplace_back(key, std::move(v));
}

namespace {

// Checks a tensor before it is queued and returns its size in bytes.
uint64_t check_tensor(const std::string& name, QType type, const std::vector<int64_t>& ne) {
    if (name.empty()) fail("cannot write a tensor with an empty name");
    auto qi = qtype_info(static_cast<uint32_t>(type));
    if (!qi) fail("cannot write tensor '{}': unknown type number {}", name, (uint32_t)type);
    if (ne.empty() || ne.size() > kMaxDims)
        fail("cannot write tensor '{}': it has {} dimensions (must be 1 to {})", name, ne.size(),
             kMaxDims);
    int64_t n = 1;
    for (int64_t d : ne) {
        if (d < 1) fail("cannot write tensor '{}': dimension of size {}", name, d);
        if (__builtin_mul_overflow(n, d, &n))
            fail("cannot write tensor '{}': too many elements", name);
    }
    if (ne[0] % qi->block_size != 0)
        fail(
            "cannot write tensor '{}' as {}: rows of {} elements are not a multiple of the block "
            "size {}",
            name, qi->name, ne[0], qi->block_size);
    uint64_t nbytes = (uint64_t)(ne[0] / qi->block_size) * qi->type_size;
    for (size_t d = 1; d < ne.size(); ++d)
        if (__builtin_mul_overflow(nbytes, (uint64_t)ne[d], &nbytes))
            fail("cannot write tensor '{}': its size overflows", name);
    return nbytes;
}

}  // namespace

void Writer::add_tensor(const std::string& name, QType type, std::vector<int64_t> ne,
                        std::vector<uint8_t> bytes) {
    uint64_t nbytes = check_tensor(name, type, ne);
    if (bytes.size() != nbytes)
        fail("cannot write tensor '{}': {} {} elements take {} bytes but {} were given", name,
             qtype_name(type), fmt::join(ne, "x"), nbytes, bytes.size());
    if (!names_.insert(name).second) fail("cannot write tensor '{}' twice", name);
    tensors_.push_back(Pending{name, type, std::move(ne), std::move(bytes), nullptr});
}

void Writer::add_tensor(const std::string& name, QType type, std::vector<int64_t> ne,
                        std::function<void(uint8_t* dst, size_t nbytes)> produce) {
    check_tensor(name, type, ne);
    if (!produce) fail("cannot write tensor '{}': no data producer given", name);
    if (!names_.insert(name).second) fail("cannot write tensor '{}' twice", name);
    tensors_.push_back(Pending{name, type, std::move(ne), {}, std::move(produce)});
}

Writer::Layout Writer::plan() const {
    const uint64_t align = alignment_;
    if (align == 0 || (align & (align - 1)) != 0 || align > UINT32_MAX)
        fail("cannot write a GGUF file with alignment {} (must be a power of two)", align);

    // general.alignment is written whenever it differs from the default, always as the uint32
    // the spec asks for, and always agreeing with the alignment used.
    std::vector<std::pair<std::string, Value>> kvs = kv_;
    bool have_alignment = false;
    for (auto& kv : kvs)
        if (kv.first == "general.alignment") {
            kv.second = Value::u32((uint32_t)align);
            have_alignment = true;
        }
    if (!have_alignment && align != 32) kvs.emplace_back("general.alignment", Value::u32(align));

    Layout l;
    Encoder e(l.header);
    e.put<uint32_t>(0x46554747);  // "GGUF"
    e.put<uint32_t>(3);
    e.put<uint64_t>(tensors_.size());
    e.put<uint64_t>(kvs.size());
    for (const auto& [key, v] : kvs) {
        e.put_string(key);
        e.put<uint32_t>((uint32_t)v.type);
        e.put_value(key, v, 0);
    }
    uint64_t offset = 0;
    for (const Pending& t : tensors_) {
        e.put_string(t.name);
        e.put<uint32_t>((uint32_t)t.ne.size());
        for (int64_t d : t.ne) e.put<uint64_t>((uint64_t)d);
        e.put<uint32_t>((uint32_t)t.type);
        e.put<uint64_t>(offset);
        l.offsets.push_back(offset);
        offset += align_up(t.nbytes(), align);
    }
    l.data_start = align_up(l.header.size(), align);
    l.total = l.data_start + offset;
    return l;
}

void Writer::emit(uint8_t* base, const Layout& l) const {
    std::memcpy(base, l.header.data(), l.header.size());
    std::memset(base + l.header.size(), 0, l.data_start - l.header.size());
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const Pending& t = tensors_[i];
        const uint64_t n = t.nbytes();
        uint8_t* dst = base + l.data_start + l.offsets[i];
        if (t.produce)
            t.produce(dst, n);
        else
            std::memcpy(dst, t.bytes.data(), n);
        uint64_t end = i + 1 < tensors_.size() ? l.offsets[i + 1] : l.total - l.data_start;
        std::memset(dst + n, 0, end - l.offsets[i] - n);
    }
}

std::vector<uint8_t> Writer::to_bytes() const {
    Layout l = plan();
    std::vector<uint8_t> out(l.total);
    emit(out.data(), l);
    return out;
}

void Writer::write(const std::string& path) const {
    Layout l = plan();
    // A temporary file beside the target, renamed over it only once complete (core/output_file.h
    // says what is refused and what is kept).
    OutputFile out(path);
    const int fd = out.fd();
    // Reserving the space first turns a full disk (or the file size limit) into an error here
    // instead of a SIGBUS while the mapping is written.
    if (int r = ::posix_fallocate(fd, 0, (off_t)l.total))
        fail("cannot write '{}' ({} bytes): {}", path, l.total, std::strerror(r));
    void* base = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        fail("cannot map '{}' for writing: {}", out.temp_path(), std::strerror(errno));
    try {
        emit(static_cast<uint8_t*>(base), l);
    } catch (...) {
        ::munmap(base, l.total);
        throw;
    }
    if (::munmap(base, l.total) != 0) fail("cannot write '{}': {}", path, std::strerror(errno));
    // Tensors copied from a mapped input that was truncated meanwhile hold zeros: not kept.
    check_mapped_files();
    out.commit();
}

}  // namespace dl::gguf
