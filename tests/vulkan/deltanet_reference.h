// The DeltaNet window tests' reference, shared with the DeltaNet window speed report
// (bench/vk_speed): the layer in double precision, one position at a time.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dl::vk::test {

struct Reference {
    uint32_t hk, hv, dk, dv, K, conv_dim;
    std::vector<double> w, dt, ssm_a, norm;
    std::vector<std::vector<double>> inputs;  // conv inputs of every position so far
    std::vector<double> S;                    // [hv][dk][dv]
    double eps;

    // Returns the normed conv output (q, k normed; v raw) and y of the next position.
    void step(const float* x, const float* z, const float* bvec, const float* a_row,
              std::vector<double>& conv_out, std::vector<double>& y) {
        inputs.emplace_back(x, x + conv_dim);
        const size_t pos = inputs.size() - 1;
        conv_out.assign(conv_dim, 0.0);
        for (uint32_t c = 0; c < conv_dim; ++c) {
            double s = 0;
            for (uint32_t t = 0; t < K; ++t) {
                long q = (long)pos - (long)(K - 1) + t;
                if (q >= 0) s += w[(size_t)c * K + t] * inputs[q][c];
            }
            conv_out[c] = s / (1 + std::exp(-s));
        }
        for (uint32_t head = 0; head < 2 * hk; ++head) {
            double ss = 0;
            for (uint32_t i = 0; i < dk; ++i)
                ss += conv_out[head * dk + i] * conv_out[head * dk + i];
            double sc = 1 / std::sqrt(ss + 1e-6);
            if (head < hk) sc /= std::sqrt((double)dk);
            for (uint32_t i = 0; i < dk; ++i) conv_out[head * dk + i] *= sc;
        }
        y.assign((size_t)hv * dv, 0.0);
        for (uint32_t h = 0; h < hv; ++h) {
            const uint32_t g = h % hk;
            const double* q = &conv_out[g * dk];
            const double* k = &conv_out[(hk + g) * dk];
            const double* v = &conv_out[2 * hk * dk + h * dv];
            double beta = 1 / (1 + std::exp(-(double)bvec[h]));
            double ap = a_row[h] + dt[h];
            double sp = ap > 20 ? ap : std::log1p(std::exp(ap));
            double decay = std::exp(sp * ssm_a[h]);
            double* Sh = &S[(size_t)h * dk * dv];
            for (size_t i = 0; i < (size_t)dk * dv; ++i) Sh[i] *= decay;
            std::vector<double> o(dv);
            for (uint32_t j = 0; j < dv; ++j) {
                double sk = 0;
                for (uint32_t i = 0; i < dk; ++i) sk += Sh[(size_t)i * dv + j] * k[i];
                double d = beta * (v[j] - sk);
                for (uint32_t i = 0; i < dk; ++i) Sh[(size_t)i * dv + j] += k[i] * d;
                for (uint32_t i = 0; i < dk; ++i) o[j] += Sh[(size_t)i * dv + j] * q[i];
            }
            double ss = 0;
            for (double x2 : o) ss += x2 * x2;
            double sc = 1 / std::sqrt(ss / dv + eps);
            for (uint32_t j = 0; j < dv; ++j) {
                double zz = z[h * dv + j];
                y[(size_t)h * dv + j] = o[j] * sc * norm[j] * zz / (1 + std::exp(-zz));
            }
        }
    }
};

}  // namespace dl::vk::test
