// Rendering a conversation through the model's chat template, and tokenizing the result so that
// text the client sent can never become a control token.
//
// How the markup is told from the client's text: every string the client sent (message
// contents, reasoning, tool-call names, arguments and their keys, tool definitions, template
// kwargs) is escaped before rendering: each control token's text in it is replaced by a marker
// (U+10FFFD, private use) followed by one private-use code point that names the token, and a
// literal marker by two markers. The escaped strings hold no control-token text, so in the
// escaped rendering every control-token text is the template's own. Tokenizing walks that
// rendering: control-token text becomes its id, everything between (escapes restored) is
// tokenized as plain text. Templates inspect and transform contents (trim, split on </think>,
// startswith), which an opaque placeholder per message would break; the escapes change a
// string only where it holds control-token text, and when one does, the plain rendering is made
// too and must equal the escaped one with the escapes restored, or the request is refused (a
// template that cuts or rewrites such text). Taint tracking inside the interpreter would be
// exact too, but would touch every string operation of it; this keeps the interpreter as it is.
// What this cannot see is a template that itself builds control-token text out of client text
// by rewriting it (replace, a change of case) or by completing a fragment at its end with
// markup. Of the published templates in tests/data/templates only Qwen3-Coder rewrites client
// text, and only the property names of tool schemas (removing '$'), which the API client
// writes itself.
#include "engine/chat_template.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace dl {

using ojson = nlohmann::ordered_json;

namespace {

constexpr char32_t kMarker = 0x10FFFD;
constexpr char32_t kFirstTokenCode = 0xF0000;  // Supplementary Private Use Area-A
constexpr size_t kMaxTokenCodes = 0xFFFFE - 0xF0000;

void put_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

// The four-byte code point at s[i], or 0 when there is none.
char32_t four_byte_at(std::string_view s, size_t i) {
    if (i + 4 > s.size()) return 0;
    const auto b = [&](size_t k) { return char32_t(uint8_t(s[i + k])); };
    if ((b(0) & 0xF8) != 0xF0) return 0;
    for (size_t k = 1; k < 4; ++k)
        if ((b(k) & 0xC0) != 0x80) return 0;
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

std::string marker_text() {
    std::string s;
    put_utf8(s, kMarker);
    return s;
}

const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};

std::string where(size_t i, const char* field) {
    return "messages[" + std::to_string(i) + "]" + (field[0] ? "." : "") + field;
}

// An object from a JSON string (tool-call arguments), or the object itself.
ojson arguments_object(const ojson& a, const std::string& at) {
    if (a.is_null()) return ojson::object();
    if (a.is_object()) return a;
    if (!a.is_string()) fail("{} must be a JSON object or a string holding one", at);
    const std::string& s = a.get_ref<const std::string&>();
    if (s.find_first_not_of(" \t\r\n") == std::string::npos) return ojson::object();
    ojson parsed = ojson::parse(s, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object())
        fail("{} is not a JSON object: the arguments must be a JSON object as text", at);
    return parsed;
}

}  // namespace

