// The safetensors reader against files built byte by byte in the test (header length, JSON,
// data), sharded folders, and corrupt headers.
#include "gguf/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "image.h"

namespace dl::safetensors {
namespace {

using test::expect_error;

std::vector<uint8_t> st_image(const std::string& header_json, const std::vector<uint8_t>& data) {
    test::Image m;
    m.u64(header_json.size()).raw(header_json.data(), header_json.size());
    m.raw(data.data(), data.size());
    return m.b;
}

std::vector<uint8_t> le_bytes(std::initializer_list<uint32_t> words, size_t width) {
    std::vector<uint8_t> b;
    for (uint32_t w : words)
        for (size_t i = 0; i < width; ++i) b.push_back((uint8_t)(w >> (8 * i)));
    return b;
}

File parse_exact(const std::vector<uint8_t>& bytes) {
    static std::vector<std::vector<uint8_t>> keep;  // the bytes must outlive the File
    keep.push_back(bytes);
    return File::parse(keep.back().data(), keep.back().size(), "model.safetensors");
}

std::string tmp_dir(const std::string& name) {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    std::string dir = std::string(d && *d ? d : "/tmp") + "/st_" + name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

void write_file(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream(path, std::ios::binary).write((const char*)b.data(), (std::streamsize)b.size());
}

void write_file(const std::string& path, const std::string& s) {
    std::ofstream(path, std::ios::binary) << s;
}

// F32 [2,2], F16 [3] and BF16 [2] with values chosen to be exact in each format.
std::vector<uint8_t> three_dtypes() {
    std::vector<uint8_t> data =
        le_bytes({std::bit_cast<uint32_t>(1.0f), std::bit_cast<uint32_t>(-2.5f),
                  std::bit_cast<uint32_t>(0.0f), std::bit_cast<uint32_t>(1e-3f)},
                 4);
    // f16: 1.0 = 0x3c00, -0.5 = 0xb800, 65504 = 0x7bff
    auto h = le_bytes({0x3c00, 0xb800, 0x7bff}, 2);
    data.insert(data.end(), h.begin(), h.end());
    // bf16: 3.0 = 0x4040, -inf = 0xff80
    auto bf = le_bytes({0x4040, 0xff80}, 2);
    data.insert(data.end(), bf.begin(), bf.end());
    std::string json = R"({"__metadata__":{"format":"pt"},)"
                       R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                       R"("h":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]}})";
    return st_image(json, data);
}

TEST(Safetensors, ReadsF32F16BF16) {
    File f = parse_exact(three_dtypes());
    EXPECT_EQ(f.metadata().at("format"), "pt");
    ASSERT_EQ(f.tensors().size(), 3u);
    const Tensor* w = f.tensor("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->dtype, DType::F32);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(w->n_elements(), 4);
    EXPECT_EQ(read_f32(*w), (std::vector<float>{1.0f, -2.5f, 0.0f, 1e-3f}));
    EXPECT_EQ(read_f32(*f.tensor("h")), (std::vector<float>{1.0f, -0.5f, 65504.0f}));
    auto b = read_f32(*f.tensor("b"));
    EXPECT_EQ(b[0], 3.0f);
    EXPECT_TRUE(std::isinf(b[1]) && b[1] < 0);
    EXPECT_EQ(f.tensor("missing"), nullptr);
}

TEST(Safetensors, ReadsOtherDtypes) {
    std::vector<uint8_t> data = {0x38, 0xc4, 0x7e,         // F8_E4M3: 1.0, -3.0, 448
                                 0x3c, 0xbe,               // F8_E5M2: 1.0, -1.5
                                 0xff, 0x01, 0x00, 0x80};  // I16: 511, -32768
    std::string json = R"({"a":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[0,3]},)"
                       R"("b":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[3,5]},)"
                       R"("c":{"dtype":"I16","shape":[2],"data_offsets":[5,9]},)"
                       R"("s":{"dtype":"F32","shape":[0],"data_offsets":[9,9]}})";
    File f = parse_exact(st_image(json, data));
    EXPECT_EQ(read_f32(*f.tensor("a")), (std::vector<float>{1.0f, -3.0f, 448.0f}));
    EXPECT_EQ(read_f32(*f.tensor("b")), (std::vector<float>{1.0f, -1.5f}));
    EXPECT_EQ(read_f32(*f.tensor("c")), (std::vector<float>{511.0f, -32768.0f}));
    EXPECT_EQ(f.tensor("s")->n_elements(), 0);
    EXPECT_TRUE(read_f32(*f.tensor("s")).empty());
}

TEST(Safetensors, CorruptHeaders) {
    const std::vector<uint8_t> d16(16, 0);
    auto bad = [&](const std::string& json, std::vector<std::string> frags,
                   const std::vector<uint8_t>& data) {
        expect_error([&] { parse_exact(st_image(json, data)); }, frags);
    };
    bad(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", {"JSON"}, d16);
    bad(R"([1,2])", {"not a JSON object"}, d16);
    bad(R"({"w":{"dtype":"F33","shape":[4],"data_offsets":[0,16]}})",
        {"'w'", "unknown dtype 'F33'"}, d16);
    bad(R"({"w":{"shape":[4],"data_offsets":[0,16]}})", {"'w'", "dtype"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", {"'w'", "-4"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[4.5],"data_offsets":[0,16]}})", {"'w'"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", {"'w'", "20 bytes", "16"},
        d16);
    bad(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", {"'w'", "data_offsets"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", {"'w'", "data_offsets"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", {"is truncated", "'w'"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})",
        {"'w'", "64-bit"}, d16);
    bad(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,16]}})",
        {"'w'", "64 bits"}, d16);
    bad(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551615,16]}})", {"'w'"},
        d16);
    bad(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
        {"overlap"}, d16);
    bad(R"({"__metadata__":{"k":1}})", {"__metadata__", "'k'"}, d16);
    bad(R"({"__metadata__":[]})", {"__metadata__"}, d16);
    bad(R"({"w":[]})", {"'w'", "not a JSON object"}, d16);

