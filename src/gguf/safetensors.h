// Safetensors checkpoints (Hugging Face): a validating reader over mmap for one file and for a
// folder of shards listed by model.safetensors.index.json. Import (convert) reads weights here.
//
// A file is an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and [begin, end) byte range within the data that follows, then the data. Every range is
// checked against the file and against its dtype and shape before a Tensor is handed out.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace dl::safetensors {

enum class DType {
    BOOL,
    U8,
    I8,
    U16,
    I16,
    F16,
    BF16,
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
    F8_E4M3,
    F8_E5M2
};

// "F32", "BF16", ... as the header spells them.
std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
std::optional<DType> parse_dtype(std::string_view name);

struct Tensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;     // outermost first, as in PyTorch (shape.back() is contiguous)
    const uint8_t* data = nullptr;  // not necessarily aligned: read with memcpy
    uint64_t nbytes = 0;
    std::string file;  // the file holding it

    int64_t n_elements() const;
};

// One .safetensors file.
class File {
  public:
    static File open(const std::string& path);
    // Parses an in-memory image (tests, fuzzing); the bytes must outlive the File.
    static File parse(const uint8_t* data, size_t size, std::string name = "<memory>");

    const std::string& path() const { return path_; }
    // The optional "__metadata__" string map.
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // In header order of their data (sorted by offset).
    const std::vector<Tensor>& tensors() const { return tensors_; }
    const Tensor* tensor(std::string_view name) const;

  private:
    std::string path_;
    std::shared_ptr<MappedFile> map_;
    std::map<std::string, std::string> metadata_;
    std::vector<Tensor> tensors_;
    std::map<std::string, size_t, std::less<>> by_name_;
};

// A checkpoint: a single .safetensors file, or a folder holding either
// model.safetensors.index.json (with its shards) or a single model.safetensors.
class Checkpoint {
  public:
    static Checkpoint open(const std::string& path);

    const std::string& path() const { return path_; }
    const std::vector<File>& files() const { return files_; }
    // Every tensor of every shard, sorted by name.
    std::vector<const Tensor*> tensors() const;
    const Tensor* tensor(std::string_view name) const;
    // Throws dl::Error naming the checkpoint and the tensor when it is absent.
    const Tensor& require(std::string_view name) const;

  private:
    std::string path_;
    std::vector<File> files_;
    std::map<std::string, std::pair<size_t, size_t>, std::less<>> by_name_;  // file, tensor
};

// The tensor's elements converted to float32 (every dtype: floats exactly or rounded to nearest,
// integers as their nearest float, BOOL as 0/1). dst must hold n_elements() floats.
void read_f32(const Tensor& t, float* dst);
std::vector<float> read_f32(const Tensor& t);

}  // namespace dl::safetensors
