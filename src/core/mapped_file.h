// A read-only memory mapping of a whole file (model weights are read straight from it).
// A file truncated while it is mapped would kill the process with SIGBUS on the first read past
// its new end. Mapped files are registered with a SIGBUS handler that puts zero pages where the
// file's pages are gone, so the read completes, and marks the mapping: the next
// check_mapped_files() (after loading, before an output file is kept, after generating) turns
// it into a dl::Error naming the file.
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
    int slot_ = -1;  // its entry in the SIGBUS handler's list
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

// Throws dl::Error when a mapped file was truncated under the process (see above).
void check_mapped_files();

}  // namespace dl
