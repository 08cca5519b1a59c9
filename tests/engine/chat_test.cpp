// Chat formats checked against strings written out by hand from the published formats.
#include <gtest/gtest.h>

#include "engine/chat.h"

using namespace dl;

TEST(Chat, ChatMLConversation) {
    ChatFormat f(ChatStyle::chatml);
    std::vector<ChatMessage> m = {{"system", "You are helpful."}, {"user", "Hi"}};
    EXPECT_EQ(f.format(m, true),
              "<|im_start|>system\nYou are helpful.<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_EQ(f.format(m, false),
              "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    EXPECT_EQ(f.end_of_turn(), "<|im_end|>");
}

TEST(Chat, Llama3Conversation) {
    ChatFormat f(ChatStyle::llama3);
    std::vector<ChatMessage> m = {{"system", "You are helpful."}, {"user", "Hi"}};
    EXPECT_EQ(f.format(m, true),
              "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(f.end_of_turn(), "<|eot_id|>");
}

TEST(Chat, Qwen35OpensAThinkingBlockUnlessToldNot) {
    ChatFormat f = ChatFormat::detect("qwen35", "");
    EXPECT_EQ(f.style(), ChatStyle::chatml);
    EXPECT_EQ(f.assistant_prefix(), "<|im_start|>assistant\n<think>\n");
    f.set_thinking(Thinking::off);
    EXPECT_EQ(f.assistant_prefix(), "<|im_start|>assistant\n<think>\n\n</think>\n\n");

    // The same from the template text (Jinja escapes as they appear in the file).
    std::string tmpl =
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is defined and enable_thinking is false %}"
        "{{- '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif "
        "%}";
    ChatFormat g = ChatFormat::detect("qwen35", tmpl);
    EXPECT_EQ(g.assistant_prefix(), "<|im_start|>assistant\n<think>\n");
}

TEST(Chat, Qwen3LeavesThinkingToTheModel) {
    std::string tmpl =
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is defined and enable_thinking is false %}"
        "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
    ChatFormat f = ChatFormat::detect("qwen3", tmpl);
    EXPECT_TRUE(f.thinking_capable());
    EXPECT_EQ(f.assistant_prefix(), "<|im_start|>assistant\n");
    f.set_thinking(Thinking::off);
    EXPECT_EQ(f.assistant_prefix(), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Chat, DetectsLlama3AndPlainChatML) {
    EXPECT_EQ(ChatFormat::detect("llama", "").style(), ChatStyle::llama3);
    EXPECT_EQ(ChatFormat::detect("llama", "{{ '<|start_header_id|>' }}").style(),
              ChatStyle::llama3);
    ChatFormat q2 = ChatFormat::detect("qwen2", "{{ '<|im_start|>' }}");
    EXPECT_EQ(q2.style(), ChatStyle::chatml);
    EXPECT_FALSE(q2.thinking_capable());
    EXPECT_EQ(q2.assistant_prefix(), "<|im_start|>assistant\n");
}

TEST(Chat, TurnByTurnEqualsTheWholeConversation) {
    // A session appends: the first turn with the prefix, the model's answer (without its end
    // token), then assistant_end() + the next user turn + the prefix. The concatenation must be
    // the conversation formatted in one go.
    for (ChatStyle st : {ChatStyle::chatml, ChatStyle::llama3}) {
        ChatFormat f(st);
        std::vector<ChatMessage> m = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
        std::string incremental = f.message(m[0]) + f.assistant_prefix() + "Hello!" +
                                  f.assistant_end() + f.message(m[2]) + f.assistant_prefix();
        EXPECT_EQ(incremental, f.format(m, true));
    }
}
