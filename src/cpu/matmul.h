// Matrix products of quantized weights with rows of activations: y[t] = W x[t] for T tokens.
// Activations are converted once to the dot format the weight type wants (Q8_0, Q8_K, F32 ...)
// and the conversion is shared by every matrix that reads the same input. Work is threaded over
// blocks of output rows; within a block every token is taken before the next block, so a weight
// block is read from memory once per window, not once per token.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "quant/types.h"

namespace dl {
struct Tensor;
class ThreadPool;
}  // namespace dl

namespace dl::cpu {

// One input of T rows of n floats and its conversions to dot formats (made on first use).
class Activations {
  public:
    // Sizes the buffers for up to max_tokens rows of up to max_n floats (the only allocation).
    void reserve(int64_t max_tokens, int64_t max_n);
    // Points at new input; forgets earlier conversions. x must stay valid until the next set().
    void set(const float* x, int64_t n_tokens, int64_t n);
    // The rows in the dot format of weights of type wt (quant::vec_dot_type), converting them
    // now if no earlier matrix needed the same format; row r starts at r * row_size(format, n).
    const uint8_t* for_weights(QType wt, ThreadPool& pool);

    const float* x() const { return x_; }
    int64_t n_tokens() const { return n_tokens_; }
    int64_t n() const { return n_; }

  private:
    struct Slot {
        QType type = QType::F32;
        bool valid = false;
        std::vector<uint8_t> bytes;
    };
    const float* x_ = nullptr;
    int64_t n_tokens_ = 0, n_ = 0;
    int64_t max_tokens_ = 0, max_n_ = 0;
    std::array<Slot, 4> slots_;
};

// y[t * ldy + r] = (W x[t])[r] for r < W.rows(), t < x.n_tokens(). W.cols() == x.n().
void matmul(const Tensor& W, Activations& x, float* y, int64_t ldy, ThreadPool& pool);

}  // namespace dl::cpu
