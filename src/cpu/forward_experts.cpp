// The mixture-of-experts steps of the chain's forward pass (model/forward_pass.h): each row's
// router probabilities (softmax over every expert), its top k renormalised to sum to one, and
// the chosen experts' SwiGLU outputs weighted and summed; then the shared expert's output scaled
// by sigmoid(w · xn). The rows of a pass are grouped by expert, so each chosen expert's weights
// are read once per pass however many rows chose it, and every row adds its experts' outputs in
// ascending expert order, so its result does not depend on the other rows in the pass.
#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "cpu/forward.h"
#include "cpu/ops.h"

namespace dl::cpu {

namespace {

// The k most probable experts of one row of router logits, best first (the lower index first
// on a tie, as torch.topk orders them), with weights renormalised to sum to one.
void route(const float* logits, int64_t n_expert, int64_t k, int32_t* ids, float* weights,
           std::vector<int32_t>& order) {
    float mx = -INFINITY;
    for (int64_t e = 0; e < n_expert; ++e) mx = std::max(mx, logits[e]);
    order.resize((size_t)n_expert);
    for (int64_t e = 0; e < n_expert; ++e) order[(size_t)e] = (int32_t)e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    // The softmax's normaliser cancels in the renormalisation over the chosen k, but it is
    // computed as the reference computes it so that the weights round the same way.
    double sum_all = 0;
    for (int64_t e = 0; e < n_expert; ++e) sum_all += std::exp(double(logits[e]) - mx);
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
        ids[j] = order[(size_t)j];
        weights[j] = static_cast<float>(std::exp(double(logits[ids[j]]) - mx) / sum_all);
        sum += weights[j];
    }
    for (int64_t j = 0; j < k; ++j) weights[j] /= sum;
}

}  // namespace

void moe_experts(Pass& p, const LayerParams& lp) {
    const Hparams& hp = p.model.hp;
    Workspace& ws = p.ws;
    const int64_t T = p.T, X = hp.n_expert, K = hp.n_expert_used, F = hp.n_ff_exp;
    const int64_t E = hp.n_embd;
    std::vector<int32_t> order;
    for (int64_t t = 0; t < T; ++t)
        route(ws.router.data() + t * X, X, K, ws.expert_ids.data() + t * K,
              ws.expert_weights.data() + t * K, order);
    std::fill(ws.out.begin(), ws.out.begin() + T * E, 0.f);
    // The rows that chose expert e, in row order, and the weight each gave it.
    for (int64_t e = 0; e < X; ++e) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < K; ++j)
                if (ws.expert_ids[t * K + j] == e) {
                    ws.expert_rows[n] = (int32_t)t;
                    std::copy_n(ws.xn.data() + t * E, E, ws.xe.data() + n * E);
                    ws.expert_weights_row[n] = ws.expert_weights[t * K + j];
                    ++n;
                }
        if (n == 0) continue;
        ws.act_e.set(ws.xe.data(), n, E);
        matmul(lp.gate_e[e], ws.act_e, ws.ge.data(), F, p.pool);
        matmul(lp.up_e[e], ws.act_e, ws.ue.data(), F, p.pool);
        swiglu(ws.ge.data(), ws.ue.data(), ws.ge.data(), n * F);
        ws.act_e.set(ws.ge.data(), n, F);
        matmul(lp.down_e[e], ws.act_e, ws.de.data(), E, p.pool);
        for (int64_t r = 0; r < n; ++r) {
            float* out = ws.out.data() + ws.expert_rows[r] * E;
            const float* d = ws.de.data() + r * E;
            const float w = ws.expert_weights_row[r];
            for (int64_t i = 0; i < E; ++i) out[i] += w * d[i];
        }
    }
}

void shared_expert_gate(Pass& p, const LayerParams& lp) {
    const int64_t E = p.model.hp.n_embd;
    Workspace& ws = p.ws;
    for (int64_t t = 0; t < p.T; ++t) {
        const float* x = ws.xn.data() + t * E;
        double z = 0;
        for (int64_t i = 0; i < E; ++i) z += double(x[i]) * lp.shexp_gate[(size_t)i];
        const float g = sigmoid(static_cast<float>(z));
        float* out = ws.out.data() + t * E;
        const float* sh = ws.shared.data() + t * E;
        for (int64_t i = 0; i < E; ++i) out[i] += g * sh[i];
    }
}

}  // namespace dl::cpu
