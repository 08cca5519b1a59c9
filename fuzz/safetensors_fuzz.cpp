// libFuzzer target: any byte string given to the safetensors reader must parse or give a
// dl::Error; every tensor of a parsed file is converted to float32 to touch all its bytes.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "gguf/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    volatile float sink = 0;
    try {
        auto f = dl::safetensors::File::parse(data, size, "fuzz.safetensors");
        float h = (float)f.metadata().size();
        for (const auto& t : f.tensors()) {
            if (f.tensor(t.name) != &t) __builtin_trap();
            if (t.data < data || t.data + t.nbytes > data + size) __builtin_trap();
            // Bounded so that a header claiming a huge zero-byte-per-element tensor cannot
            // make the conversion allocate without limit (nbytes is checked against the file).
            if (t.nbytes <= (1u << 20))
                for (float x : dl::safetensors::read_f32(t)) h += x;
        }
        sink = h;
    } catch (const dl::Error&) {
    }
    (void)sink;
    return 0;
}
