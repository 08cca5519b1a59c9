#include "engine/prefix_constraint.h"

#include <algorithm>
#include <limits>

namespace dl {

PrefixConstraint::PrefixConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                                   std::vector<std::string> openings)
    : table_(std::move(table)), think_(std::move(think)), left_(std::move(openings)) {
    // An empty opening leaves the output free from the start.
    if (std::any_of(left_.begin(), left_.end(), [](const std::string& s) { return s.empty(); }))
        left_.clear();
    update_first();
}

void PrefixConstraint::update_first() {
    first_.reset();
    for (const std::string& s : left_) first_.set((uint8_t)s[0]);
}

bool PrefixConstraint::allowed(std::string_view t, uint8_t kind) const {
    if (think_.inside()) return kind != TokenTable::kEndOfTurn;
    if (left_.empty()) return true;
    if (kind == TokenTable::kEndOfTurn || t.empty()) return false;
    if (think_.may_open(t, started_)) return true;
    // A token within what is left of some opening, or one that finishes it and goes on in free
    // text.
    return std::any_of(left_.begin(), left_.end(), [&](const std::string& s) {
        return std::string_view(s).starts_with(t) ||
               (kind == TokenTable::kText && t.starts_with(s));
    });
}

int64_t PrefixConstraint::mask(std::span<float> logits) {
    constexpr float kOut = -std::numeric_limits<float>::infinity();
    const int64_t n = std::min<int64_t>((int64_t)logits.size(), table_->size());
    for (size_t id = (size_t)n; id < logits.size(); ++id) logits[id] = kOut;
    if (left_.empty() && !think_.inside()) return n;
    int64_t kept = 0;
    for (int64_t id = 0; id < n; ++id) {
        const uint8_t kind = table_->kind[id];
        // Text that starts with no opening's next byte cannot continue one.
        const bool maybe = think_.inside() || kind != TokenTable::kText ||
                           first_.test((uint8_t)table_->text((int32_t)id)[0]);
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
    std::vector<std::string> still;
    for (std::string& s : left_) {
        if (t.starts_with(s)) {  // written: the output is free
            left_.clear();
            first_.reset();
            return;
        }
        if (std::string_view(s).starts_with(t)) still.push_back(s.substr(t.size()));
    }
    left_ = std::move(still);
    update_first();
}

}  // namespace dl
