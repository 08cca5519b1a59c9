// A read-only memory mapping of a whole file (model weights are read straight from it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dl {

class MappedFile {
  public:
    MappedFile() = default;
    // Throws dl::Error with the path and the reason when the file cannot be opened or mapped.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace dl
