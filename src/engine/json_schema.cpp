#include "engine/json_schema.h"

#include <map>

#include "core/error.h"

namespace dl {

using json = nlohmann::json;

namespace {

// The text between the quotes of a string as JSON writes it.
std::string encoded(const std::string& s) {
    const std::string q = json(s).dump(-1, ' ', false, json::error_handler_t::strict);
    return q.substr(1, q.size() - 2);
}

// The types whose values may start with byte c.
uint8_t types_of_first(uint8_t c) {
    switch (c) {
        case '{':
            return JsonSchema::kObject;
        case '[':
            return JsonSchema::kArray;
        case '"':
            return JsonSchema::kString;
        case 't':
        case 'f':
            return JsonSchema::kBoolean;
        case 'n':
            return JsonSchema::kNull;
        default:
            return c == '-' || (c >= '0' && c <= '9') ? JsonSchema::kNumber | JsonSchema::kInteger
                                                      : 0;
    }
}

// The first bytes a type's values take, as a class each: numbers and integers share theirs.
uint8_t first_byte_classes(uint8_t types) {
    uint8_t c = types & ~(JsonSchema::kNumber | JsonSchema::kInteger);
    if (types & (JsonSchema::kNumber | JsonSchema::kInteger)) c |= JsonSchema::kNumber;
    return c;
}

struct Compiler {
    const json& doc;
    JsonSchema& out;
    std::map<std::string, int> refs;  // a $ref's target, compiled once (recursion allowed)
    int depth = 0;

    int add() {
        out.nodes.emplace_back();
        return (int)out.nodes.size() - 1;
    }

    int compile(const json& s) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return 0;
            fail("json_schema: the schema 'false' admits no value");
        }
        const int n = add();
        into(s, n);
        return n;
    }

    int ref(const std::string& r) {
        if (auto it = refs.find(r); it != refs.end()) return it->second;
        if (r != "#" && r.rfind("#/$defs/", 0) != 0 && r.rfind("#/definitions/", 0) != 0)
            fail("json_schema: $ref '{}' (only #, #/$defs/... and #/definitions/...)", r);
        const json::json_pointer ptr(r.substr(1));
        if (!doc.contains(ptr)) fail("json_schema: $ref '{}' points nowhere", r);
        const int n = add();
        refs[r] = n;
        const json& target = doc.at(ptr);
        if (target.is_boolean()) {
            out.nodes[(size_t)n].ref = compile(target);
        } else {
            into(target, n);
        }
        return n;
    }

    // The types a node's values may have, through refs and choices.
    uint8_t types(int n, int hops = 0) const {
        const JsonSchema::Node& node = out.nodes[(size_t)n];
        if (hops > 64) return JsonSchema::kAny;
        if (node.ref >= 0) return types(node.ref, hops + 1);
        if (node.any_of.empty()) return node.types;
        uint8_t t = 0;
        for (int a : node.any_of) t |= types(a, hops + 1);
        return t;
    }

