// Threaded matrix products over quantized weights (see matmul.h).
#include "cpu/matmul.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/threads.h"
#include "model/model.h"
#include "quant/quant.h"

namespace dl::cpu {

void Activations::reserve(int64_t max_tokens, int64_t max_n) {
    max_tokens_ = max_tokens;
    max_n_ = max_n;
    // The widest dot format (Q8_K, Q8_0 ...) never exceeds 4 bytes per element plus a block
    // header; size for F32 plus slack per block to cover every format.
    size_t per_row = static_cast<size_t>(max_n) * 4 + 64 + static_cast<size_t>(max_n) / 8;
    for (Slot& s : slots_) {
        s.bytes.assign(per_row * static_cast<size_t>(max_tokens), 0);
        s.valid = false;
    }
}

void Activations::set(const float* x, int64_t n_tokens, int64_t n) {
    DL_ASSERT(n_tokens <= max_tokens_ && n <= max_n_);
    x_ = x;
    n_tokens_ = n_tokens;
    n_ = n;
    for (Slot& s : slots_) s.valid = false;
}

const uint8_t* Activations::for_weights(QType wt, ThreadPool& pool) {
    const QType t = quant::vec_dot_type(wt);
    if (t == QType::F32) return reinterpret_cast<const uint8_t*>(x_);
    Slot* slot = nullptr;
    for (Slot& s : slots_) {
        if (s.valid && s.type == t) return s.bytes.data();
        if (!s.valid && !slot) slot = &s;
    }
    DL_ASSERT(slot != nullptr);
    size_t rb = row_size(t, n_);
    DL_ASSERT(rb * static_cast<size_t>(n_tokens_) <= slot->bytes.size());
    uint8_t* dst = slot->bytes.data();
    const float* x = x_;
    int64_t n = n_;
    pool.for_range(n_tokens_, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) quant::quantize_activations(wt, x + i * n, dst + i * rb, n);
    });
    slot->type = t;
    slot->valid = true;
    return dst;
}

void matmul(const Tensor& W, Activations& x, float* y, int64_t ldy, ThreadPool& pool) {
    const int64_t rows = W.rows(), n = W.cols(), T = x.n_tokens();
    DL_ASSERT(n == x.n());
    const QType wt = W.type;
    const QType at = quant::vec_dot_type(wt);
    const uint8_t* xa = x.for_weights(wt, pool);
    const size_t xrb = row_size(at, n);
    const size_t wrb = W.row_bytes();
    const uint8_t* wd = W.data;
    // Blocks of rows small enough that a block of weights stays in L2 while every token of the
    // window passes over it, and numerous enough to balance the threads.
    const int64_t n_threads = pool.size();
    int64_t block = std::max<int64_t>(1, rows / (n_threads * 8));
    block = std::min<int64_t>(block, std::max<int64_t>(1, int64_t(256 * 1024) / int64_t(wrb)));
    const int64_t n_blocks = (rows + block - 1) / block;
    pool.run(n_blocks, [&](int64_t bi, int) {
        const int64_t r0 = bi * block, r1 = std::min(rows, r0 + block);
        quant::vec_dot_rows(wt, wd + r0 * wrb, wrb, static_cast<int>(r1 - r0), xa, xrb,
                            static_cast<int>(T), y + r0, static_cast<size_t>(ldy), n);
    });
}

}  // namespace dl::cpu
