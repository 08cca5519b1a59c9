// The rotary embedding's inverse frequencies (see rope.h).
#include "model/rope.h"

#include <cmath>

#include "model/model.h"
#include "quant/quant.h"

namespace dl {

void rope_inv_freq(float base, int64_t n_rot, const float* freq_divisor, float* inv_freq) {
    for (int64_t j = 0; j < n_rot / 2; ++j) {
        double f = std::pow(double(base), -double(2 * j) / double(n_rot));
        if (freq_divisor) f /= double(freq_divisor[j]);
        inv_freq[j] = static_cast<float>(f);
    }
}

std::vector<float> rope_inv_freq(const Model& model, int64_t n_rot) {
    std::vector<float> divisors;
    if (const Tensor* t = model.rope_freqs) {
        divisors.resize(static_cast<size_t>(t->n_elements()));
        quant::dequantize(t->type, t->data, divisors.data(), t->n_elements());
    }
    std::vector<float> inv(static_cast<size_t>(std::max<int64_t>(1, n_rot / 2)));
    rope_inv_freq(model.hp.rope_base, n_rot, divisors.empty() ? nullptr : divisors.data(),
                  inv.data());
    return inv;
}

}  // namespace dl
