// A mapped file truncated under the process: reading past its new end gives zeros instead of a
// SIGBUS, and check_mapped_files() reports it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"

namespace {

std::string tmp_path(const std::string& name) {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    return std::string(d && *d ? d : "/tmp") + "/" + name + "_" + std::to_string(::getpid());
}

}  // namespace

TEST(MappedFile, TruncatedWhileMappedIsAnErrorNotASigbus) {
    const std::string path = tmp_path("mapped_truncated");
    std::vector<char> bytes(1 << 20, 'x');
    std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size());
    {
        dl::MappedFile m(path);
        EXPECT_NO_THROW(dl::check_mapped_files());
        ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
        // Before the handler this read killed the process with SIGBUS.
        volatile uint8_t past = m.data()[512 * 1024];
        EXPECT_EQ(past, 0);
        EXPECT_EQ(m.data()[100], 'x');  // what is still there reads as before
        EXPECT_THROW(dl::check_mapped_files(), dl::Error);
    }
    // Closed, the mapping is no longer reported.
    EXPECT_NO_THROW(dl::check_mapped_files());
    ::unlink(path.c_str());
}
