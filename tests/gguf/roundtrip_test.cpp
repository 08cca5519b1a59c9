// Writer -> reader round trips: every value type (with its extreme values), arrays in every
// representation, tensors of many block formats bit for bit, alignments, files on disk, and the
// checks the writer makes on what it is given.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "gguf/gguf.h"
#include "image.h"

namespace dl::gguf {
namespace {

using test::expect_error;

std::string tmp_dir() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    std::string dir = d && *d ? d : "/tmp";
    dir += "/gguf_roundtrip";
    std::filesystem::create_directories(dir);
    return dir;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = (uint8_t)rng();
    return b;
}

Value make(ValueType t, uint64_t u) {
    return Value{t, u};
}
Value make(ValueType t, int64_t i) {
    return Value{t, i};
}

TEST(GgufRoundTrip, EveryScalarTypeAtItsLimits) {
    struct Case {
        std::string key;
        Value v;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<Case> cases = {
        {"u8.min", make(ValueType::UINT8, uint64_t{0})},
        {"u8.max", make(ValueType::UINT8, uint64_t{255})},
        {"i8.min", make(ValueType::INT8, int64_t{-128})},
        {"i8.max", make(ValueType::INT8, int64_t{127})},
        {"u16.max", make(ValueType::UINT16, uint64_t{65535})},
        {"i16.min", make(ValueType::INT16, int64_t{-32768})},
        {"u32.max", Value::u32(UINT32_MAX)},
        {"i32.min", Value::i32(INT32_MIN)},
        {"i32.max", Value::i32(INT32_MAX)},
        {"u64.max", Value::u64(UINT64_MAX)},
        {"i64.min", make(ValueType::INT64, int64_t{INT64_MIN})},
        {"i64.max", make(ValueType::INT64, int64_t{INT64_MAX})},
        {"f32.tiny", Value::f32(std::numeric_limits<float>::denorm_min())},
        {"f32.inf", Value::f32(-std::numeric_limits<float>::infinity())},
        {"f32.nan", Value::f32(std::numeric_limits<float>::quiet_NaN())},
        {"f64.pi", Value{ValueType::FLOAT64, 3.141592653589793}},
        {"f64.nan", Value{ValueType::FLOAT64, nan}},
        {"bool.t", Value::boolean(true)},
        {"bool.f", Value::boolean(false)},
        {"str.empty", Value::str("")},
        {"str.nul", Value::str(std::string("a\0b", 3))},
        {"str.long", Value::str(std::string(100000, 'x'))},
    };
    Writer w;
    for (const auto& c : cases) w.set(c.key, c.v);
    auto bytes = w.to_bytes();
    File f = File::parse(bytes.data(), bytes.size());
    ASSERT_EQ(f.metadata().size(), cases.size());
    for (const auto& c : cases) {
        const Value* v = f.find(c.key);
        ASSERT_NE(v, nullptr) << c.key;
        EXPECT_EQ(v->type, c.v.type) << c.key;
        if (c.v.is_integer()) {
            if (std::holds_alternative<uint64_t>(c.v.v))
                EXPECT_EQ(v->as_uint(), c.v.as_uint()) << c.key;
            else
                EXPECT_EQ(v->as_int(), c.v.as_int()) << c.key;
        } else if (c.v.type == ValueType::FLOAT32 || c.v.type == ValueType::FLOAT64) {
            double a = v->as_float(), b = c.v.as_float();
            if (std::isnan(b))
                EXPECT_TRUE(std::isnan(a)) << c.key;
            else
                EXPECT_EQ(a, b) << c.key;
        } else if (c.v.type == ValueType::BOOL) {
            EXPECT_EQ(v->as_bool(), c.v.as_bool()) << c.key;
        } else {
            EXPECT_EQ(v->as_string(), c.v.as_string()) << c.key;
        }
    }
    // Conversions across signedness are checked, not wrapped.
    expect_error([&] { f.get_int("u64.max"); }, {"'u64.max'", "does not fit"});
    expect_error([&] { f.get_uint("i8.min"); }, {"'i8.min'", "negative"});
    EXPECT_EQ(f.get_float("i32.max"), (double)INT32_MAX);
}

TEST(GgufRoundTrip, ArraysOfEveryElementType) {
    Writer w;
    const ValueType all[] = {ValueType::UINT8,   ValueType::INT8,   ValueType::UINT16,
                             ValueType::INT16,   ValueType::UINT32, ValueType::INT32,
                             ValueType::UINT64,  ValueType::INT64,  ValueType::FLOAT32,
                             ValueType::FLOAT64, ValueType::BOOL,   ValueType::STRING};
    // Each type as items (three extreme-ish elements) and empty.
    for (ValueType t : all) {
        auto a = std::make_shared<Array>();
        a->elem_type = t;
        for (int i = 0; i < 3; ++i) {
            switch (t) {
                case ValueType::UINT8:
                    a->items.push_back(make(t, uint64_t(250 + i)));
                    break;
                case ValueType::INT8:
                    a->items.push_back(make(t, int64_t(-128 + i)));
                    break;
                case ValueType::UINT16:
                    a->items.push_back(make(t, uint64_t(65533 + i)));
                    break;
                case ValueType::INT16:
                    a->items.push_back(make(t, int64_t(-32768 + i)));
                    break;
                case ValueType::UINT32:
                    a->items.push_back(Value::u32(UINT32_MAX - i));
                    break;
                case ValueType::INT32:
                    a->items.push_back(Value::i32(INT32_MIN + i));
                    break;
                case ValueType::UINT64:
                    a->items.push_back(Value::u64(UINT64_MAX - i));
                    break;
                case ValueType::INT64:
                    a->items.push_back(make(t, int64_t(INT64_MIN + i)));
                    break;
                case ValueType::FLOAT32:
                    a->items.push_back(Value::f32(i + 0.5f));
                    break;
                case ValueType::FLOAT64:
                    a->items.push_back(Value{t, i + 0.25});
                    break;
                case ValueType::BOOL:
                    a->items.push_back(Value::boolean(i == 1));
                    break;
                default:
                    a->items.push_back(Value::str(std::string(i, 'z')));
                    break;
            }
        }
        std::string name(value_type_name(t));
        w.set("arr." + name, Value{ValueType::ARRAY, a});
        auto e = std::make_shared<Array>();
        e->elem_type = t;
        w.set("empty." + name, Value{ValueType::ARRAY, e});
    }
    // Fast-path representations.
    auto u8s = std::make_shared<Array>();
    u8s->elem_type = ValueType::UINT8;
    u8s->ints = {0, 255, 7};
    w.set("fast.u8", Value{ValueType::ARRAY, u8s});
    w.set("fast.f32", Value::array_of_f32({1.0f, -2.5f}));
    w.set("fast.str", Value::array_of_strings({"x", "yy"}));
    // Depth 4 is the limit both sides accept.
    Value deep = Value::array_of_i32({42});
    for (int i = 0; i < 3; ++i) {
        auto a = std::make_shared<Array>();
        a->elem_type = ValueType::ARRAY;
        a->items = {deep};
        deep = Value{ValueType::ARRAY, a};
    }
    w.set("deep", deep);

    auto bytes = w.to_bytes();
    File f = File::parse(bytes.data(), bytes.size());
    for (ValueType t : all) {
        std::string name(value_type_name(t));
        const Array& a = f.get_array("arr." + name);
        EXPECT_EQ(a.elem_type, t) << name;
        ASSERT_EQ(a.size(), 3u) << name;
        EXPECT_EQ(f.get_array("empty." + name).size(), 0u) << name;
        EXPECT_EQ(f.get_array("empty." + name).elem_type, t) << name;
        for (size_t i = 0; i < 3; ++i) {
            switch (t) {
                case ValueType::UINT8:
                    EXPECT_EQ(a.int_at(i), 250 + (int)i);
                    break;
                case ValueType::INT8:
                    EXPECT_EQ(a.int_at(i), -128 + (int)i);
                    break;
                case ValueType::UINT16:
                    EXPECT_EQ(a.int_at(i), 65533 + (int)i);
                    break;
                case ValueType::INT16:
                    EXPECT_EQ(a.int_at(i), -32768 + (int)i);
                    break;
                case ValueType::UINT32:
                    EXPECT_EQ(a.int_at(i), (int64_t)UINT32_MAX - (int)i);
                    break;
                case ValueType::INT32:
                    EXPECT_EQ(a.int_at(i), INT32_MIN + (int)i);
                    break;
                case ValueType::UINT64:
                    EXPECT_EQ(a.items[i].as_uint(), UINT64_MAX - i);
                    break;
                case ValueType::INT64:
                    EXPECT_EQ(a.int_at(i), INT64_MIN + (int64_t)i);
                    break;
                case ValueType::FLOAT32:
                    EXPECT_EQ(a.float_at(i), i + 0.5);
                    break;
                case ValueType::FLOAT64:
                    EXPECT_EQ(a.float_at(i), i + 0.25);
                    break;
                case ValueType::BOOL:
                    EXPECT_EQ(a.items[i].as_bool(), i == 1);
                    break;
                default:
                    EXPECT_EQ(a.string_at(i), std::string(i, 'z'));
                    break;
            }
        }
    }
    // The reader puts the tokenizer-sized types in their fast paths.
    EXPECT_EQ(f.get_array("arr.string").strings.size(), 3u);
    EXPECT_EQ(f.get_array("arr.float32").floats.size(), 3u);
    EXPECT_EQ(f.get_array("arr.int16").ints.size(), 3u);
    EXPECT_EQ(f.get_array("fast.u8").ints, (std::vector<int32_t>{0, 255, 7}));
    EXPECT_EQ(f.get_array("fast.f32").floats, (std::vector<float>{1.0f, -2.5f}));
    EXPECT_EQ(f.get_array("fast.str").strings, (std::vector<std::string>{"x", "yy"}));
    const Value* d = f.find("deep");
    for (int i = 0; i < 3; ++i) d = &d->as_array().items.at(0);
    EXPECT_EQ(d->as_array().int_at(0), 42);
}

// Tensors of many block formats: shapes of two blocks per row and three rows, random bytes.
TEST(GgufRoundTrip, TensorsOfManyTypesBitExact) {
    const QType types[] = {QType::F32,    QType::F16,    QType::BF16, QType::Q4_0, QType::Q4_1,
                           QType::Q5_0,   QType::Q5_1,   QType::Q8_0, QType::Q2_K, QType::Q3_K,
                           QType::Q4_K,   QType::Q5_K,   QType::Q6_K, QType::Q8_K, QType::IQ2_XXS,
                           QType::IQ4_NL, QType::IQ4_XS, QType::I8,   QType::I32,  QType::F64,
                           QType::TQ1_0,  QType::MXFP4};
    // Sizes written out independently of the type table (bytes per block / elements per block).
    const std::map<QType, std::pair<int, int>> geometry = {
        {QType::F32, {4, 1}},      {QType::F16, {2, 1}},        {QType::BF16, {2, 1}},
        {QType::Q4_0, {18, 32}},   {QType::Q4_1, {20, 32}},     {QType::Q5_0, {22, 32}},
        {QType::Q5_1, {24, 32}},   {QType::Q8_0, {34, 32}},     {QType::Q2_K, {84, 256}},
        {QType::Q3_K, {110, 256}}, {QType::Q4_K, {144, 256}},   {QType::Q5_K, {176, 256}},
        {QType::Q6_K, {210, 256}}, {QType::Q8_K, {292, 256}},   {QType::IQ2_XXS, {66, 256}},
        {QType::IQ4_NL, {18, 32}}, {QType::IQ4_XS, {136, 256}}, {QType::I8, {1, 1}},
        {QType::I32, {4, 1}},      {QType::F64, {8, 1}},        {QType::TQ1_0, {54, 256}},
        {QType::MXFP4, {17, 32}},
    };
    for (uint64_t align : {32u, 1u, 64u, 4096u}) {
        Writer w;
        w.set_alignment(align);
        std::map<std::string, std::vector<uint8_t>> data;
        uint64_t seed = 1;
        for (QType t : types) {
            auto [bytes_per_block, block] = geometry.at(t);
            std::vector<int64_t> ne = {2 * block, 3};
            std::string name = "w." + std::string(qtype_name(t));
            data[name] = random_bytes(2 * bytes_per_block * 3, seed++);
            w.add_tensor(name, t, ne, data[name]);
        }
        auto bytes = w.to_bytes();
        File f = File::parse(bytes.data(), bytes.size());
        EXPECT_EQ(f.alignment(), align);
        if (align != 32) {
            EXPECT_EQ(f.find("general.alignment")->type, ValueType::UINT32);
        }
        ASSERT_EQ(f.tensors().size(), std::size(types));
        for (size_t i = 0; i < std::size(types); ++i) {
            const TensorInfo& t = f.tensors()[i];  // kept in insertion order
            EXPECT_EQ(t.type, types[i]);
            EXPECT_EQ(t.ne, (std::vector<int64_t>{2 * geometry.at(types[i]).second, 3}));
            EXPECT_EQ(t.offset % align, 0u);
            EXPECT_EQ((size_t)(t.data - bytes.data()) % align, 0u);
            const auto& want = data[t.name];
            ASSERT_EQ(t.nbytes, want.size()) << t.name;
            EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
        }
    }
}

TEST(GgufRoundTrip, WriteToDiskWithProducerAndOpen) {
    std::string path = tmp_dir() + "/producer.gguf";
    std::filesystem::remove(path);
    Writer w;
    w.set("general.architecture", Value::str("test"));
    const int64_t rows = 64, cols = 512;
    size_t produced = 0;
    w.add_tensor("big", QType::F32, {cols, rows}, [&](uint8_t* dst, size_t n) {
        produced = n;
        for (int64_t i = 0; i < rows * cols; ++i) {
            float x = (float)i;
            std::memcpy(dst + 4 * i, &x, 4);
        }
    });
    w.add_tensor("small", QType::F16, {4}, std::vector<uint8_t>(8, 0x3c));
    w.write(path);
    EXPECT_EQ(produced, (size_t)(rows * cols * 4));

    File f = File::open(path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
    const TensorInfo* t = f.tensor("big");
    ASSERT_NE(t, nullptr);
    for (int64_t i : {0l, 1l, 12345l, rows * cols - 1}) {
        float x;
        std::memcpy(&x, t->data + 4 * i, 4);
        EXPECT_EQ(x, (float)i);
    }
    EXPECT_EQ(f.tensor("small")->data[7], 0x3c);
    // The same bytes as the in-memory image.
    auto bytes = w.to_bytes();
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(disk, bytes);
}

int count_temp_files(const std::string& dir, const std::string& prefix) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::string name = e.path().filename().string();
        if (name.rfind(prefix + ".", 0) == 0) ++n;
    }
    return n;
}

TEST(GgufRoundTrip, FailedWriteLeavesNothingBehind) {
    std::string dir = tmp_dir();
    std::string path = dir + "/failing.gguf";
    std::filesystem::remove(path);
    Writer w;
    w.add_tensor("x", QType::F32, {4},
                 [](uint8_t*, size_t) { throw dl::Error("producer failed"); });
    expect_error([&] { w.write(path); }, {"producer failed"});
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_EQ(count_temp_files(dir, "failing.gguf"), 0);

    // Replacing an existing file is atomic: the old content stays until the new one is whole.
    Writer ok;
    ok.set("v", Value::u32(1));
    ok.write(path);
    expect_error([&] { w.write(path); }, {"producer failed"});
    EXPECT_EQ(File::open(path).get_int("v"), 1);
    Writer newer;
    newer.set("v", Value::u32(2));
    newer.write(path);
    EXPECT_EQ(File::open(path).get_int("v"), 2);
    EXPECT_EQ(count_temp_files(dir, "failing.gguf"), 0);

    expect_error([&] { ok.write("/nonexistent-dir/x.gguf"); }, {"/nonexistent-dir/x.gguf"});
}

TEST(GgufWriter, RefusesBadInput) {
    Writer w;
    expect_error(
        [&] {
            w.add_tensor("a", QType::Q4_K, {100, 2}, std::vector<uint8_t>(0));
        },
        {"'a'", "q4_K", "block size 256"});
    expect_error(
        [&] {
            w.add_tensor("a", QType::F32, {4, 2}, std::vector<uint8_t>(31));
        },
        {"'a'", "32 bytes", "31"});
    expect_error([&] { w.add_tensor("a", QType::F32, {}, std::vector<uint8_t>()); },
                 {"0 dimensions"});
    expect_error(
        [&] {
            w.add_tensor("a", QType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4));
        },
        {"5 dimensions"});
    expect_error(
        [&] {
            w.add_tensor("a", QType::F32, {4, 0}, std::vector<uint8_t>());
        },
        {"dimension of size 0"});
    expect_error([&] { w.add_tensor("", QType::F32, {1}, std::vector<uint8_t>(4)); },
                 {"empty name"});
    expect_error([&] { w.add_tensor("a", (QType)5, {1}, std::vector<uint8_t>(4)); },
                 {"unknown type number 5"});
    expect_error(
        [&] { w.add_tensor("a", QType::F32, {1}, std::function<void(uint8_t*, size_t)>()); },
        {"no data producer"});
    w.add_tensor("a", QType::F32, {1}, std::vector<uint8_t>(4));
    expect_error([&] { w.add_tensor("a", QType::F32, {1}, std::vector<uint8_t>(4)); }, {"twice"});

