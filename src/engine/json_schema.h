// JSON output held to a JSON Schema (the API's response_format {"type": "json_schema"}): the
// schema compiled to nodes, and SchemaPrefix, which reads the output byte by byte as JsonPrefix
// does and also refuses what the schema rules out: a value of a type the node does not allow, an
// object key it does not list (unless additionalProperties allows others), a '}' before every
// required key, a string outside an enum or const, a fraction in an integer.
//
// The subset: type (a name or a list), properties, required, additionalProperties (a boolean or a
// schema), items, enum and const of strings, anyOf whose choices differ in their values' first
// byte (nullable types), $ref into #/$defs or #/definitions; annotations (title, description,
// default, examples, $schema, $id, strict) are ignored. Any other keyword (a bound, a pattern, a
// format) is refused when compiling, so no schema is silently enforced in part.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/json_prefix.h"

namespace dl {

class JsonSchema {
  public:
    static constexpr int kMaxProperties = 64;  // a bit each in the reader's state
    static constexpr int kMaxEnum = 64;

    // dl::Error naming the keyword or value it cannot take.
    static std::shared_ptr<const JsonSchema> compile(const nlohmann::json& schema);

    enum Type : uint8_t {
        kObject = 1,
        kArray = 2,
        kString = 4,
        kNumber = 8,
        kInteger = 16,
        kBoolean = 32,
        kNull = 64,
        kAny = 127
    };
    struct Property {
        std::string name;  // as it stands between the quotes of JSON text
        int node = 0;
        bool required = false;
    };
    struct Node {
        uint8_t types = kAny;
        std::vector<std::string> strings;  // enum / const: as between the quotes; empty: any
        std::vector<Property> properties;
        int additional = 0;  // the node of keys not listed; -1: none allowed
        int items = 0;
        std::vector<int> any_of;  // choices, by their values' first byte
        int ref = -1;             // the node this one stands for
    };
    std::vector<Node> nodes;  // nodes[0]: any value
    int root = 0;

    // The node a value starting with byte c is held to under node n (through refs and anyOf);
    // -1 when no choice takes such a value.
    int resolve(int n, uint8_t c) const;
};

// JsonPrefix with a schema's checks (no schema: JSON alone). A few hundred bytes of state, copied
// for each candidate token.
class SchemaPrefix {
  public:
    static constexpr int kMaxDepth = 16;

    // schema: null for JSON alone; it must outlive the reader (JsonConstraint holds it).
    explicit SchemaPrefix(const JsonSchema* schema = nullptr) : schema_(schema) {}

    bool feed(uint8_t c);
    bool feed(std::string_view bytes);  // all or nothing
    bool complete() const { return json_.complete(); }
    // Inside a string any plain text may continue (not a key, not an enum's value).
    bool in_free_string() const { return json_.in_plain_string() && !matching_; }

  private:
    bool step(uint8_t c);
    bool structural(uint8_t c, const JsonPrefix& before);
    bool start_value(uint8_t c);
    bool match_byte(uint8_t c);
    bool match_end();
    const std::string& candidate(int i) const;
    int value_node() const;

    struct Frame {
        bool object = false;
        int16_t node = 0;
        int16_t prop = -1;  // an object's key being read or its value: the property, -1: another
        uint64_t used = 0;  // an object's properties given so far
    };
    const JsonSchema* schema_ = nullptr;
    JsonPrefix json_;
    Frame frames_[kMaxDepth];
    int8_t depth_ = 0;
    // A key or an enum's string being read: the candidates still matching and the bytes read.
    bool matching_ = false;
    bool matching_key_ = false;
    bool free_key_ = false;  // a key may also be one not listed
    uint64_t candidates_ = 0;
    uint16_t matched_ = 0;
    int16_t string_node_ = 0;  // the enum's node
    bool integer_ = false;     // the number being read must be an integer
};

}  // namespace dl