    void into(const json& s, int n) {
        if (!s.is_object()) fail("json_schema: a schema must be an object or a boolean");
        if (++depth > 64) fail("json_schema: nested deeper than 64 levels");
        JsonSchema::Node node;
        bool typed = false;
        for (const auto& [key, v] : s.items()) {
            if (key == "title" || key == "description" || key == "default" || key == "examples" ||
                key == "$schema" || key == "$id" || key == "$comment" || key == "strict" ||
                key == "$defs" || key == "definitions") {
                continue;
            } else if (key == "type") {
                typed = true;
                node.types = 0;
                const json list = v.is_array() ? v : json::array({v});
                for (const json& t : list) {
                    const std::string name = t.is_string() ? t.get<std::string>() : "";
                    if (name == "object")
                        node.types |= JsonSchema::kObject;
                    else if (name == "array")
                        node.types |= JsonSchema::kArray;
                    else if (name == "string")
                        node.types |= JsonSchema::kString;
                    else if (name == "number")
                        node.types |= JsonSchema::kNumber | JsonSchema::kInteger;
                    else if (name == "integer")
                        node.types |= JsonSchema::kInteger;
                    else if (name == "boolean")
                        node.types |= JsonSchema::kBoolean;
                    else if (name == "null")
                        node.types |= JsonSchema::kNull;
                    else
                        fail("json_schema: unknown type {}", t.dump());
                }
            } else if (key == "properties") {
                if (!v.is_object()) fail("json_schema: 'properties' must be an object");
                if (v.size() > (size_t)JsonSchema::kMaxProperties)
                    fail("json_schema: more than {} properties in one object",
                         JsonSchema::kMaxProperties);
                for (const auto& [name, sub] : v.items()) {
                    const int child = compile(sub);
                    node.properties.push_back({encoded(name), child, false});
                }
            } else if (key == "required") {
                // Marked below, once the properties are known.
            } else if (key == "additionalProperties") {
                node.additional = v.is_boolean() ? (v.get<bool>() ? 0 : -1) : compile(v);
            } else if (key == "items") {
                if (v.is_array()) fail("json_schema: 'items' as a list (tuples) is not supported");
                node.items = compile(v);
            } else if (key == "enum" || key == "const") {
                const json list = key == "enum" ? v : json::array({v});
                if (!list.is_array() || list.empty() || list.size() > (size_t)JsonSchema::kMaxEnum)
                    fail("json_schema: '{}' must list 1 to {} values", key, JsonSchema::kMaxEnum);
                for (const json& e : list) {
                    if (!e.is_string())
                        fail("json_schema: '{}' values other than strings are not supported", key);
                    node.strings.push_back(encoded(e.get<std::string>()));
                }
            } else if (key == "anyOf") {
                if (!v.is_array() || v.empty()) fail("json_schema: 'anyOf' must be a list");
                for (const json& sub : v) node.any_of.push_back(compile(sub));
            } else if (key == "$ref") {
                if (!v.is_string()) fail("json_schema: '$ref' must be a string");
                node.ref = ref(v.get<std::string>());
            } else {
                fail("json_schema: '{}' is not supported (it would not be enforced)", key);
            }
        }
        if (auto r = s.find("required"); r != s.end()) {
            if (!r->is_array()) fail("json_schema: 'required' must be a list");
            for (const json& name : *r) {
                bool found = false;
                for (JsonSchema::Property& p : node.properties)
                    if (name.is_string() && p.name == encoded(name.get<std::string>()))
                        p.required = found = true;
                if (!found) fail("json_schema: required {} is not in 'properties'", name.dump());
            }
        }
        if (!node.strings.empty()) {
            if (typed && !(node.types & JsonSchema::kString))
                fail("json_schema: string values for a type without strings");
            node.types = JsonSchema::kString;
        } else if (!typed && (!node.properties.empty() || s.contains("additionalProperties"))) {
            node.types = JsonSchema::kObject;
        }
        out.nodes[(size_t)n] = std::move(node);
        // The choices must be told apart by a value's first byte.
        uint8_t seen = 0;
        for (int a : out.nodes[(size_t)n].any_of) {
            const uint8_t c = first_byte_classes(types(a));
            if (seen & c)
                fail(
                    "json_schema: 'anyOf' choices of the same kind of value (only choices a "
                    "value's first byte tells apart, as a type and null, are supported)");
            seen |= c;
        }
        --depth;
    }
};

// Which nodes some finite value satisfies: the least fixed point, from none, of "a choice or
// the target does; or a type other than object (an array may be empty); or an object whose
// required properties all do". A node that none does would leave the output with no way on
// once it is reached (the schema {"$ref": "#"}, a property of type []).
std::vector<bool> satisfiable(const JsonSchema& s) {
    std::vector<bool> sat(s.nodes.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < s.nodes.size(); ++i) {
            if (sat[i]) continue;
            const JsonSchema::Node& n = s.nodes[i];
            bool ok = false;
            if (n.ref >= 0) {
                ok = sat[(size_t)n.ref];
            } else if (!n.any_of.empty()) {
                for (int a : n.any_of) ok = ok || sat[(size_t)a];
            } else if (n.types & ~JsonSchema::kObject) {
                ok = true;
            } else if (n.types & JsonSchema::kObject) {
                ok = true;
                for (const JsonSchema::Property& p : n.properties)
                    if (p.required) ok = ok && sat[(size_t)p.node];
            }
            if (ok) sat[i] = changed = true;
        }
    }
    return sat;
}

}  // namespace

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema) {
    auto out = std::make_shared<JsonSchema>();
    out->nodes.emplace_back();  // 0: any value
    Compiler c{schema, *out, {}};
    out->root = c.compile(schema);
    if (!(c.types(out->root) & kObject)) fail("json_schema: the top level must be an object");
    const std::vector<bool> sat = satisfiable(*out);
    for (size_t i = 0; i < sat.size(); ++i)
        if (!sat[i])
            fail(
                "json_schema: part of the schema admits no value (an empty type list, or a $ref "
                "or required property that leads back to itself with no way to end)");
    return out;
}

int JsonSchema::resolve(int n, uint8_t c) const {
    for (int hops = 0; hops < 64; ++hops) {
        const Node& node = nodes[(size_t)n];
        if (node.ref >= 0) {
            n = node.ref;
            continue;
        }
        if (!node.any_of.empty()) {
            for (int a : node.any_of)
                if (int r = resolve(a, c); r >= 0) return r;
            return -1;
        }
        return (node.types & types_of_first(c)) ? n : -1;
    }
    return -1;
}