ojson normalize_messages(const ojson& messages) {
    if (!messages.is_array()) fail("messages must be an array of message objects");
    if (messages.empty()) fail("messages must hold at least one message");
    ojson out = ojson::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const ojson& m = messages[i];
        if (!m.is_object()) fail("{} must be an object", where(i, ""));
        ojson n = m;
        auto role_it = m.find("role");
        if (role_it == m.end() || !role_it->is_string())
            fail("{} must be a string", where(i, "role"));
        std::string role = role_it->get<std::string>();
        if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles))
            fail("{} must be system, developer, user, assistant or tool, not '{}'",
                 where(i, "role"), role);
        if (role == "developer") role = "system";
        n["role"] = role;

        auto content = m.find("content");
        if (content == m.end() || content->is_null()) {
            if (role != "assistant") fail("{} is missing", where(i, "content"));
            n["content"] = "";
        } else if (content->is_array()) {
            std::string text;
            for (size_t p = 0; p < content->size(); ++p) {
                const ojson& part = (*content)[p];
                const std::string at = where(i, "content") + "[" + std::to_string(p) + "]";
                if (!part.is_object()) fail("{} must be an object", at);
                auto type = part.find("type");
                if (type == part.end() || !type->is_string() || *type != "text")
                    fail(
                        "{} must be a text part ({{\"type\": \"text\", \"text\": ...}}): only "
                        "text is supported",
                        at);
                auto t = part.find("text");
                if (t == part.end() || !t->is_string()) fail("{}.text must be a string", at);
                text += t->get_ref<const std::string&>();
            }
            n["content"] = text;
        } else if (!content->is_string()) {
            fail("{} must be a string, null or an array of text parts", where(i, "content"));
        }

        if (auto rc = m.find("reasoning_content"); rc != m.end()) {
            if (rc->is_null())
                n.erase("reasoning_content");
            else if (!rc->is_string())
                fail("{} must be a string or null", where(i, "reasoning_content"));
        }
        for (const char* key : {"tool_call_id", "name"}) {
            auto it = m.find(key);
            if (it != m.end() && !it->is_string() && !it->is_null())
                fail("{} must be a string", where(i, key));
        }
        if (auto tc = m.find("tool_calls"); tc != m.end()) {
            if (tc->is_null() || (tc->is_array() && tc->empty())) {
                // Templates test `'tool_calls' in message`: an empty list is no call at all.
                n.erase("tool_calls");
            } else {
                if (role != "assistant")
                    fail("{} is only allowed on an assistant message", where(i, "tool_calls"));
                if (!tc->is_array()) fail("{} must be an array", where(i, "tool_calls"));
                ojson calls = ojson::array();
                for (size_t c = 0; c < tc->size(); ++c) {
                    const std::string at = where(i, "tool_calls") + "[" + std::to_string(c) + "]";
                    const ojson& call = (*tc)[c];
                    if (!call.is_object()) fail("{} must be an object", at);
                    auto type = call.find("type");
                    if (type != call.end() && !(type->is_string() && *type == "function"))
                        fail("{}.type must be \"function\"", at);
                    auto f = call.find("function");
                    if (f == call.end() || !f->is_object())
                        fail("{}.function must be an object", at);
                    auto name = f->find("name");
                    if (name == f->end() || !name->is_string() || name->empty())
                        fail("{}.function.name must be a non-empty string", at);
                    auto id = call.find("id");
                    if (id != call.end() && !id->is_string() && !id->is_null())
                        fail("{}.id must be a string", at);
                    ojson nc = call;
                    nc["type"] = "function";
                    auto args = f->find("arguments");
                    nc["function"]["arguments"] = arguments_object(
                        args == f->end() ? ojson() : *args, at + ".function.arguments");
                    calls.push_back(std::move(nc));
                }
                n["tool_calls"] = std::move(calls);
            }
        }
        out.push_back(std::move(n));
    }
    return out;
}

ojson normalize_tools(const ojson& tools) {
    if (tools.is_null()) return ojson();
    if (!tools.is_array()) fail("tools must be an array of tool objects");
    for (size_t i = 0; i < tools.size(); ++i) {
        const ojson& t = tools[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) fail("{} must be an object", at);
        auto type = t.find("type");
        if (type == t.end() || !type->is_string() || *type != "function")
            fail("{}.type must be \"function\"", at);
        auto f = t.find("function");
        if (f == t.end() || !f->is_object()) fail("{}.function must be an object", at);
        auto name = f->find("name");
        if (name == f->end() || !name->is_string() || name->empty())
            fail("{}.function.name must be a non-empty string", at);
        if (auto p = f->find("parameters"); p != f->end() && !p->is_object() && !p->is_null())
            fail("{}.function.parameters must be a JSON Schema object", at);
    }
    return tools.empty() ? ojson() : tools;
}

