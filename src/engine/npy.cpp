// .npy writing per the NumPy format description: "\x93NUMPY", version 1.0, a little-endian
// uint16 header length, then a Python dict literal padded with spaces and ended by '\n' so that
// the data starts at a multiple of 64 bytes.
#include "engine/npy.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/output_file.h"

namespace dl::npy {

static_assert(std::endian::native == std::endian::little,
              "the .npy writer assumes a little-endian host");

namespace {
constexpr size_t kPreamble = 10;      // magic (6) + version (2) + header length (2)
constexpr size_t kFixedHeader = 128;  // room for any two-dimensional shape
}  // namespace

std::string header_f32(std::span<const int64_t> shape, size_t pad_to) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) dict += ", ";
        dict += std::to_string(shape[i]);
    }
    if (shape.size() == 1) dict += ",";
    dict += "), }";
    size_t total = kPreamble + dict.size() + 1;  // + '\n'
    size_t padded = (total + 63) / 64 * 64;
    if (pad_to) {
        DL_ASSERT(pad_to % 64 == 0 && pad_to >= total);
        padded = pad_to;
    }
    if (padded - kPreamble > 0xffff)
        fail("a .npy header of {} bytes does not fit format 1.0", padded);
    dict.append(padded - total, ' ');
    dict += '\n';
    const uint16_t len = (uint16_t)dict.size();
    std::string h = "\x93NUMPY";
    h += '\x01';
    h += '\x00';
    h += (char)(len & 0xff);
    h += (char)(len >> 8);
    return h + dict;
}

// A stream over the output file's temporary file (its own descriptor, so that fclose leaves
// the OutputFile's open for commit()).
static std::FILE* open_stream(const OutputFile& out) {
    int fd = ::dup(out.fd());
    std::FILE* f = fd >= 0 ? ::fdopen(fd, "wb") : nullptr;
    if (!f) {
        if (fd >= 0) ::close(fd);
        fail("cannot write {}: {}", out.path(), std::strerror(errno));
    }
    return f;
}

void write_f32(const std::string& path, std::span<const float> data,
               std::span<const int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    DL_ASSERT(n == (int64_t)data.size());
    std::string h = header_f32(shape);
    OutputFile out(path);
    std::FILE* f = open_stream(out);
    bool ok = std::fwrite(h.data(), 1, h.size(), f) == h.size() &&
              std::fwrite(data.data(), sizeof(float), data.size(), f) == data.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) fail("cannot write {}: {}", path, std::strerror(errno));
    out.commit();
}

RowWriter::RowWriter(const std::string& path, int64_t n_cols)
    : path_(path), out_(std::make_unique<OutputFile>(path)), n_cols_(n_cols) {
    f_ = open_stream(*out_);
    const int64_t shape[2] = {0, n_cols};
    std::string h = header_f32(shape, kFixedHeader);
    if (std::fwrite(h.data(), 1, h.size(), f_) != h.size()) fail("cannot write {}", path_);
}

RowWriter::~RowWriter() {
    // Unfinished: the temporary file goes with out_, and an earlier file at path stays.
    if (f_) std::fclose(f_);
}

void RowWriter::append(std::span<const float> row) {
    DL_ASSERT((int64_t)row.size() == n_cols_ && f_);
    if (std::fwrite(row.data(), sizeof(float), row.size(), f_) != row.size())
        fail("cannot write {}: {}", path_, std::strerror(errno));
    ++n_rows_;
}

void RowWriter::finish() {
    if (!f_) return;
    const int64_t shape[2] = {n_rows_, n_cols_};
    std::string h = header_f32(shape, kFixedHeader);
    bool ok =
        std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), 1, h.size(), f_) == h.size();
    ok = (std::fclose(f_) == 0) && ok;
    f_ = nullptr;
    if (!ok) fail("cannot write {}: {}", path_, std::strerror(errno));
    out_->commit();
}

}  // namespace dl::npy
