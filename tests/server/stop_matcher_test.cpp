// The stop-string matcher: stops found across token boundaries, and never a partial stop sent.
#include <gtest/gtest.h>

#include "server/stop_matcher.h"

namespace dl::server {
namespace {

// Feeds pieces one by one and returns everything the matcher let out, finish included.
std::string run(StopMatcher& m, const std::vector<std::string>& pieces,
                std::vector<std::string>* sent = nullptr) {
    std::string out;
    for (const std::string& p : pieces) {
        std::string s = m.push(p);
        if (sent) sent->push_back(s);
        out += s;
    }
    return out + m.flush();
}

TEST(StopMatcher, CutsTextBeforeAStopInOnePiece) {
    StopMatcher m({"END"});
    EXPECT_EQ(run(m, {"hello END world"}), "hello ");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "END");
}

TEST(StopMatcher, FindsAStopSplitAcrossPieces) {
    StopMatcher m({"<stop>"});
    std::vector<std::string> sent;
    EXPECT_EQ(run(m, {"abc<", "st", "op", ">tail"}, &sent), "abc");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(sent[0], "abc");  // "<" held back
    EXPECT_EQ(sent[1], "");
    EXPECT_EQ(sent[2], "");
}

TEST(StopMatcher, NeverSendsAPartialStop) {
    // Whatever the cut of the text into pieces, no prefix of the stop is ever sent before it is
    // known not to be the stop.
    const std::string text = "one two thr three four";
    const std::string stop = "three";
    for (size_t cut = 1; cut < text.size(); ++cut) {
        StopMatcher m({stop});
        std::string sent;
        for (size_t i = 0; i < text.size(); i += cut) {
            sent += m.push(text.substr(i, cut));
            EXPECT_EQ(sent.find("thre", 8), std::string::npos) << "cut " << cut;
        }
        sent += m.flush();
        EXPECT_EQ(sent, "one two thr ") << "cut " << cut;
    }
}

TEST(StopMatcher, ReleasesHeldTextThatTurnsOutNotToBeAStop) {
    StopMatcher m({"STOP"});
    std::vector<std::string> sent;
    EXPECT_EQ(run(m, {"ST", "ART"}, &sent), "START");
    EXPECT_EQ(sent[0], "");
    EXPECT_EQ(sent[1], "START");
    EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, FlushGivesBackAHeldPrefixAtTheEnd) {
    StopMatcher m({"STOP"});
    EXPECT_EQ(m.push("abc ST"), "abc ");
    EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, TakesTheEarliestOfSeveralStops) {
    StopMatcher m({"world", "lo w"});
    EXPECT_EQ(run(m, {"hello world"}), "hel");
    EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopMatcher, DropsEverythingAfterAStop) {
    StopMatcher m({"x"});
    EXPECT_EQ(m.push("axb"), "a");
    EXPECT_EQ(m.push("more"), "");
    EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, PassesTextThroughWithoutStops) {
    StopMatcher m({"", ""});
    EXPECT_EQ(m.push("abc"), "abc");
    EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsMultibyteStopPrefixes) {
    StopMatcher m({"\xc3\xa9t\xc3\xa9"});  // "été"
    EXPECT_EQ(m.push("caf\xc3\xa9"), "caf");
    EXPECT_EQ(m.push("t"), "");
    EXPECT_EQ(m.push("\xc3\xa9!"), "");
    EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace dl::server
