// The API key comparison.
#include <gtest/gtest.h>

#include "server/server.h"

namespace dl::server {
namespace {

TEST(ApiKey, OnlyTheExactKeyMatches) {
    EXPECT_TRUE(same_key("sk-secret", "sk-secret"));
    EXPECT_FALSE(same_key("sk-secreT", "sk-secret"));
    EXPECT_FALSE(same_key("sk-secret-and-more", "sk-secret"));
    EXPECT_FALSE(same_key("sk-sec", "sk-secret"));
    EXPECT_FALSE(same_key("", "sk-secret"));
    EXPECT_FALSE(same_key("", ""));  // an empty expected key never matches
    // A key that repeats the expected one is not it.
    EXPECT_FALSE(same_key("abcabc", "abc"));
}

}  // namespace
}  // namespace dl::server
