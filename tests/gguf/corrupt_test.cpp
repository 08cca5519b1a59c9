// Corrupt and truncated GGUF images: every one must give a dl::Error naming the problem, never a
// crash or an out-of-bounds read (run under -fsanitize=address,undefined to prove the latter).
#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf.h"
#include "image.h"

namespace dl::gguf {
namespace {

using test::expect_error;
using test::Image;

enum : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 };

// Positions of the fields that the targeted cases overwrite.
struct Fields {
    size_t n_tensors, n_kv, key0_len, str_len, arr_type, arr_len, bool_val;
    size_t t0_ndims, t0_dim0, t0_type, t0_offset, t1_offset, data_start;
};

// A small valid file: a few keys (string, array of strings, bool), a Q4_K, an F32 and an F16
// tensor, default alignment.
Image base_image(Fields* f = nullptr) {
    Fields x{};
    Image m;
    m.raw("GGUF", 4).u32(3);
    x.n_tensors = m.size();
    m.u64(3);
    x.n_kv = m.size();
    m.u64(4);
    x.key0_len = m.size();
    m.key("general.architecture", STR);
    x.str_len = m.size();
    m.str("qwen35");
    m.key("tokenizer.ggml.tokens", ARR);
    x.arr_type = m.size();
    m.u32(STR);
    x.arr_len = m.size();
    m.u64(3).str("<s>").str("hello").str(" world");
    m.key("general.flag", BOOL);
    x.bool_val = m.size();
    m.u8(1);
    m.key("x.scores", ARR).u32(F32).u64(2).f32(0.5f).f32(-1);
    m.str("blk.0.ffn_up.weight");
    x.t0_ndims = m.size();
    m.u32(2);
    x.t0_dim0 = m.size();
    m.u64(256).u64(1);
    x.t0_type = m.size();
    m.u32(12);  // q4_K: 144 bytes
    x.t0_offset = m.size();
    m.u64(0);
    m.str("output_norm.weight").u32(1).u64(4).u32(0);
    x.t1_offset = m.size();
    m.u64(160);
    m.str("token_embd.weight").u32(2).u64(2).u64(2).u32(1).u64(192);  // f16, 8 bytes
    m.pad_to(32);
    x.data_start = m.size();
    for (int i = 0; i < 200; ++i) m.u8((uint8_t)(i * 13));
    if (f) *f = x;
    return m;
}

// Reads every value and every tensor byte, so that a bad pointer shows up under ASan.
uint64_t touch(const File& f) {
    uint64_t h = 0;
    for (const auto& [k, v] : f.metadata()) h += format_value(v, 1000).size() + k.size();
    for (const auto& t : f.tensors())
        for (uint64_t i = 0; i < t.nbytes; ++i) h += t.data[i];
    return h;
}

// Parses from a heap buffer of exactly the image's size, so a read past it is caught by ASan.
File parse_exact(const std::vector<uint8_t>& bytes, std::string name = "model.gguf") {
    std::vector<uint8_t> copy(bytes);
    File f = File::parse(copy.data(), copy.size(), name);
    touch(f);
    return f;
}

template <typename T>
void put(Image& m, size_t at, T x) {
    std::memcpy(m.b.data() + at, &x, sizeof(T));
}

TEST(GgufCorrupt, BaseImageIsValid) {
    Image m = base_image();
    File f = parse_exact(m.b);
    EXPECT_EQ(f.tensors().size(), 3u);
    EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").string_at(2), " world");
    EXPECT_EQ(f.tensor("token_embd.weight")->nbytes, 8u);
}

TEST(GgufCorrupt, EveryTruncationIsACleanError) {
    Image m = base_image();
    for (size_t n = 0; n < m.size(); ++n) {
        std::vector<uint8_t> cut(m.b.begin(), m.b.begin() + n);
        // Cutting only the zero padding of the last tensor's tail is not possible here: the
        // image ends with tensor data, so every shorter length must fail.
        try {
            File f = File::parse(cut.data(), cut.size(), "model.gguf");
            ADD_FAILURE() << "a file cut to " << n << " bytes was accepted";
        } catch (const dl::Error& e) {
            std::string msg = e.what();
            EXPECT_EQ(msg.rfind("model.gguf", 0), 0u) << msg;
        }
    }
}

TEST(GgufCorrupt, TruncatedTensorDataNamesTheTensorAndSizes) {
    Fields x;
    Image m = base_image(&x);
    m.b.resize(x.data_start + 100);
    expect_error([&] { parse_exact(m.b); }, {"model.gguf is truncated", "'blk.0.ffn_up.weight'",
                                             "144 bytes", "offset " + std::to_string(x.data_start),
                                             "ends at " + std::to_string(x.data_start + 100)});
}

TEST(GgufCorrupt, EverySingleByteChangeIsHandled) {
    Image m = base_image();
    for (size_t i = 0; i < m.size(); ++i) {
        for (uint8_t v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
            Image c = m;
            c.b[i] = v;
            try {
                parse_exact(c.b);
            } catch (const dl::Error&) {
            }
            c.b[i] = m.b[i] ^ 0x5a;
            try {
                parse_exact(c.b);
            } catch (const dl::Error&) {
            }
        }
    }
}

TEST(GgufCorrupt, RandomMutationsNeverCrash) {
    Image m = base_image();
    std::mt19937_64 rng(12345);
    const uint64_t interesting[] = {0,          1,          3,          31,         32,
                                    0x7fffffff, 0x80000000, 0xffffffff, 1ull << 32, 1ull << 62,
                                    ~0ull >> 1, ~0ull,      ~0ull - 7};
    int accepted = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::vector<uint8_t> b = m.b;
        int n_mut = 1 + (int)(rng() % 4);
        for (int k = 0; k < n_mut && !b.empty(); ++k) {
            size_t at = rng() % b.size();
            switch (rng() % 4) {
                case 0:
                    b[at] = (uint8_t)rng();
                    break;
                case 1:
                    if (at + 8 <= b.size()) {
                        uint64_t x = interesting[rng() % std::size(interesting)];
                        std::memcpy(b.data() + at, &x, 8);
                    }
                    break;
                case 2:
                    b.erase(b.begin() + at, b.begin() + std::min(b.size(), at + rng() % 16));
                    break;
                case 3:
                    b.insert(b.begin() + at, rng() % 16, (uint8_t)rng());
                    break;
            }
        }
        try {
            parse_exact(b);
            ++accepted;
        } catch (const dl::Error&) {
        }
    }
    // Some mutations hit tensor data or string contents and leave a valid file.
    EXPECT_GT(accepted, 0);
}

