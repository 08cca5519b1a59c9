// libFuzzer target: any byte string given to the GGUF reader must parse or give a dl::Error;
// everything a parsed file exposes (every metadata value, every tensor byte) is read so that a
// bad length or pointer shows up under the address sanitizer.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "gguf/gguf.h"

namespace {

uint64_t touch(const dl::gguf::Value& v);

uint64_t touch_array(const dl::gguf::Array& a) {
    uint64_t h = a.size();
    for (const auto& x : a.items) h += touch(x);
    for (const auto& s : a.strings) h += s.size() ? (uint8_t)s.back() : 0;
    for (float f : a.floats) h += f > 0;
    for (int32_t i : a.ints) h += (uint32_t)i;
    for (size_t i = 0; i < a.size(); ++i) {
        try {
            h += (uint64_t)a.int_at(i);
        } catch (const dl::Error&) {
        }
        try {
            h += a.string_at(i).size();
        } catch (const dl::Error&) {
        }
    }
    return h;
}

uint64_t touch(const dl::gguf::Value& v) {
    uint64_t h = (uint64_t)v.type;
    try {
        h += (uint64_t)v.as_int();
    } catch (const dl::Error&) {
    }
    try {
        h += v.as_float() > 0;
    } catch (const dl::Error&) {
    }
    try {
        h += v.as_string().size();
    } catch (const dl::Error&) {
    }
    try {
        h += v.as_bool();
    } catch (const dl::Error&) {
    }
    try {
        h += touch_array(v.as_array());
    } catch (const dl::Error&) {
    }
    return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    volatile uint64_t sink = 0;
    try {
        auto f = dl::gguf::File::parse(data, size, "fuzz.gguf");
        uint64_t h = f.version() + f.alignment();
        for (const auto& [key, v] : f.metadata()) {
            h += touch(v) + key.size();
            h += dl::gguf::format_value(v, 4).size();
            try {
                h += (uint64_t)f.get_int(key, 0);
            } catch (const dl::Error&) {
            }
        }
        for (const auto& t : f.tensors()) {
            if (f.tensor(t.name) != &t) __builtin_trap();
            if (t.data < data || t.data + t.nbytes > data + size) __builtin_trap();
            for (uint64_t i = 0; i < t.nbytes; ++i) h += t.data[i];
            h += (uint64_t)t.n_elements();
        }
        sink = h;
    } catch (const dl::Error&) {
    }
    (void)sink;
    return 0;
}
