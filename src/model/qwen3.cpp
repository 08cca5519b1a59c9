// Qwen3 (dense): llama blocks plus an RMS norm of every query and key head before the rotary
// embedding, which is NeoX-style (pairs (j, j + head_dim/2)) since its files are not permuted.
#include "model/builder.h"

namespace dl {

void load_qwen3(ModelBuilder& b) {
    load_llama_like(b, true);
}

}  // namespace dl