TEST(GgufCorrupt, NotGguf) {
    Image m = base_image();
    m.b[0] = 'X';
    expect_error([&] { parse_exact(m.b); }, {"model.gguf is not a GGUF file"});
    expect_error([&] { parse_exact({}); }, {"not a GGUF file"});
    expect_error([&] { parse_exact({'G', 'G', 'U'}); }, {"not a GGUF file"});
    // Found by the fuzzer: 9 bytes, too short for the safetensors sniff that reads bytes 8-9.
    expect_error(
        [&] {
            parse_exact({'*', 'F', 'G', '*', 'F', 'G', ';', ';', 'F'});
        },
        {"not a GGUF file"});
    std::vector<uint8_t> st = {4, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'a', '}'};
    expect_error([&] { parse_exact(st); }, {"looks like safetensors"});
}

TEST(GgufCorrupt, HugeCounts) {
    Fields x;
    for (uint64_t n : {~0ull, 1ull << 40, 1000000ull}) {
        Image m = base_image(&x);
        put<uint64_t>(m, x.n_tensors, n);
        expect_error([&] { parse_exact(m.b); }, {"claims", "tensors"});
        m = base_image(&x);
        put<uint64_t>(m, x.n_kv, n);
        expect_error([&] { parse_exact(m.b); }, {"claims", "metadata entries"});
    }
    // A count that fits the byte bound but not the actual contents.
    Image m = base_image(&x);
    put<uint64_t>(m, x.n_kv, 10);
    expect_error([&] { parse_exact(m.b); }, {"model.gguf"});
    m = base_image(&x);
    put<uint64_t>(m, x.n_tensors, 5);
    expect_error([&] { parse_exact(m.b); }, {"model.gguf"});
}

