// Byte-level assembly of GGUF and safetensors images for the tests, written from the public
// format descriptions and independent of the library's writer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace dl::test {

struct Image {
    std::vector<uint8_t> b;

    Image& u8(uint8_t x) { return raw(&x, 1); }
    Image& u16(uint16_t x) { return raw(&x, 2); }
    Image& u32(uint32_t x) { return raw(&x, 4); }
    Image& u64(uint64_t x) { return raw(&x, 8); }
    Image& i32(int32_t x) { return raw(&x, 4); }
    Image& i64(int64_t x) { return raw(&x, 8); }
    Image& f32(float x) { return raw(&x, 4); }
    Image& f64(double x) { return raw(&x, 8); }
    Image& str(std::string_view s) {
        u64(s.size());
        return raw(s.data(), s.size());
    }
    Image& raw(const void* p, size_t n) {
        const uint8_t* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
        return *this;
    }
    Image& zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
    Image& pad_to(size_t align) { return zeros((align - b.size() % align) % align); }
    size_t size() const { return b.size(); }

    // The GGUF header: magic, version, tensor count, metadata count (v2 and v3 share it).
    Image& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        raw("GGUF", 4);
        u32(version);
        u64(n_tensors);
        return u64(n_kv);
    }
    // A metadata key with its value type tag; the value follows.
    Image& key(std::string_view k, uint32_t type) {
        str(k);
        return u32(type);
    }
    // A tensor description: name, n_dims, dims, type, offset.
    Image& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
        str(name);
        u32((uint32_t)ne.size());
        for (uint64_t d : ne) u64(d);
        u32(type);
        return u64(off);
    }
};

// Runs fn, requires a dl::Error whose message contains every fragment, and returns the message.
template <typename Fn>
std::string expect_error(Fn fn, std::vector<std::string> fragments) {
    try {
        fn();
    } catch (const dl::Error& e) {
        std::string m = e.what();
        for (const auto& f : fragments)
            EXPECT_NE(m.find(f), std::string::npos) << "message: " << m << "\nmissing: " << f;
        return m;
    }
    ADD_FAILURE() << "no dl::Error thrown";
    return {};
}

}  // namespace dl::test
