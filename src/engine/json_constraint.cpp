#include "engine/json_constraint.h"

#include <algorithm>
#include <limits>

namespace dl {

JsonConstraint::JsonConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                               std::shared_ptr<const JsonSchema> schema)
    : table_(std::move(table)),
      schema_(std::move(schema)),
      schema_json_(schema_.get()),
      think_(std::move(think)) {}

// Whether a token that is not text (the turn's end, a control or added token) may come next.
bool JsonConstraint::allowed_special(int32_t id) const {
    const bool end = table_->kind[id] == TokenTable::kEndOfTurn;
    if (think_.inside()) return !end;  // the JSON is still to come
    if (end) return complete();
    return think_.may_open(table_->text(id), json_started_);
}

template <class Reader>
int64_t JsonConstraint::mask_with(const Reader& reader, std::span<float> logits) {
    constexpr float kOut = -std::numeric_limits<float>::infinity();
    const int64_t n = std::min<int64_t>((int64_t)logits.size(), table_->size());
    for (size_t id = (size_t)n; id < logits.size(); ++id) logits[id] = kOut;
    int64_t kept = 0;
    // The tokens that are not text, one by one (a few hundred at most), then the text tokens a
    // group of one first byte at a time.
    for (int32_t id : table_->not_text) {
        if (id >= n) continue;
        if (allowed_special(id))
            ++kept;
        else
            logits[id] = kOut;
    }
    const bool free = think_.inside();
    const bool plain_string = !free && reader.in_free_string();
    for (int b = 0; b < 256; ++b) {
        Reader first = reader;
        const bool open = free || (!reader.complete() && first.feed((uint8_t)b));
        for (int32_t id : table_->by_first[b]) {
            if (id >= n) continue;
            bool ok = open;
            if (ok && !free && !(plain_string && table_->json_plain[id])) {
                Reader next = first;
                ok = next.feed(table_->text(id).substr(1));
            }
            if (ok)
                ++kept;
            else
                logits[id] = kOut;
        }
    }
    return kept;
}

int64_t JsonConstraint::mask(std::span<float> logits) {
    // JSON alone on the recognizer of a few words: copied for each candidate token, it costs a
    // tenth of the schema's reader.
    return schema_ ? mask_with(schema_json_, logits) : mask_with(json_, logits);
}

void JsonConstraint::accept(int32_t token) {
    if (token < 0 || token >= table_->size()) return;
    const std::string_view t = table_->text(token);
    if (think_.accept(t, json_started_) || table_->kind[token] != TokenTable::kText) return;
    if (schema_ ? schema_json_.feed(t) : json_.feed(t))
        for (char c : t)
            json_started_ = json_started_ || !(c == ' ' || c == '\t' || c == '\n' || c == '\r');
}

}  // namespace dl