    Writer v;
    v.set("u8", Value{ValueType::UINT8, uint64_t{256}});
    expect_error([&] { v.to_bytes(); }, {"'u8'", "256", "uint8"});
    Writer n;
    n.set("neg", Value{ValueType::UINT32, int64_t{-1}});
    expect_error([&] { n.to_bytes(); }, {"'neg'", "-1"});
    Writer a;
    auto arr = std::make_shared<Array>();
    arr->elem_type = ValueType::STRING;
    arr->items = {Value::u32(1)};
    a.set("mixed", Value{ValueType::ARRAY, arr});
    expect_error([&] { a.to_bytes(); }, {"'mixed'", "array of string holds a uint32"});
    Writer i;
    auto ints = std::make_shared<Array>();
    ints->elem_type = ValueType::UINT8;
    ints->ints = {1, 300};
    i.set("narrow", Value{ValueType::ARRAY, ints});
    expect_error([&] { i.to_bytes(); }, {"'narrow'", "300"});
    Writer k;
    k.set("s", Value{ValueType::STRING, uint64_t{1}});
    expect_error([&] { k.to_bytes(); }, {"'s'", "string"});
    Writer al;
    al.set_alignment(48);
    expect_error([&] { al.to_bytes(); }, {"alignment 48"});
    expect_error([&] { al.set("", Value::u32(1)); }, {"empty key"});
}

