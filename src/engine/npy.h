// NumPy .npy files (format version 1.0) of little-endian float32, C order: what the parity
// tooling dumps logits into, readable by numpy.load. The row writer streams rows to disk and
// fixes the row count in the header at the end, so a long dump never sits in memory. Both write
// through core/output_file.h: the file appears only complete, and a failed run leaves an earlier
// file at the path as it was.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/output_file.h"

namespace dl::npy {

// The header (magic, version, length, dict, padding) for a '<f4' array of the given shape; its
// size is a multiple of 64 bytes. pad_to (a multiple of 64) fixes the size, for rewriting.
std::string header_f32(std::span<const int64_t> shape, size_t pad_to = 0);

// Writes a whole array; throws dl::Error when the file cannot be written.
void write_f32(const std::string& path, std::span<const float> data,
               std::span<const int64_t> shape);

class RowWriter {
  public:
    RowWriter(const std::string& path, int64_t n_cols);
    ~RowWriter();
    RowWriter(const RowWriter&) = delete;
    RowWriter& operator=(const RowWriter&) = delete;

    void append(std::span<const float> row);  // row.size() must be n_cols
    int64_t rows() const { return n_rows_; }
    // Rewrites the header with the final shape [rows, n_cols] and closes the file.
    void finish();

  private:
    std::string path_;
    std::unique_ptr<OutputFile> out_;
    std::FILE* f_ = nullptr;
    int64_t n_cols_;
    int64_t n_rows_ = 0;
};

}  // namespace dl::npy
