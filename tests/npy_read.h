// Test helper: a reader of NumPy .npy files (format 1.0 and 2.0, C order, little-endian float32 or
// int32), written from the format's description and independent of the project's writer
// (engine/npy.h), so tests can read both the engine's dumps and reference data saved by numpy.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace dl::test {

struct NpyArray {
    std::string error;  // empty when the file was read
    std::vector<int64_t> shape;
    size_t data_offset = 0;    // bytes before the data: magic, version, length and header
    std::vector<float> f32;    // filled for '<f4'
    std::vector<int32_t> i32;  // filled for '<i4'
    bool ok() const { return error.empty(); }
};

inline NpyArray read_npy_file(const std::string& path) {
    NpyArray a;
    std::ifstream in(path, std::ios::binary);
    const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY", 6) != 0) {
        a.error = "not a .npy file: " + path;
        return a;
    }
    size_t hlen = 0, off = 0;
    if (b[6] == 1) {
        hlen = (uint8_t)b[8] | ((size_t)(uint8_t)b[9] << 8);
        off = 10;
    } else if (b[6] == 2 || b[6] == 3) {
        if (b.size() < 12) {
            a.error = "truncated header: " + path;
            return a;
        }
        for (int k = 0; k < 4; ++k) hlen |= (size_t)(uint8_t)b[8 + k] << (8 * k);
        off = 12;
    } else {
        a.error = "unknown .npy version in " + path;
        return a;
    }
    if (off + hlen > b.size()) {
        a.error = "truncated header: " + path;
        return a;
    }
    const std::string h = b.substr(off, hlen);
    const bool f4 = h.find("'descr': '<f4'") != std::string::npos;
    const bool i4 = h.find("'descr': '<i4'") != std::string::npos;
    if ((!f4 && !i4) || h.find("'fortran_order': False") == std::string::npos) {
        a.error = "not a C-order <f4 or <i4 array: " + h;
        return a;
    }
    const size_t p = h.find("'shape': (");
    if (p == std::string::npos) {
        a.error = "no shape in " + h;
        return a;
    }
    std::istringstream dims(h.substr(p + 10, h.find(')', p) - p - 10));
    for (std::string d; std::getline(dims, d, ',');)
        if (d.find_first_not_of(' ') != std::string::npos) a.shape.push_back(std::stoll(d));
    size_t count = 1;
    for (int64_t d : a.shape) count *= (size_t)d;
    a.data_offset = off + hlen;
    if (b.size() != a.data_offset + count * 4) {
        a.error = "data size does not match the shape in " + path;
        return a;
    }
    if (f4) {
        a.f32.resize(count);
        std::memcpy(a.f32.data(), b.data() + a.data_offset, count * 4);
    } else {
        a.i32.resize(count);
        std::memcpy(a.i32.data(), b.data() + a.data_offset, count * 4);
    }
    return a;
}

}  // namespace dl::test
