// Chat rendering and output parsing for the server (see chat_bridge.h).
#include "server/chat_bridge.h"

#include "server/api_error.h"
#include "server/request.h"

namespace dl::server {

using Json = nlohmann::ordered_json;

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

ChatRequest ChatBridge::request(const Json& body) const {
    ChatRequest r;
    auto m = body.find("messages");
    if (m == body.end() || m->is_null()) bad_request("'messages' is required");
    if (!m->is_array() || m->empty()) bad_request("'messages' must be a non-empty list");
    r.messages = *m;
    std::string choice = "auto";
    if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
        if (tc->is_string())
            choice = tc->get<std::string>();
        else
            bad_request("'tool_choice' as an object (a forced function) is not supported yet");
        if (choice != "auto" && choice != "none")
            bad_request("'tool_choice' of '{}' is not supported yet; use 'auto' or 'none'", choice);
    }
    if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
        if (!t->is_array()) bad_request("'tools' must be a list");
        if (choice != "none" && !t->empty()) r.tools = *t;
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
