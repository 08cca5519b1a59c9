// The .npy writer against the format description, byte by byte (numpy itself reads the files in
// tests/tools when it is installed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "engine/npy.h"

using namespace dl;

namespace {

std::string tmp_path(const std::string& name) {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    return std::string(d ? d : "/tmp") + "/" + name;
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// Checks the preamble and returns the dict text (without padding) and the data offset.
std::pair<std::string, size_t> parse_header(const std::vector<uint8_t>& b) {
    EXPECT_GE(b.size(), 10u);
    EXPECT_EQ(std::memcmp(b.data(), "\x93NUMPY", 6), 0);
    EXPECT_EQ(b[6], 1);
    EXPECT_EQ(b[7], 0);
    size_t len = b[8] | (b[9] << 8);
    size_t data = 10 + len;
    EXPECT_EQ(data % 64, 0u);
    EXPECT_EQ(b[data - 1], '\n');
    std::string dict(b.begin() + 10, b.begin() + data - 1);
    while (!dict.empty() && dict.back() == ' ') dict.pop_back();
    return {dict, data};
}

}  // namespace

TEST(Npy, HeaderText) {
    int64_t s2[] = {3, 248320};
    std::string h = npy::header_f32(s2);
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_NE(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 248320), }"),
              std::string::npos);
    int64_t s1[] = {5};
    EXPECT_NE(npy::header_f32(s1).find("'shape': (5,), }"), std::string::npos);
}

TEST(Npy, WholeArrayRoundTrip) {
    std::string path = tmp_path("npy_whole.npy");
    std::vector<float> v = {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -0.0f};
    int64_t shape[] = {2, 3};
    npy::write_f32(path, v, shape);
    auto b = read_all(path);
    auto [dict, off] = parse_header(b);
    EXPECT_EQ(dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    ASSERT_EQ(b.size(), off + v.size() * 4);
    // little-endian IEEE-754 float32, by hand for 1.5 (0x3fc00000)
    EXPECT_EQ(b[off + 0], 0x00);
    EXPECT_EQ(b[off + 2], 0xc0);
    EXPECT_EQ(b[off + 3], 0x3f);
    std::vector<float> back(v.size());
    std::memcpy(back.data(), b.data() + off, v.size() * 4);
    EXPECT_EQ(back, v);
}

TEST(Npy, RowWriterFixesTheRowCount) {
    std::string path = tmp_path("npy_rows.npy");
    {
        npy::RowWriter w(path, 4);
        for (int r = 0; r < 3; ++r) {
            std::vector<float> row = {(float)r, r + 0.5f, -(float)r, 7.0f};
            w.append(row);
        }
        w.finish();
    }
    auto b = read_all(path);
    auto [dict, off] = parse_header(b);
    EXPECT_EQ(dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    ASSERT_EQ(b.size(), off + 12 * 4);
    float x;
    std::memcpy(&x, b.data() + off + (2 * 4 + 1) * 4, 4);
    EXPECT_EQ(x, 2.5f);
}

TEST(Npy, UnwritablePathIsAnError) {
    std::vector<float> v = {1.f};
    int64_t shape[] = {1};
    EXPECT_THROW(npy::write_f32("/nonexistent-dir/x.npy", v, shape), Error);
    EXPECT_THROW(npy::RowWriter("/nonexistent-dir/y.npy", 3), Error);
}

// A dump that fails before finish() (the run ended in an error) used to leave a file whose header
// said shape (0, N) with rows after it, written over the previous dump.
TEST(Npy, UnfinishedRowWriterKeepsTheEarlierFile) {
    const std::string path = tmp_path("npy_unfinished.npy");
    const std::vector<float> earlier = {1, 2, 3, 4};
    const int64_t shape[2] = {2, 2};
    npy::write_f32(path, earlier, shape);
    const std::vector<uint8_t> before = read_all(path);
    {
        npy::RowWriter w(path, 2);
        const float row[2] = {7, 8};
        w.append(row);
        // no finish(): the writer goes out of scope as an exception would take it
    }
    EXPECT_EQ(read_all(path), before);
    size_t leftovers = 0;
    for (const auto& e :
         std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
        leftovers += e.path().filename().string().rfind("npy_unfinished.npy.", 0) == 0;
    EXPECT_EQ(leftovers, 0u);
}
