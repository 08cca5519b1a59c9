#include "engine/logit_bias.h"

#include <cmath>
#include <limits>

namespace dl {

LogitBias::LogitBias(std::vector<std::pair<int32_t, float>> bias,
                     std::shared_ptr<TokenConstraint> inner)
    : bias_(std::move(bias)), inner_(std::move(inner)) {}

int64_t LogitBias::mask(std::span<float> logits) {
    for (const auto& [id, b] : bias_) {
        if (id < 0 || (size_t)id >= logits.size()) continue;
        logits[(size_t)id] =
            b <= -100.f ? -std::numeric_limits<float>::infinity() : logits[(size_t)id] + b;
    }
    // (The other rule counts what it allows, whatever the bias left of it: count again.)
    if (inner_) inner_->mask(logits);
    int64_t kept = 0;
    for (float l : logits) kept += l > -std::numeric_limits<float>::infinity();
    return kept;
}

void LogitBias::accept(int32_t token) {
    if (inner_) inner_->accept(token);
}

}  // namespace dl