    // Header length beyond the file, and files too short to hold one.
    test::Image m;
    m.u64(1000).raw("{}", 2);
    expect_error([&] { parse_exact(m.b); }, {"header claims 1000 bytes"});
    expect_error([&] { parse_exact({1, 2, 3}); }, {"not a safetensors file"});
    test::Image huge;
    huge.u64(~0ull).raw("{}", 2);
    expect_error([&] { parse_exact(huge.b); }, {"model.safetensors"});
}

TEST(Safetensors, EveryTruncationIsACleanError) {
    auto img = three_dtypes();
    for (size_t n = 0; n < img.size(); ++n) {
        std::vector<uint8_t> cut(img.begin(), img.begin() + n);
        EXPECT_THROW(parse_exact(cut), dl::Error) << "cut at " << n;
    }
}

TEST(Safetensors, ShardedFolderWithIndex) {
    std::string dir = tmp_dir("sharded");
    std::string json1 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    std::string json2 = R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})";
    write_file(dir + "/model-00001-of-00002.safetensors",
               st_image(json1, le_bytes({0x3f800000, 0x40000000}, 4)));  // 1.0, 2.0
    write_file(dir + "/model-00002-of-00002.safetensors", st_image(json2, le_bytes({0xc000}, 2)));
    write_file(
        dir + "/model.safetensors.index.json",
        R"({"metadata":{"total_size":10},"weight_map":{)"
        R"("a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
    Checkpoint c = Checkpoint::open(dir);
    EXPECT_EQ(c.files().size(), 2u);
    auto all = c.tensors();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0]->name, "a");
    EXPECT_EQ(read_f32(c.require("a")), (std::vector<float>{1.0f, 2.0f}));
    EXPECT_EQ(read_f32(c.require("b")), (std::vector<float>{-2.0f}));
    expect_error([&] { c.require("zzz"); }, {"'zzz'", dir});

    // The index names a tensor its shard lacks.
    write_file(dir + "/model.safetensors.index.json",
               R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)"
               R"("c":"model-00002-of-00002.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir); }, {"'c'", "does not hold it"});
    // Shards outside the folder are refused.
    write_file(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir); }, {"invalid shard"});
    write_file(dir + "/model.safetensors.index.json",
               R"({"weight_map":{"a":"missing.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir); }, {"missing.safetensors"});
    write_file(dir + "/model.safetensors.index.json", R"({"weight_map":[1]})");
    expect_error([&] { Checkpoint::open(dir); }, {"weight_map"});
    write_file(dir + "/model.safetensors.index.json", "{not json");
    expect_error([&] { Checkpoint::open(dir); }, {"not valid JSON"});
}

TEST(Safetensors, SingleFileAndFolder) {
    std::string dir = tmp_dir("single");
    write_file(dir + "/model.safetensors", three_dtypes());
    Checkpoint a = Checkpoint::open(dir);
    Checkpoint b = Checkpoint::open(dir + "/model.safetensors");
    EXPECT_EQ(a.tensors().size(), 3u);
    EXPECT_EQ(read_f32(a.require("w")), read_f32(b.require("w")));
    std::string empty = tmp_dir("empty");
    expect_error([&] { Checkpoint::open(empty); }, {"neither", empty});
    expect_error([&] { Checkpoint::open(empty + "/nope.safetensors"); }, {"nope.safetensors"});
}

}  // namespace
}  // namespace dl::safetensors