TEST(GgufCorrupt, StringAndArrayLengths) {
    Fields x;
    for (uint64_t n : {~0ull, ~0ull - 7, 1ull << 63, 100000ull}) {
        Image m = base_image(&x);
        put<uint64_t>(m, x.key0_len, n);
        expect_error([&] { parse_exact(m.b); }, {"claims a string of", "metadata entry 0"});
        m = base_image(&x);
        put<uint64_t>(m, x.str_len, n);
        expect_error([&] { parse_exact(m.b); }, {"claims a string of", "'general.architecture'"});
        m = base_image(&x);
        put<uint64_t>(m, x.arr_len, n);
        expect_error([&] { parse_exact(m.b); }, {"array elements", "'tokenizer.ggml.tokens'"});
    }
}

TEST(GgufCorrupt, UnknownValueTypes) {
    Fields x;
    Image m = base_image(&x);
    put<uint32_t>(m, x.str_len - 4, 13);
    expect_error([&] { parse_exact(m.b); }, {"unknown value type 13", "general.architecture"});
    m = base_image(&x);
    put<uint32_t>(m, x.arr_type, 0xffffffff);
    expect_error([&] { parse_exact(m.b); }, {"unknown value type 4294967295"});
    m = base_image(&x);
    put<uint8_t>(m, x.bool_val, 2);
    expect_error([&] { parse_exact(m.b); }, {"bool", "general.flag"});
}

TEST(GgufCorrupt, DeepNestingIsRefused) {
    Image m;
    m.header(3, 0, 1).key("deep", ARR);
    for (int i = 0; i < 10; ++i) m.u32(ARR).u64(1);
    m.u32(U8).u64(0);
    expect_error([&] { parse_exact(m.b); }, {"nests arrays", "'deep'"});
    // A million-level nesting must not exhaust the stack either.
    Image d;
    d.header(3, 0, 1).key("deep", ARR);
    for (int i = 0; i < 100000; ++i) d.u32(ARR).u64(1);
    expect_error([&] { parse_exact(d.b); }, {"nests arrays"});
}

