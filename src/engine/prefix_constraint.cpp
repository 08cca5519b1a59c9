#include "engine/prefix_constraint.h"

#include <algorithm>
#include <limits>

namespace dl {

PrefixConstraint::PrefixConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                                   std::string opening)
    : table_(std::move(table)), think_(std::move(think)), left_(std::move(opening)) {}

bool PrefixConstraint::allowed(std::string_view t, uint8_t kind) const {
    if (think_.inside()) return kind != TokenTable::kEndOfTurn;
    if (left_.empty()) return true;
    if (kind == TokenTable::kEndOfTurn || t.empty()) return false;
    if (think_.may_open(t, started_)) return true;
    // A token within what is left, or one that finishes it and goes on in free text.
    return std::string_view(left_).starts_with(t) ||
           (kind == TokenTable::kText && t.starts_with(left_));
}

int64_t PrefixConstraint::mask(std::span<float> logits) {
    constexpr float kOut = -std::numeric_limits<float>::infinity();
    const int64_t n = std::min<int64_t>((int64_t)logits.size(), table_->size());
    for (size_t id = (size_t)n; id < logits.size(); ++id) logits[id] = kOut;
    if (left_.empty() && !think_.inside()) return n;
    int64_t kept = 0;
    for (int64_t id = 0; id < n; ++id) {
        const uint8_t kind = table_->kind[id];
        // Text that does not start with the next byte cannot continue the opening.
        const bool maybe = think_.inside() || kind != TokenTable::kText ||
                           (uint8_t)table_->text((int32_t)id)[0] == (uint8_t)left_[0];
        if (maybe && allowed(table_->text((int32_t)id), kind))
            ++kept;
        else
            logits[id] = kOut;
    }
    return kept;
}

void PrefixConstraint::accept(int32_t token) {
    if (token < 0 || token >= table_->size()) return;
    const std::string_view t = table_->text(token);
    if (think_.accept(t, started_) || left_.empty()) return;
    started_ = true;
    left_.erase(0, std::min(left_.size(), t.size()));
}

}  // namespace dl
