// Chat rendering and output parsing for the server (see chat_bridge.h).
#include "server/chat_bridge.h"

#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace dl::server {

using Json = nlohmann::ordered_json;

namespace {

// A tool's function name ({"type": "function", "function": {"name": ...}}), if it has one.
std::optional<std::string> function_name(const Json& tool) {
    if (!tool.is_object()) return std::nullopt;
    auto f = tool.find("function");
    if (f == tool.end() || !f->is_object()) return std::nullopt;
    auto name = f->find("name");
    if (name == f->end() || !name->is_string()) return std::nullopt;
    return name->get<std::string>();
}

}  // namespace

ChatOutput::ChatOutput(ChatOutputFormat format, Json tools)
    : format_(format), parser_(format, std::move(tools)) {}

Json ChatOutput::delta_json(const ChatDelta& d) {
    Json j = Json::object();
    if (!d.reasoning_content.empty()) j["reasoning_content"] = d.reasoning_content;
    if (!d.content.empty()) j["content"] = d.content;
    if (!d.tool_calls.empty()) {
        tool_calls_ = true;
        Json calls = Json::array();
        for (const ToolCallDelta& t : d.tool_calls) {
            Json c;
            c["index"] = t.index;
            Json fn = Json::object();
            if (!t.id.empty()) {
                c["id"] = t.id;
                c["type"] = "function";
            }
            if (!t.name.empty()) fn["name"] = t.name;
            fn["arguments"] = t.arguments;
            c["function"] = fn;
            calls.push_back(c);
        }
        j["tool_calls"] = calls;
    }
    return j;
}

Json ChatOutput::push(std::string_view text) {
    return delta_json(parser_.push(text));
}

Json ChatOutput::finish(Json& message) {
    ChatFinal f = parser_.finish();
    Json d = delta_json(f.delta);
    message = f.message;
    if (message.contains("tool_calls") && !message["tool_calls"].empty()) tool_calls_ = true;
    return d;
}

ChatBridge::ChatBridge(const tokenizer::Tokenizer& tok, const std::string& arch,
                       const std::string& template_source)
    : templater_(tok, arch, template_source) {}

// tool_choice: "auto" (the default), "none", "required" (some tool), or
// {"type": "function", "function": {"name": ...}} naming one of the request's tools.
ChatBridge::ToolChoice ChatBridge::tool_choice(const Json& body) {
    ToolChoice c;
    auto tc = body.find("tool_choice");
    if (tc == body.end() || tc->is_null()) return c;
    const Json none_listed = Json::array();
    auto t = body.find("tools");
    const Json& tools = t != body.end() && t->is_array() ? *t : none_listed;
    if (tc->is_string()) {
        const std::string s = tc->get<std::string>();
        if (s == "none")
            c.mode = ToolChoice::none;
        else if (s == "required")
            c.mode = ToolChoice::required;
        else if (s != "auto")
            bad_request("'tool_choice' must be 'auto', 'none', 'required' or a function, not '{}'",
                        s);
    } else if (tc->is_object()) {
        auto f = tc->find("function");
        if (get_string(*tc, "type", "") != "function" || f == tc->end() || !f->is_object() ||
            !f->contains("name") || !(*f)["name"].is_string())
            bad_request(
                "'tool_choice' as an object must be {{\"type\": \"function\", \"function\": "
                "{{\"name\": ...}}}}");
        c.mode = ToolChoice::function;
        c.name = (*f)["name"].get<std::string>();
        bool listed = false;
        for (const Json& tool : tools) listed |= function_name(tool) == c.name;
        if (!listed) bad_request("'tool_choice' names '{}', which is not in 'tools'", c.name);
    } else {
        bad_request("'tool_choice' must be a string or an object");
    }
    if ((c.mode == ToolChoice::required || c.mode == ToolChoice::function) && tools.empty())
        bad_request("'tool_choice' requires a tool call, and 'tools' lists none");
    return c;
}

