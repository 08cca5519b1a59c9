// Private to the DeltaNet kernels: 8-lane float vectors (GCC/Clang vector extensions) and the
// attribute that compiles a hot kernel twice, for x86-64-v3 (AVX2 + FMA) and the baseline, with
// the choice made once at load time. Helpers here are always inlined so that they take the
// instruction set of the kernel that calls them.
#pragma once

#include <cstring>

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

// Not under ThreadSanitizer: the clones' resolver runs while the dynamic loader relocates the
// binary, before the sanitizer's runtime is up, and its instrumented entry crashes the program
// before main (the baseline clone alone is then built).
#if defined(__SANITIZE_THREAD__)  // GCC
#define DL_DELTANET_NO_CLONES 1
#elif defined(__has_feature)  // Clang
#if __has_feature(thread_sanitizer)
#define DL_DELTANET_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__) && \
    !defined(DL_DELTANET_NO_CLONES)
#define DL_DELTANET_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DL_DELTANET_KERNEL
#endif
#define DL_DELTANET_INLINE inline __attribute__((always_inline))
#define DL_DELTANET_INLINE_LAMBDA __attribute__((always_inline))

// The helpers pass 32-byte vectors by value; they are always inlined, so the baseline ABI note
// GCC gives about such signatures does not apply.
#if defined(__GNUC__)
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

// A shuffle rather than V{x, ...} or x * V: inlined into a kernel cloned for AVX2, those forms
// are still built lane by lane for the baseline target, while the shuffle becomes one broadcast.
// Kernels therefore never mix scalars into vector arithmetic directly.
template <typename V>
DL_DELTANET_INLINE V splat(float x) {
    if constexpr (sizeof(V) == sizeof(float)) {
        return x;
    } else {
        V v{};
        v[0] = x;
        return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
    }
}

// Decay factors below this are flushed to zero. They can no longer move a float sum of terms of
// ordinary size, and left alone their products go subnormal, which costs ~100 cycles an operation
// on many x86 cores (a chunk of 64 tokens with strong decays ran 15x slower).
constexpr float kTinyDecay = 1e-20f;

DL_DELTANET_INLINE float flush_tiny(float x) {
    return x < kTinyDecay ? 0.0f : x;
}

// While alive, the calling thread flushes subnormal results and operands to zero (x86 MXCSR
// FTZ + DAZ); the previous mode comes back at the end of the scope. Products of two small decayed
// terms still reach the subnormal range, and values that small cannot change a result.
class FlushSubnormals {
  public:
#if defined(__x86_64__) || defined(__SSE__)
    FlushSubnormals() : saved_(_mm_getcsr()) {
        _mm_setcsr(saved_ | 0x8040u);
    }
    ~FlushSubnormals() {
        _mm_setcsr(saved_);
    }

  private:
    unsigned saved_;
#endif
};

}  // namespace dl::cpu::deltanet::simd