bool SchemaPrefix::feed(uint8_t c) {
    SchemaPrefix next = *this;
    if (!next.step(c)) return false;
    *this = next;
    return true;
}

bool SchemaPrefix::feed(std::string_view bytes) {
    SchemaPrefix next = *this;
    for (char c : bytes)
        if (!next.step((uint8_t)c)) return false;
    *this = next;
    return true;
}

bool SchemaPrefix::step(uint8_t c) {
    if (!schema_) return json_.feed(c);
    const JsonPrefix before = json_;
    if (!json_.feed(c)) return false;
    if (before.in_string()) {
        if (json_.in_string()) return !matching_ || match_byte(c);
        return !matching_ || match_end();  // the closing quote
    }
    if (before.in_literal()) return true;
    if (before.in_number() && json_.in_number())
        return !(integer_ && (c == '.' || c == 'e' || c == 'E'));
    return structural(c, before);
}

bool SchemaPrefix::structural(uint8_t c, const JsonPrefix& before) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
    if (before.expects_value() && c != ']') return start_value(c);
    if (depth_ == 0) return true;
    Frame& f = frames_[depth_ - 1];
    const JsonSchema::Node& node = schema_->nodes[(size_t)f.node];
    const uint64_t all =
        node.properties.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << node.properties.size()) - 1;
    if (before.expects_key() && c == '"') {
        matching_ = matching_key_ = true;
        free_key_ = node.additional >= 0;
        candidates_ = all;
        matched_ = 0;
        return (all & ~f.used) != 0 || free_key_;
    }
    if (c == '}') {
        for (size_t i = 0; i < node.properties.size(); ++i)
            if (node.properties[i].required && !(f.used >> i & 1)) return false;
        --depth_;
        return true;
    }
    if (c == ']') {
        --depth_;
        return true;
    }
    if (c == ',' && f.object) return (all & ~f.used) != 0 || node.additional >= 0;
    return true;
}

int SchemaPrefix::value_node() const {
    if (depth_ == 0) return schema_->root;
    const Frame& f = frames_[depth_ - 1];
    const JsonSchema::Node& node = schema_->nodes[(size_t)f.node];
    if (!f.object) return node.items;
    return f.prop >= 0 ? node.properties[(size_t)f.prop].node : node.additional;
}

bool SchemaPrefix::start_value(uint8_t c) {
    const int v = value_node();
    const int n = v < 0 ? -1 : schema_->resolve(v, c);
    if (n < 0) return false;
    const JsonSchema::Node& node = schema_->nodes[(size_t)n];
    if (c == '{' || c == '[') {
        if (depth_ >= kMaxDepth) return false;
        frames_[depth_++] = Frame{c == '{', (int16_t)n, -1, 0};
        return true;
    }
    if (c == '"' && !node.strings.empty()) {
        matching_ = true;
        matching_key_ = free_key_ = false;
        candidates_ =
            node.strings.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << node.strings.size()) - 1;
        matched_ = 0;
        string_node_ = (int16_t)n;
    }
    integer_ = !(node.types & JsonSchema::kNumber);
    return true;
}

const std::string& SchemaPrefix::candidate(int i) const {
    if (matching_key_)
        return schema_->nodes[(size_t)frames_[depth_ - 1].node].properties[(size_t)i].name;
    return schema_->nodes[(size_t)string_node_].strings[(size_t)i];
}

bool SchemaPrefix::match_byte(uint8_t c) {
    uint64_t keep = 0;
    for (int i = 0; i < 64 && (candidates_ >> i); ++i) {
        if (!(candidates_ >> i & 1)) continue;
        const std::string& s = candidate(i);
        if (matched_ < s.size() && (uint8_t)s[matched_] == c) keep |= uint64_t{1} << i;
    }
    candidates_ = keep;
    ++matched_;
    const uint64_t open = matching_key_ ? ~frames_[depth_ - 1].used : ~uint64_t{0};
    return (candidates_ & open) != 0 || free_key_;
}

bool SchemaPrefix::match_end() {
    matching_ = false;
    int exact = -1;
    for (int i = 0; i < 64 && (candidates_ >> i); ++i)
        if ((candidates_ >> i & 1) && candidate(i).size() == matched_) exact = i;
    if (!matching_key_) return exact >= 0;
    Frame& f = frames_[depth_ - 1];
    if (exact >= 0) {
        if (f.used >> exact & 1) return false;  // a key given twice
        f.used |= uint64_t{1} << exact;
        f.prop = (int16_t)exact;
        return true;
    }
    f.prop = -1;
    return free_key_;
}

}  // namespace dl
