#!/usr/bin/env python3
"""Writes tests/data/templates/chat_requests.json: OpenAI-shaped chat requests (content as text
parts, tool-call arguments as JSON text) with what jinja2 renders for each on a model's template,
given the request as transformers is given it after normalisation (parts joined, arguments parsed
into objects). tests/chat/chat_template_test.cpp renders the raw requests through ChatTemplater.

usage: chat_requests.py   (from the repository root; needs python3-jinja2)
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from oracle import make_environment  # noqa: E402

T = "tests/data/templates/"
QWEN = {"bos_token": "", "eos_token": "<|im_end|>"}
LLAMA = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
CALL = [{"id": "call_0", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]
TOOL_CHAT = [
    {"role": "system", "content": [{"type": "text", "text": "You are "}, {"type": "text", "text": "helpful."}]},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "reasoning_content": "The user wants weather.",
     "tool_calls": CALL},
    {"role": "tool", "tool_call_id": "call_0", "content": "Sunny, 24C"},
]
MULTI_TURN = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello!"},
    {"role": "user", "content": "Bye"},
]

CASES = [
    ("Qwen-Qwen3.5.jinja", "tool call and result", QWEN, TOOL_CHAT, TOOLS, {}),
    ("Qwen-Qwen3.5.jinja", "multi-turn, thinking off", QWEN, MULTI_TURN, None, {"enable_thinking": False}),
    ("Qwen-Qwen3-0.6B.jinja", "tool call and result", QWEN, TOOL_CHAT, TOOLS, {}),
    ("Qwen-Qwen3-0.6B.jinja", "multi-turn", QWEN, MULTI_TURN, None, {}),
    ("Qwen-Qwen3-0.6B.jinja", "multi-turn, thinking off", QWEN, MULTI_TURN, None, {"enable_thinking": False}),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "tool call and result", LLAMA,
     [{k: v for k, v in m.items() if k != "reasoning_content"} for m in TOOL_CHAT], TOOLS,
     {"date_string": "26 Jul 2024"}),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "multi-turn", LLAMA, MULTI_TURN, None,
     {"date_string": "26 Jul 2024"}),
]


def normalise(messages):
    out = copy.deepcopy(messages)
    for m in out:
        if isinstance(m.get("content"), list):
            m["content"] = "".join(p["text"] for p in m["content"])
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    env = make_environment(0)
    out = []
    for name, what, special, messages, tools, kwargs in CASES:
        context = {"messages": normalise(messages)}
        if tools:
            context["tools"] = tools
        context["add_generation_prompt"] = True
        context.update(special)
        context.update(kwargs)
        text = env.from_string(open(T + name).read()).render(**context)
        request = {"messages": messages, "kwargs": kwargs}
        if tools:
            request["tools"] = tools
        out.append({"template": name, "case": what, "request": request, "output": text})
    with open(T + "chat_requests.json", "w", encoding="utf-8") as f:
        json.dump({"about": __doc__.strip().splitlines()[0], "requests": out}, f, indent=1,
                  ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
