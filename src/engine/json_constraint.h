// Output constrained to JSON (the API's response_format {"type": "json_object"}, or
// "json_schema" with a schema): before each sampled token, every token whose bytes cannot
// continue a JSON object (json_prefix.h) that the schema admits (json_schema.h) is masked out, and
// once the object is closed only the end of the turn may follow, so what the model writes parses.
// A thinking block, where the model writes one, comes first and is free.
#pragma once

#include <memory>
#include <span>

#include "engine/json_schema.h"
#include "engine/token_constraint.h"
#include "engine/token_table.h"

namespace dl {

class JsonConstraint : public TokenConstraint {
  public:
    JsonConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                   std::shared_ptr<const JsonSchema> schema = nullptr);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    bool allowed_special(int32_t id) const;
    bool complete() const { return schema_ ? schema_json_.complete() : json_.complete(); }
    template <class Reader>
    int64_t mask_with(const Reader& reader, std::span<float> logits);
    std::shared_ptr<const TokenTable> table_;
    std::shared_ptr<const JsonSchema> schema_;
    JsonPrefix json_;           // without a schema
    SchemaPrefix schema_json_;  // with one
    ThinkBlock think_;
    bool json_started_ = false;
};

}  // namespace dl