// The control tokens' texts, matched longest first from their first byte as the tokenizer does.
struct ChatTemplater::Escaper {
    std::vector<std::string> texts;
    std::vector<int32_t> ids;
    std::array<std::vector<uint32_t>, 256> by_first{};
    std::string marker = marker_text();

    explicit Escaper(const tokenizer::Tokenizer& tok) {
        std::vector<std::pair<std::string, int32_t>> all;
        for (int32_t id = 0; id < tok.n_vocab(); ++id) {
            if (!tok.is_control(id)) continue;
            std::string t = tok.token_text(id);
            if (t.empty() || t.find(marker) != std::string::npos) continue;
            all.emplace_back(std::move(t), id);
        }
        if (all.size() > kMaxTokenCodes) fail("the vocabulary has too many control tokens");
        std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
            return a.first.size() > b.first.size();
        });
        for (auto& [t, id] : all) {
            by_first[uint8_t(t[0])].push_back(uint32_t(texts.size()));
            texts.push_back(std::move(t));
            ids.push_back(id);
        }
    }

    // The control token whose text starts at s[i] (the longest), or -1.
    int match(std::string_view s, size_t i) const {
        for (uint32_t k : by_first[uint8_t(s[i])])
            if (s.compare(i, texts[k].size(), texts[k]) == 0) return int(k);
        return -1;
    }

    // Escapes one string in place; true when it changed.
    bool escape(std::string& s) const {
        std::string out;
        bool changed = false;
        for (size_t i = 0; i < s.size();) {
            if (int k = match(s, i); k >= 0) {
                out += marker;
                put_utf8(out, kFirstTokenCode + char32_t(k));
                i += texts[k].size();
                changed = true;
            } else if (s.compare(i, marker.size(), marker) == 0) {
                out += marker;
                out += marker;
                i += marker.size();
                changed = true;
            } else {
                out += s[i++];
            }
        }
        if (changed) s = std::move(out);
        return changed;
    }

    // Every string and object key in j.
    bool escape_json(ojson& j) const {
        bool changed = false;
        if (j.is_string()) return escape(j.get_ref<std::string&>());
        if (j.is_array()) {
            for (ojson& e : j) changed |= escape_json(e);
        } else if (j.is_object()) {
            ojson out = ojson::object();
            for (auto& [k, v] : j.items()) {
                std::string key = k;
                changed |= escape(key);
                ojson value = v;
                changed |= escape_json(value);
                out[key] = std::move(value);
            }
            j = std::move(out);
        }
        return changed;
    }

    // The escaped rendering with its escapes restored (*text) and its tokens: control-token text
    // here is markup; the runs between are plain text. false when an escape was cut apart.
    bool restore(const tokenizer::Tokenizer& tok, std::string_view r, std::string* text,
                 std::vector<int32_t>* tokens) const {
        std::string run;
        auto flush = [&] {
            if (run.empty()) return;
            std::vector<int32_t> t =
                tok.encode(run, /*add_special=*/false, /*parse_special=*/false);
            tokens->insert(tokens->end(), t.begin(), t.end());
            *text += run;
            run.clear();
        };
        for (size_t i = 0; i < r.size();) {
            if (int k = match(r, i); k >= 0) {
                flush();
                tokens->push_back(ids[k]);
                *text += texts[k];
                i += texts[k].size();
            } else if (r.compare(i, marker.size(), marker) == 0) {
                char32_t c = four_byte_at(r, i + marker.size());
                if (c == kMarker) {
                    run += marker;
                } else if (c >= kFirstTokenCode && c - kFirstTokenCode < texts.size()) {
                    run += texts[c - kFirstTokenCode];
                } else {
                    return false;
                }
                i += 2 * marker.size();
            } else {
                run += r[i++];
            }
        }
        flush();
        return true;
    }
};

