// GGUF files: a validating reader over mmap (versions 2 and 3) and a writer.
//
// The reader checks everything before trusting it (magic, version, counts, string and array
// lengths, tensor offsets and sizes against the file size without overflow, alignment, known
// types, dimensions) and throws dl::Error with one sentence naming the problem. Once open() has
// returned, every TensorInfo::data pointer is valid for nbytes bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "quant/types.h"

namespace dl::gguf {

// Value types as numbered in the file.
enum class ValueType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

struct Array;
// One metadata value. Arrays hold their element type and elements (arrays of arrays allowed).
struct Value {
    ValueType type = ValueType::UINT8;
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

    static Value u32(uint32_t x);
    static Value i32(int32_t x);
    static Value u64(uint64_t x);
    static Value f32(float x);
    static Value boolean(bool x);
    static Value str(std::string s);
    static Value array_of_strings(std::vector<std::string> xs);
    static Value array_of_i32(std::vector<int32_t> xs);
    static Value array_of_f32(std::vector<float> xs);

    // Typed access; throws dl::Error naming the key's actual type when it does not convert.
    bool is_integer() const;
    int64_t as_int() const;
    uint64_t as_uint() const;
    double as_float() const;
    bool as_bool() const;
    const std::string& as_string() const;
    const Array& as_array() const;
};

struct Array {
    ValueType elem_type = ValueType::UINT8;
    std::vector<Value> items;
    // Fast paths for the big tokenizer arrays (avoid one Value per token). When items is empty:
    // elem_type STRING -> strings; FLOAT32 -> floats; INT8/UINT8/INT16/UINT16/INT32 -> ints, and
    // UINT32 -> ints too unless an element exceeds INT32_MAX (then the reader fills items).
    // Other element types (bool, 64-bit, nested arrays) always use items.
    std::vector<std::string> strings;
    std::vector<float> floats;
    std::vector<int32_t> ints;
    size_t size() const;
    // Element i whichever representation holds it (items or a fast path); throws dl::Error when
    // the elements are not of that kind or i is out of range.
    int64_t int_at(size_t i) const;
    double float_at(size_t i) const;
    const std::string& string_at(size_t i) const;
};

// "uint32", "string", "array", ... as the GGUF spec names the value types.
std::string_view value_type_name(ValueType t);
// True for the eight integer value types (UINT8 ... INT64), whatever their width or sign.
bool is_integer_type(ValueType t);
// A short human-readable rendering ("[1, 2, 3, ... 4000 items]") for listings such as `info`.
std::string format_value(const Value& v, size_t max_items = 8);

struct TensorInfo {
    std::string name;
    std::vector<int64_t> ne;  // ne[0] is the contiguous dimension
    QType type = QType::F32;
    uint64_t offset = 0;  // from the start of the data section
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr;

    int64_t n_elements() const;
};

class File {
  public:
    // Opens and validates; throws dl::Error ("model.gguf: tensor 'x' extends 120 bytes past the
    // end of the file (truncated download?)").
    static File open(const std::string& path);
    // Parses an in-memory image (the fuzz target and tests use this; the bytes must outlive File).
    static File parse(const uint8_t* data, size_t size, std::string name = "<memory>");

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    const std::string& path() const { return path_; }
    size_t file_size() const { return size_; }

    const std::map<std::string, Value>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }
    // Throwing getters: the error names the key and says it is missing or of the wrong type.
    int64_t get_int(std::string_view key) const;
    uint64_t get_uint(std::string_view key) const;
    double get_float(std::string_view key) const;
    bool get_bool(std::string_view key) const;
    const std::string& get_string(std::string_view key) const;
    const Array& get_array(std::string_view key) const;
    // Defaults when absent (still throws when present with the wrong type).
    int64_t get_int(std::string_view key, int64_t def) const;
    double get_float(std::string_view key, double def) const;
    std::string get_string(std::string_view key, std::string def) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* tensor(std::string_view name) const;

  private:
    std::string path_;
    std::shared_ptr<MappedFile> map_;
    size_t size_ = 0;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    std::map<std::string, Value> kv_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> by_name_;

    friend class Parser;
};

// Writes a GGUF v3 file. Tensors are added with their bytes (already in the target type) or with
// a callback that produces them at write time (so huge files stream without holding all data).
class Writer {
  public:
    void set(const std::string& key, Value v);
    void set_alignment(uint64_t a) { alignment_ = a; }
    void add_tensor(const std::string& name, QType type, std::vector<int64_t> ne,
                    std::vector<uint8_t> bytes);
    void add_tensor(const std::string& name, QType type, std::vector<int64_t> ne,
                    std::function<void(uint8_t* dst, size_t nbytes)> produce);
    // Writes to path (via a temporary file renamed at the end, so no half-written file is left).
    void write(const std::string& path) const;
    // The whole file in memory (tests).
    std::vector<uint8_t> to_bytes() const;

  private:
    struct Pending {
        std::string name;
        QType type;
        std::vector<int64_t> ne;
        std::vector<uint8_t> bytes;
        std::function<void(uint8_t*, size_t)> produce;
        uint64_t nbytes() const;
    };
    uint64_t alignment_ = 32;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<Pending> tensors_;
    // Names seen, so that the duplicate check stays constant time for a million tensors.
    std::unordered_set<std::string> names_;

    // The encoded header and where each tensor goes; emit() fills layout.total bytes at base.
    struct Layout;
    Layout plan() const;
    void emit(uint8_t* base, const Layout& layout) const;
};

}  // namespace dl::gguf
