// Server-sent event framing and its parser.
#include <gtest/gtest.h>

#include "server/sse.h"

namespace dl::server {
namespace {

TEST(Sse, AnEventIsOneDataLineAndABlankLine) {
    nlohmann::ordered_json j = {{"a", "line one\nline two"}, {"b", 1}};
    const std::string e = sse_event(j);
    EXPECT_EQ(e, "data: {\"a\":\"line one\\nline two\",\"b\":1}\n\n");
    EXPECT_EQ(e.find('\n'), e.size() - 2);  // newlines in values are escaped
}

TEST(Sse, TheStreamEndsWithDone) {
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Sse, InvalidUtf8InAValueIsReplacedNotThrown) {
    nlohmann::ordered_json j = {{"t", std::string("a\xff")}};
    EXPECT_EQ(sse_event(j), "data: {\"t\":\"a\xef\xbf\xbd\"}\n\n");
}

TEST(Sse, ParsesEventsBackIncludingCrlfCommentsAndMultilineData) {
    const std::string s = sse_event({{"x", 1}}) + ": keep-alive\n\n" +
                          "data: first\r\ndata: second\r\n\r\n" + sse_done() + "data: cut";
    std::vector<std::string> ev = sse_parse(s);
    ASSERT_EQ(ev.size(), 3u);
    EXPECT_EQ(ev[0], "{\"x\":1}");
    EXPECT_EQ(ev[1], "first\nsecond");
    EXPECT_EQ(ev[2], "[DONE]");
}

}  // namespace
}  // namespace dl::server
