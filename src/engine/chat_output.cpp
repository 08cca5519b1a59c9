// The streaming split of generated text into reasoning, content and tool calls: a small state
// machine over the text not yet decided on, which holds back only what could still be the start
// of a marker.
#include "engine/chat_output.h"

#include <random>

namespace dl {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool contains(std::string_view s, std::string_view what) {
    return s.find(what) != std::string_view::npos;
}

// The length of the longest end of s that is a proper beginning of marker.
size_t partial_marker(std::string_view s, std::string_view marker) {
    for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
        if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
    return 0;
}

// s (after leading whitespace) could still become, or already starts with, marker.
bool may_start_with(std::string_view s, std::string_view marker) {
    size_t n = std::min(s.size(), marker.size());
    return s.substr(0, n) == marker.substr(0, n);
}

std::string random_id_prefix() {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device rd;
    std::string s = "call_";
    for (int i = 0; i < 16; ++i) s += kChars[rd() % (sizeof kChars - 1)];
    return s + "_";
}

}  // namespace

ChatOutputFormat ChatOutputFormat::detect(std::string_view source, std::string_view arch,
                                          std::string_view prompt) {
    ChatOutputFormat f;
    if (contains(source, kFunction) && contains(source, kParameter))
        f.tool_calls = ToolCallSyntax::qwen_xml;
    else if (contains(source, kCallOpen))
        f.tool_calls = ToolCallSyntax::json_in_tags;
    else if (contains(source, kPythonTag) ||
             (contains(source, "<|start_header_id|>") && contains(source, "tools")))
        f.tool_calls = ToolCallSyntax::llama3_json;
    else if (arch.rfind("qwen35", 0) == 0)
        f.tool_calls = ToolCallSyntax::qwen_xml;
    else if (arch.rfind("qwen3", 0) == 0)
        f.tool_calls = ToolCallSyntax::json_in_tags;
    else if (arch == "llama")
        f.tool_calls = ToolCallSyntax::llama3_json;
    f.reasoning = contains(source, kThinkOpen);
    std::string_view p = trim(prompt);
    f.starts_in_reasoning = f.reasoning && p.ends_with(kThinkOpen);
    f.reasoning_closed_by_prompt = f.reasoning && p.ends_with(kThinkClose);
    return f;
}

void ChatOutputParser::Section::add(std::string_view s, std::string& out) {
    for (char c : s) {
        if (is_space(c)) {
            if (started) held += c;
            continue;
        }
        add_held(out);
        out += c;
        all += c;
        started = true;
    }
}

ChatOutputParser::ChatOutputParser(ChatOutputFormat format, ojson tools, std::string id_prefix)
    : format_(format),
      tools_(std::move(tools)),
      id_prefix_(id_prefix.empty() ? random_id_prefix() : std::move(id_prefix)),
      state_(format.reasoning && format.starts_in_reasoning ? State::reasoning : State::content) {}

ChatDelta ChatOutputParser::push(std::string_view text) {
    ChatDelta d;
    buf_ += text;
    run(false, d);
    return d;
}

