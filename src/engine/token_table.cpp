#include "engine/token_table.h"

#include "engine/json_prefix.h"
#include "tokenizer/tokenizer.h"

namespace dl {

TokenTable::TokenTable(const tokenizer::Tokenizer& tok) {
    const int32_t n = tok.n_vocab();
    offsets_.reserve((size_t)n + 1);
    kind.resize((size_t)n);
    json_plain.resize((size_t)n);
    const std::vector<tokenizer::TokenType>& types = tok.vocab().types;
    for (int32_t id = 0; id < n; ++id) {
        offsets_.push_back((uint32_t)bytes_.size());
        const std::string t = tok.token_text(id);
        bytes_ += t;
        const bool added =
            (size_t)id < types.size() && (types[id] == tokenizer::TokenType::USER_DEFINED ||
                                          types[id] == tokenizer::TokenType::UNUSED);
        if (tok.is_eog(id)) {
            kind[id] = kEndOfTurn;
            not_text.push_back(id);
        } else if (tok.is_control(id) || added || t.empty()) {
            kind[id] = kSpecial;
            not_text.push_back(id);
        } else {
            kind[id] = kText;
            JsonPrefix s;
            json_plain[id] = s.feed("{\"") && s.feed(t) && s.in_plain_string();
            by_first[(uint8_t)t[0]].push_back(id);
        }
    }
    offsets_.push_back((uint32_t)bytes_.size());
}

}  // namespace dl