std::vector<std::string> ChatBridge::tool_call_openings(const Json& body,
                                                        ToolCallSyntax syntax) const {
    const ToolChoice c = tool_choice(body);
    if (c.mode != ToolChoice::required && c.mode != ToolChoice::function) return {};
    // A template that renders the same prompt without the tools never shows them to the model:
    // a call forced there would name a function the model was not told of.
    ChatRequest with = request(body), without = with;
    without.tools = Json();
    if (templater_.render(with) == templater_.render(without))
        bad_request(
            "'tool_choice' forces a tool call, and this model's chat template does not show "
            "the model the tools");
    // The call's opening in the model's own syntax, past the function's name (a JSON string
    // where the syntax is JSON), so that the name is one of the request's.
    auto opening = [&](const std::string& name) -> std::string {
        switch (syntax) {
            case ToolCallSyntax::qwen_xml:
                return "<tool_call>\n<function=" + name + ">\n";
            case ToolCallSyntax::json_in_tags:
                return "<tool_call>\n{\"name\": " + Json(name).dump();
            case ToolCallSyntax::llama3_json:
                return "{\"name\": " + Json(name).dump();
            case ToolCallSyntax::none:
                break;
        }
        bad_request(
            "'tool_choice' forces a tool call, and this model's chat template has no syntax for "
            "one");
    };
    if (c.mode == ToolChoice::function) return {opening(c.name)};
    std::vector<std::string> all;
    for (const Json& tool : body["tools"]) {
        const std::optional<std::string> name = function_name(tool);
        if (!name)
            bad_request(
                "each of 'tools' must be {{\"type\": \"function\", \"function\": "
                "{{\"name\": ...}}}}");
        all.push_back(opening(*name));
    }
    return all;
}

ChatRequest ChatBridge::request(const Json& body) const {
    ChatRequest r;
    auto m = body.find("messages");
    if (m == body.end() || m->is_null()) bad_request("'messages' is required");
    if (!m->is_array() || m->empty()) bad_request("'messages' must be a non-empty list");
    if (m->size() > kMaxMessages)
        bad_request("'messages' holds {} messages; at most {} are taken", m->size(), kMaxMessages);
    r.messages = *m;
    const ToolChoice choice = tool_choice(body);
    if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
        if (!t->is_array()) bad_request("'tools' must be a list");
        if (choice.mode != ToolChoice::none && !t->empty()) r.tools = *t;
    }
    if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
        if (!k->is_object()) bad_request("'chat_template_kwargs' must be an object");
        r.kwargs = *k;
    }
    r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
    return r;
}

ChatPrompt ChatBridge::prompt(const Json& body) const {
    ChatRequest r = request(body);
    try {
        return templater_.prompt(r);
    } catch (const ApiError&) {
        throw;
    } catch (const Error& e) {
        throw ApiError(400, e.what());
    }
}

std::vector<int32_t> ChatBridge::next_turn_prefix(const Json& body, const Json& reply) const {
    try {
        Json message = {{"role", "assistant"}, {"content", reply.value("content", Json())}};
        if (auto t = reply.find("tool_calls"); t != reply.end() && !t->is_null())
            message["tool_calls"] = *t;
        return templater_.next_turn_prefix(request(body), message);
    } catch (const Error&) {
        return {};
    }
}

std::string ChatBridge::render(const Json& body) const {
    ChatRequest r = request(body);
    try {
        return templater_.render(r);
    } catch (const ApiError&) {
        throw;
    } catch (const Error& e) {
        throw ApiError(400, e.what());
    }
}

std::unique_ptr<ChatOutput> ChatBridge::output(const ChatPrompt& prompt, const Json& body) const {
    ChatOutputFormat f =
        ChatOutputFormat::detect(templater_.source(), templater_.arch(), prompt.text);
    Json tools;
    if (auto t = body.find("tools"); t != body.end() && t->is_array() && !t->empty()) tools = *t;
    return std::make_unique<ChatOutput>(f, tools);
}

}  // namespace dl::server