std::string ChatTemplater::builtin_template(const std::string& arch) {
    if (arch == "llama")
        return R"({{- bos_token }}{%- for message in messages %})"
               R"({{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + )"
               R"(message.content + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %})"
               R"({{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %})";
    // As ChatFormat::detect: Qwen3 files know thinking blocks, and Qwen3.5's generation prompt
    // opens one unless thinking is switched off.
    std::string thinking;
    if (arch.rfind("qwen35", 0) == 0)
        thinking = R"({%- if enable_thinking is defined and enable_thinking is false %})"
                   R"({{- '<think>\n\n</think>\n\n' }}{%- else %}{{- '<think>\n' }}{%- endif %})";
    else if (arch.rfind("qwen3", 0) == 0)
        thinking = R"({%- if enable_thinking is defined and enable_thinking is false %})"
                   R"({{- '<think>\n\n</think>\n\n' }}{%- endif %})";
    return R"({%- for message in messages %})"
           R"({{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }})"
           R"({%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }})" +
           thinking + R"({%- endif %})";
}

namespace {
std::string pick_source(const tokenizer::Tokenizer& tok, const std::string& arch,
                        std::string source) {
    if (!source.empty()) return source;
    if (!tok.vocab().chat_template.empty()) return tok.vocab().chat_template;
    return ChatTemplater::builtin_template(arch);
}

tmpl::ChatTemplate parse_template(const std::string& source) {
    try {
        return tmpl::ChatTemplate(source);
    } catch (const Error& e) {
        fail("the chat template does not parse: {}", e.what());
    }
}
}  // namespace

ChatTemplater::ChatTemplater(const tokenizer::Tokenizer& tok, std::string arch,
                             std::string template_source)
    : tok_(tok),
      arch_(std::move(arch)),
      source_(pick_source(tok, arch_, std::move(template_source))),
      template_(parse_template(source_)),
      escaper_(std::make_unique<Escaper>(tok)) {}

ChatTemplater::~ChatTemplater() = default;

ojson ChatTemplater::context(const ChatRequest& r, const ojson& messages,
                             bool add_generation_prompt) const {
    ojson c = ojson::object();
    c["messages"] = messages;
    ojson tools = normalize_tools(r.tools);
    if (!tools.is_null()) c["tools"] = std::move(tools);
    c["add_generation_prompt"] = add_generation_prompt;
    c["bos_token"] = tok_.bos() >= 0 ? tok_.token_text(tok_.bos()) : "";
    c["eos_token"] = tok_.eos() >= 0 ? tok_.token_text(tok_.eos()) : "";
    if (!r.kwargs.is_null()) {
        if (!r.kwargs.is_object()) fail("chat_template_kwargs must be an object");
        for (const auto& [k, v] : r.kwargs.items()) {
            if (c.contains(k) || k == "tools")
                fail("chat_template_kwargs may not set '{}', which the request itself sets", k);
            c[k] = v;
        }
    }
    return c;
}

namespace {
std::string render_or_fail(const tmpl::ChatTemplate& t, const ojson& context) {
    try {
        return t.render(context);
    } catch (const tmpl::RaisedError& e) {
        fail("the chat template refused the conversation: {}", e.what());
    } catch (const Error& e) {
        fail("the chat template failed on the conversation: {}", e.what());
    }
}

// The client's parts of a context: everything but add_generation_prompt and the special tokens.
bool is_client_key(const std::string& k) {
    return k != "add_generation_prompt" && k != "bos_token" && k != "eos_token";
}
}  // namespace

// Renders the escaped context; *escaped gets that rendering and the result is the plain one
// (the same rendering when nothing needed escaping).
std::string ChatTemplater::render_checked(const ojson& context, std::string* escaped) const {
    ojson esc = context;
    bool changed = false;
    for (auto& [k, v] : esc.items())
        if (is_client_key(k)) changed |= escaper_->escape_json(v);
    *escaped = render_or_fail(template_, esc);
    if (!changed) return *escaped;
    return render_or_fail(template_, context);
}

