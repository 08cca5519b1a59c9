// Private to the DeltaNet kernels: 8-lane float vectors (GCC/Clang vector extensions) and the
// attribute that compiles a hot kernel twice, for x86-64-v3 (AVX2 + FMA) and the baseline, with
// the choice made once at load time. Helpers here are always inlined so that they take the
// instruction set of the kernel that calls them.
#pragma once

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define DL_DELTANET_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DL_DELTANET_KERNEL
#endif
#define DL_DELTANET_INLINE inline __attribute__((always_inline))
#define DL_DELTANET_INLINE_LAMBDA __attribute__((always_inline))

// The helpers pass 32-byte vectors by value; they are always inlined, so the baseline ABI note
// GCC gives about such signatures does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace dl::cpu::deltanet::simd {

typedef float Vec __attribute__((vector_size(32)));
constexpr int kLanes = 8;

// Lane count of a column type: Vec (8 floats) or float (the scalar tail).
template <typename V>
constexpr int lanes = sizeof(V) / sizeof(float);

template <typename V>
DL_DELTANET_INLINE V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename V>
DL_DELTANET_INLINE void store(float* p, V v) {
    std::memcpy(p, &v, sizeof v);
}

template <typename V>
DL_DELTANET_INLINE V splat(float x) {
    return V{} + x;
}

}  // namespace dl::cpu::deltanet::simd