TEST(GgufCorrupt, DuplicatesAndEmptyNames) {
    Image m;
    m.header(3, 0, 2).key("a.b", U8).u8(1).key("a.b", U8).u8(2);
    expect_error([&] { parse_exact(m.b); }, {"'a.b' appears more than once"});
    Image e;
    e.header(3, 0, 1).key("", U8).u8(1);
    expect_error([&] { parse_exact(e.b); }, {"empty key"});
    Image t;
    t.header(3, 2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad_to(32).zeros(64);
    expect_error([&] { parse_exact(t.b); }, {"tensor 'w' appears more than once"});
    Image n;
    n.header(3, 1, 0).tensor("", {4}, 0, 0).pad_to(32).zeros(32);
    expect_error([&] { parse_exact(n.b); }, {"empty name"});
}

TEST(GgufCorrupt, BadAlignment) {
    auto with_alignment = [](uint32_t type, uint64_t a) {
        Image m;
        m.header(3, 1, 1).key("general.alignment", type);
        if (type == U32) m.u32((uint32_t)a);
        if (type == U64) m.u64(a);
        if (type == STR) m.str("32");
        m.tensor("w", {4}, 0, 0).pad_to(64).zeros(64);
        return m;
    };
    expect_error([&] { parse_exact(with_alignment(U32, 0).b); }, {"general.alignment is 0"});
    expect_error([&] { parse_exact(with_alignment(U32, 48).b); }, {"not a power of two"});
    expect_error([&] { parse_exact(with_alignment(STR, 0).b); }, {"general.alignment is a string"});
    // A power of two beyond the file: the data section cannot start.
    expect_error([&] { parse_exact(with_alignment(U64, 1ull << 62).b); }, {"model.gguf"});
    expect_error([&] { parse_exact(with_alignment(U64, 1ull << 63).b); }, {"model.gguf"});
    EXPECT_EQ(parse_exact(with_alignment(U64, 64).b).alignment(), 64u);
}

TEST(GgufCorrupt, Dimensions) {
    Fields x;
    for (uint32_t nd : {0u, 5u, 0xffffffffu}) {
        Image m = base_image(&x);
        put<uint32_t>(m, x.t0_ndims, nd);
        expect_error([&] { parse_exact(m.b); },
                     {std::to_string(nd) + " dimensions", "'blk.0.ffn_up.weight'"});
    }
    for (uint64_t d : {0ull, 1ull << 63, ~0ull}) {
        Image m = base_image(&x);
        put<uint64_t>(m, x.t0_dim0 + 8, d);
        expect_error([&] { parse_exact(m.b); }, {"dimension 1 of size " + std::to_string(d)});
    }
    // Elements overflow int64: 2^32 x 2^32.
    Image m;
    m.header(3, 1, 0).tensor("big", {1ull << 32, 1ull << 32}, 0, 0).pad_to(32).zeros(32);
    expect_error([&] { parse_exact(m.b); }, {"'big'", "more elements"});
    // Elements fit int64 but bytes overflow uint64: f64 of 2^62 elements.
    Image b;
    b.header(3, 1, 0).tensor("wide", {1ull << 31, 1ull << 31}, 28, 0).pad_to(32).zeros(32);
    expect_error([&] { parse_exact(b.b); }, {"'wide'", "64 bits"});
}

TEST(GgufCorrupt, TensorTypes) {
    Fields x;
    for (uint32_t t : {4u, 5u, 31u, 40u, 1000u}) {
        Image m = base_image(&x);
        put<uint32_t>(m, x.t0_type, t);
        expect_error([&] { parse_exact(m.b); },
                     {"unknown type number " + std::to_string(t), "'blk.0.ffn_up.weight'"});
    }
    Image m = base_image(&x);
    put<uint64_t>(m, x.t0_dim0, 100);  // q4_K rows must be multiples of 256
    expect_error([&] { parse_exact(m.b); }, {"rows of 100 elements", "block size 256", "q4_K"});
}

TEST(GgufCorrupt, Offsets) {
    Fields x;
    Image m = base_image(&x);
    put<uint64_t>(m, x.t1_offset, 164);
    expect_error([&] { parse_exact(m.b); }, {"'output_norm.weight'", "not a multiple", "32"});
    for (uint64_t off : {~0ull - 31, 1ull << 62, 4096ull}) {
        m = base_image(&x);
        put<uint64_t>(m, x.t1_offset, off);
        expect_error([&] { parse_exact(m.b); }, {"is truncated", "'output_norm.weight'"});
    }
    m = base_image(&x);
    put<uint64_t>(m, x.t1_offset, 128);  // inside the q4_K tensor (0..144)
    expect_error([&] { parse_exact(m.b); }, {"overlap", "'blk.0.ffn_up.weight'"});
    // Tensors but no data section at all.
    m = base_image(&x);
    m.b.resize(x.data_start - 5);
    expect_error([&] { parse_exact(m.b); }, {"is truncated"});
}

TEST(GgufCorrupt, ErrorsFromOpenNameThePath) {
    expect_error([] { File::open("/nonexistent/dir/model.gguf"); },
                 {"/nonexistent/dir/model.gguf"});
}

TEST(GgufGetters, MissingAndWrongTypeNameTheKey) {
    Image m = base_image();
    File f = parse_exact(m.b, "m.gguf");
    expect_error([&] { f.get_int("general.architecture"); },
                 {"m.gguf", "'general.architecture'", "string", "integer"});
    expect_error([&] { f.get_string("nope.key"); }, {"m.gguf", "'nope.key'", "missing"});
    expect_error([&] { f.get_array("general.flag"); }, {"'general.flag'", "bool"});
    expect_error([&] { f.get_bool("x.scores"); }, {"'x.scores'", "array of float32"});
    expect_error([&] { f.get_float("general.architecture", 1.0); }, {"'general.architecture'"});
    EXPECT_EQ(f.get_int("nope", 7), 7);
    EXPECT_EQ(f.get_float("nope", 2.5), 2.5);
    EXPECT_EQ(f.get_string("nope", "d"), "d");
    EXPECT_EQ(f.get_string("general.architecture", "d"), "qwen35");
    EXPECT_TRUE(f.get_bool("general.flag"));
    EXPECT_FALSE(f.has("nope"));
    expect_error([&] { f.get_array("x.scores").string_at(0); }, {"float32"});
    expect_error([&] { f.get_array("x.scores").float_at(2); }, {"out of range"});
    EXPECT_EQ(f.get_array("x.scores").float_at(1), -1.0);
}

}  // namespace
}  // namespace dl::gguf