std::string ChatTemplater::render(const ChatRequest& r) const {
    return render_or_fail(template_,
                          context(r, normalize_messages(r.messages), r.add_generation_prompt));
}

ChatTemplater::Rendered ChatTemplater::build(const ChatRequest& r, const ojson& messages,
                                             bool add_generation_prompt) const {
    std::string escaped;
    const std::string plain = render_checked(context(r, messages, add_generation_prompt), &escaped);
    Rendered out;
    if (!escaper_->restore(tok_, escaped, &out.text, &out.tokens) || out.text != plain)
        fail(
            "the chat template rewrites message text that holds control-token text, so it "
            "cannot be told apart from the template's own markup");
    const auto& v = tok_.vocab();
    if (v.add_bos && v.bos >= 0 && (out.tokens.empty() || out.tokens.front() != v.bos))
        out.tokens.insert(out.tokens.begin(), v.bos);
    return out;
}

ChatPrompt ChatTemplater::prompt(const ChatRequest& r) const {
    const ojson messages = normalize_messages(r.messages);
    Rendered full = build(r, messages, r.add_generation_prompt);
    ChatPrompt p;
    p.text = std::move(full.text);
    p.tokens = std::move(full.tokens);

    int64_t last_user = -1;
    for (size_t i = 0; i < messages.size(); ++i)
        if (messages[i]["role"] == "user") last_user = int64_t(i);
    if (last_user > 0) {
        try {
            ojson before(messages.begin(), messages.begin() + last_user);
            Rendered b = build(r, before, false);
            size_t n = 0;
            while (n < b.tokens.size() && n < p.tokens.size() && b.tokens[n] == p.tokens[n]) ++n;
            p.before_last_user = int64_t(n);
        } catch (const Error&) {
            // The template refuses the shorter conversation (no user message in it, ...).
        }
    }

    // The next turn as the template will render it: a reply, then another user message (which
    // moves the last user message, and with it what templates keep of the reply's reasoning).
    const std::string last_role =
        messages.empty() ? std::string() : messages.back().value("role", std::string());
    if (r.add_generation_prompt && (last_role == "user" || last_role == "tool")) {
        try {
            ojson next = messages;
            next.push_back({{"role", "assistant"}, {"content", "x"}});
            next.push_back({{"role", "user"}, {"content", "y"}});
            std::string escaped;
            if (!render_checked(context(r, next, false), &escaped).starts_with(p.text)) {
                Rendered n = build(r, next, false);
                size_t k = 0;
                while (k < n.tokens.size() && k < p.tokens.size() && n.tokens[k] == p.tokens[k])
                    ++k;
                if ((int64_t)k > p.before_last_user) p.before_reply = int64_t(k);
            }
        } catch (const Error&) {
            // The template refuses the longer conversation: no boundary.
        }
    }
    return p;
}

std::vector<int32_t> ChatTemplater::next_turn_prefix(const ChatRequest& r,
                                                     const ojson& reply) const {
    try {
        ojson messages = r.messages;
        messages.push_back(reply);
        ojson a = messages, b = messages;
        a.push_back({{"role", "user"}, {"content", "a"}});
        b.push_back({{"role", "user"}, {"content", "b"}});
        const Rendered ra = build(r, normalize_messages(a), false);
        const Rendered rb = build(r, normalize_messages(b), false);
        const size_t k = (size_t)(std::mismatch(ra.tokens.begin(), ra.tokens.end(),
                                                rb.tokens.begin(), rb.tokens.end())
                                      .first -
                                  ra.tokens.begin());
        if (k < 2) return {};
        return std::vector<int32_t>(ra.tokens.begin(), ra.tokens.begin() + (k - 1));
    } catch (const Error&) {
        return {};  // the template refuses the longer conversation
    }
}

}  // namespace dl