ChatFinal ChatOutputParser::finish() {
    ChatFinal f;
    run(true, f.delta);
    finish_held(f.delta);
    reasoning_.end();
    // The reply's own trailing whitespace stays (a cut-off or stopped reply ends where it was
    // cut), except after a tool call, where it only separates markup.
    if (calls_.empty()) content_.add_held(f.delta.content);
    content_.end();
    ojson m = ojson::object();
    m["role"] = "assistant";
    if (content_.all.empty() && !calls_.empty())
        m["content"] = nullptr;
    else
        m["content"] = content_.all;
    if (!reasoning_.all.empty()) m["reasoning_content"] = reasoning_.all;
    if (!calls_.empty()) {
        ojson calls = ojson::array();
        for (const Call& c : calls_)
            calls.push_back({{"id", c.id},
                             {"type", "function"},
                             {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        m["tool_calls"] = std::move(calls);
    }
    f.message = std::move(m);
    return f;
}

void ChatOutputParser::run(bool final, ChatDelta& d) {
    for (;;) {
        bool progressed = false;
        switch (state_) {
            case State::reasoning: {
                size_t p = buf_.find(kThinkClose);
                if (p != std::string::npos) {
                    reasoning_.add(std::string_view(buf_).substr(0, p), d.reasoning_content);
                    reasoning_.end();
                    buf_.erase(0, p + kThinkClose.size());
                    state_ = State::content;
                    progressed = true;
                } else {
                    size_t keep = final ? 0 : partial_marker(buf_, kThinkClose);
                    reasoning_.add(std::string_view(buf_).substr(0, buf_.size() - keep),
                                   d.reasoning_content);
                    buf_.erase(0, buf_.size() - keep);
                }
                break;
            }
            case State::content:
                progressed = step_content(final, d);
                break;
            case State::tool_call:
                progressed = step_tool_call(final, d);
                break;
            case State::python_tag:
            case State::maybe_json:
                break;  // decided at the end
        }
        if (!progressed) return;
    }
}

bool ChatOutputParser::step_content(bool final, ChatDelta& d) {
    const bool think_possible =
        format_.reasoning && !content_.started && !seen_tool_call_ && reasoning_.all.empty();
    if (format_.tool_calls == ToolCallSyntax::llama3_json && !content_.started &&
        !seen_tool_call_) {
        // A Llama 3 tool call is the whole reply: a reply that starts with '{' is held.
        std::string_view t = trim(buf_);
        if (!t.empty() && t.front() == '{') {
            state_ = State::maybe_json;
            return true;
        }
    }
    if (think_possible) {
        // A thinking block opens the reply or not at all.
        std::string_view t =
            std::string_view(buf_).substr(std::min(buf_.size(), buf_.find_first_not_of(" \t\r\n")));
        if (t.rfind(kThinkOpen, 0) == 0) {
            buf_.erase(0, buf_.size() - t.size() + kThinkOpen.size());
            state_ = State::reasoning;
            return true;
        }
        if (!final && may_start_with(t, kThinkOpen)) return false;
    }
    std::vector<std::string_view> markers;
    if (format_.tool_calls == ToolCallSyntax::qwen_xml ||
        format_.tool_calls == ToolCallSyntax::json_in_tags)
        markers.push_back(kCallOpen);
    if (format_.tool_calls == ToolCallSyntax::llama3_json) markers.push_back(kPythonTag);

    size_t at = std::string::npos;
    std::string_view hit;
    for (std::string_view m : markers) {
        size_t p = buf_.find(m);
        if (p < at) at = p, hit = m;
    }
    if (at != std::string::npos) {
        content_.add(std::string_view(buf_).substr(0, at), d.content);
        buf_.erase(0, at + hit.size());
        if (hit == kCallOpen) {
            content_.end();
            state_ = State::tool_call;
            seen_tool_call_ = true;
            raw_call_.clear();
            xml_ = Xml::start;
        } else {
            content_.end();
            state_ = State::python_tag;
        }
        return true;
    }
    size_t keep = 0;
    if (!final)
        for (std::string_view m : markers) keep = std::max(keep, partial_marker(buf_, m));
    content_.add(std::string_view(buf_).substr(0, buf_.size() - keep), d.content);
    buf_.erase(0, buf_.size() - keep);
    return false;
}

void ChatOutputParser::start_call(const std::string& name, ChatDelta& d) {
    Call c;
    c.id = id_prefix_ + std::to_string(calls_.size());
    c.name = name;
    d.tool_calls.push_back({int(calls_.size()), c.id, c.name, ""});
    calls_.push_back(std::move(c));
    call_open_ = true;
    params_ = 0;
}

void ChatOutputParser::add_arguments(const std::string& text, ChatDelta& d) {
    const int index = int(calls_.size()) - 1;
    calls_.back().arguments += text;
    if (!d.tool_calls.empty() && d.tool_calls.back().index == index)
        d.tool_calls.back().arguments += text;
    else
        d.tool_calls.push_back({index, "", "", text});
}

void ChatOutputParser::end_call() {
    call_open_ = false;
    raw_call_.clear();
    state_ = State::content;
}

// A call that does not parse goes to content as the text the model wrote, unless its name went
// out already: then what is left of it is dropped and its arguments are closed.
void ChatOutputParser::malformed_call(ChatDelta& d) {
    if (!call_open_) content_.add(std::string(kCallOpen) + raw_call_, d.content);
    end_call();
}

bool ChatOutputParser::step_tool_call(bool final, ChatDelta& d) {
    if (format_.tool_calls == ToolCallSyntax::qwen_xml) return step_xml(final, d);
    size_t p = buf_.find(kCallClose);
    if (p == std::string::npos) return false;  // held until the call is whole
    raw_call_ = buf_.substr(0, p + kCallClose.size());
    std::string body(trim(std::string_view(buf_).substr(0, p)));
    buf_.erase(0, p + kCallClose.size());
    ojson j = ojson::parse(body, nullptr, false);
    auto name = j.is_object() ? j.find("name") : j.end();
    if (!j.is_object() || name == j.end() || !name->is_string()) {
        malformed_call(d);
        return true;
    }
    auto args = j.find("arguments");
    if (args == j.end()) args = j.find("parameters");
    std::string text = "{}";
    if (args != j.end()) text = args->is_string() ? args->get<std::string>() : args->dump();
    start_call(name->get<std::string>(), d);
    add_arguments(text, d);
    end_call();
    return true;
}

ojson ChatOutputParser::xml_value(const std::string& param, std::string value) const {
    // The template writes '\n' + value + '\n'.
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    std::string type;
    if (tools_.is_array())
        for (const ojson& t : tools_) {
            const ojson* f = t.contains("function") ? &t["function"] : &t;
            if (!f->is_object() || f->value("name", "") != calls_.back().name) continue;
            auto ps = f->find("parameters");
            if (ps == f->end() || !ps->is_object()) continue;
            auto props = ps->find("properties");
            if (props == ps->end() || !props->is_object()) continue;
            auto prop = props->find(param);
            if (prop == props->end() || !prop->is_object()) continue;
            auto ty = prop->find("type");
            type = ty != prop->end() && ty->is_string() ? ty->get<std::string>() : "any";
        }
    if (type == "string" || type.empty()) return value;
    ojson j = ojson::parse(value, nullptr, false);
    if (j.is_discarded()) return value;
    const bool fits = type == "any" || (type == "number" && j.is_number()) ||
                      (type == "integer" && j.is_number_integer()) ||
                      (type == "boolean" && j.is_boolean()) ||
                      (type == "object" && j.is_object()) || (type == "array" && j.is_array()) ||
                      (type == "null" && j.is_null());
    return fits ? j : ojson(value);
}

bool ChatOutputParser::step_xml(bool final, ChatDelta& d) {
    // Whitespace between the tags means nothing; it is skipped where a tag is expected.
    auto skip_space = [&] {
        size_t n = 0;
        while (n < buf_.size() && is_space(buf_[n])) ++n;
        raw_call_ += buf_.substr(0, n);
        buf_.erase(0, n);
    };
    auto take = [&](size_t n) {
        raw_call_ += buf_.substr(0, n);
        buf_.erase(0, n);
    };
    switch (xml_) {
        case Xml::skip:
            return skip_call(final);
        case Xml::start: {
            skip_space();
            if (buf_.rfind(kFunction, 0) == 0) {
                size_t close = buf_.find('>');
                if (close == std::string::npos) return false;
                std::string name(trim(
                    std::string_view(buf_).substr(kFunction.size(), close - kFunction.size())));
                take(close + 1);
                if (name.empty()) {
                    malformed_call(d);
                    return true;
                }
                start_call(name, d);
                xml_ = Xml::body;
                return true;
            }
            if (buf_.rfind(kCallClose, 0) == 0 && call_open_) {
                take(kCallClose.size());
                end_call();
                return true;
            }
            if (may_start_with(buf_, kFunction) || (call_open_ && may_start_with(buf_, kCallClose)))
                return false;
            break;
        }
        case Xml::body: {
            skip_space();
            if (buf_.rfind(kParameter, 0) == 0) {
                size_t close = buf_.find('>');
                if (close == std::string::npos) return false;
                param_ = std::string(trim(
                    std::string_view(buf_).substr(kParameter.size(), close - kParameter.size())));
                take(close + 1);
                xml_ = Xml::value;
                return true;
            }
            if (buf_.rfind(kFunctionClose, 0) == 0) {
                take(kFunctionClose.size());
                add_arguments(params_ == 0 ? "{}" : "}", d);
                xml_ = Xml::end;
                return true;
            }
            if (may_start_with(buf_, kParameter) || may_start_with(buf_, kFunctionClose))
                return false;
            break;
        }
        case Xml::value: {
            // A parameter the model leaves open ends at the next one or at </function>.
            size_t p = std::min({buf_.find(kParameterClose), buf_.find(kFunctionClose),
                                 buf_.find(std::string("\n") + std::string(kParameter))});
            if (p == std::string::npos) return false;
            std::string value = buf_.substr(0, p);
            take(p);
            if (buf_.rfind(kParameterClose, 0) == 0) take(kParameterClose.size());
            ojson key = param_;
            add_arguments((params_ == 0 ? "{" : ", ") + key.dump() + ": " +
                              xml_value(param_, std::move(value)).dump(),
                          d);
            ++params_;
            xml_ = Xml::body;
            return true;
        }
        case Xml::end: {
            skip_space();
            if (buf_.rfind(kCallClose, 0) == 0) {
                take(kCallClose.size());
                end_call();
                return true;
            }
            // Another function in the same <tool_call> is another call.
            if (buf_.rfind(kFunction, 0) == 0) {
                call_open_ = false;
                xml_ = Xml::start;
                return true;
            }
            if (may_start_with(buf_, kCallClose) || may_start_with(buf_, kFunction)) return false;
            break;
        }
    }
    // Text where a tag belongs: the call is malformed. Before its name went out it is given
    // back as content; after, its arguments are closed and the rest of it is dropped.
    if (!call_open_) {
        malformed_call(d);
        return true;
    }
    if (xml_ != Xml::end) add_arguments(params_ == 0 ? "{}" : "}", d);
    xml_ = Xml::skip;
    return true;
}

bool ChatOutputParser::skip_call(bool final) {
    size_t p = buf_.find(kCallClose);
    if (p != std::string::npos) {
        buf_.erase(0, p + kCallClose.size());
        end_call();
        return true;
    }
    buf_.erase(0, buf_.size() - (final ? 0 : partial_marker(buf_, kCallClose)));
    return false;
}

// At the end: a call cut off by the length limit, a Llama 3 reply held to see whether it is a
// call, and whatever marker beginning was held back.
void ChatOutputParser::finish_held(ChatDelta& d) {
    if (state_ == State::tool_call) {
        if (format_.tool_calls == ToolCallSyntax::qwen_xml && xml_ == Xml::skip) {
            buf_.clear();
            end_call();
        } else if (format_.tool_calls == ToolCallSyntax::qwen_xml && call_open_) {
            if (xml_ == Xml::value) {
                std::string value = buf_;
                buf_.clear();
                ojson key = param_;
                add_arguments((params_ == 0 ? "{" : ", ") + key.dump() + ": " +
                                  xml_value(param_, std::move(value)).dump(),
                              d);
                ++params_;
                xml_ = Xml::body;
            }
            if (xml_ != Xml::end) add_arguments(params_ == 0 ? "{}" : "}", d);
            end_call();
        } else {
            raw_call_ += buf_;
            buf_.clear();
            malformed_call(d);
        }
        return;
    }
    if (state_ == State::python_tag || state_ == State::maybe_json) {
        std::string body(trim(buf_));
        buf_.clear();
        ojson j = ojson::parse(body, nullptr, false);
        auto name = j.is_object() ? j.find("name") : j.end();
        auto args = j.is_object() ? j.find("parameters") : j.end();
        if (j.is_object() && args == j.end()) args = j.find("arguments");
        if (j.is_object() && name != j.end() && name->is_string() && args != j.end() &&
            (args->is_object() || args->is_string())) {
            start_call(name->get<std::string>(), d);
            add_arguments(args->is_string() ? args->get<std::string>() : args->dump(), d);
            call_open_ = false;
        } else {
            content_.add(body, d.content);
        }
        state_ = State::content;
    }
}

}  // namespace dl