TEST(GgufWriter, GeneralAlignmentKeyFollowsTheAlignment) {
    Writer w;
    w.set("general.alignment", Value::u64(64));  // the setter adopts it, the file stores uint32
    w.add_tensor("x", QType::F32, {3}, std::vector<uint8_t>(12, 1));
    w.add_tensor("y", QType::F32, {3}, std::vector<uint8_t>(12, 2));
    auto bytes = w.to_bytes();
    File f = File::parse(bytes.data(), bytes.size());
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.find("general.alignment")->type, ValueType::UINT32);
    EXPECT_EQ(f.tensor("y")->offset, 64u);
    EXPECT_EQ(bytes.size() % 64, 0u);  // the last tensor is padded too
    // Setting a key again replaces it in place.
    w.set("k", Value::u32(1));
    w.set("k", Value::u32(2));
    auto b2 = w.to_bytes();
    File g = File::parse(b2.data(), b2.size());
    EXPECT_EQ(g.get_int("k"), 2);
    EXPECT_EQ(g.metadata().size(), 2u);
}

// A tokenizer of the size Qwen3.5 ships (248k tokens, 247k merges) must load in well under a
// second: the string and float arrays go through the fast paths.
TEST(GgufRoundTrip, LargeTokenizerArraysLoadFast) {
    const size_t n = 248000;
    std::vector<std::string> tokens(n), merges(n);
    std::vector<float> scores(n);
    std::vector<int32_t> types(n);
    for (size_t i = 0; i < n; ++i) {
        tokens[i] = fmt::format("tok{}", i * 7919 % 1000003);
        merges[i] = fmt::format("m{} x", i);
        scores[i] = -(float)i;
        types[i] = (int32_t)(i % 6);
    }
    Writer w;
    w.set("tokenizer.ggml.tokens", Value::array_of_strings(tokens));
    w.set("tokenizer.ggml.merges", Value::array_of_strings(merges));
    w.set("tokenizer.ggml.scores", Value::array_of_f32(scores));
    w.set("tokenizer.ggml.token_type", Value::array_of_i32(types));
    auto bytes = w.to_bytes();
    auto t0 = std::chrono::steady_clock::now();
    File f = File::parse(bytes.data(), bytes.size());
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    RecordProperty("parse_ms", (int)ms);
    EXPECT_LT(ms, 2000.0);  // about 30 ms in a release build; generous for sanitizer builds
    const Array& tk = f.get_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tk.size(), n);
    EXPECT_TRUE(tk.items.empty());
    EXPECT_EQ(tk.strings, tokens);
    EXPECT_EQ(f.get_array("tokenizer.ggml.merges").strings, merges);
    EXPECT_EQ(f.get_array("tokenizer.ggml.scores").floats, scores);
    EXPECT_EQ(f.get_array("tokenizer.ggml.token_type").ints, types);
}

}  // namespace
}  // namespace dl::gguf
