// The reader against GGUF images assembled byte by byte from the public spec (v2 and v3), and the
// writer's output compared byte for byte with the same hand-made image.
#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf.h"
#include "image.h"

namespace dl::gguf {
namespace {

using test::Image;

// Type numbers from the spec, written out here rather than taken from the library's enum.
enum : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 };

// A v2/v3 image with one key of every type, arrays (strings, ints, a uint32 beyond INT32_MAX,
// nested) and two tensors; with_tail pads the last tensor to the alignment as writers do.
// data_start receives where the tensor data begins.
Image spec_image(uint32_t version, bool with_tail = false, size_t* data_start = nullptr) {
    Image m;
    m.header(version, 2, 17);
    m.key("general.architecture", STR).str("llama");
    m.key("t.u8", U8).u8(200);
    m.key("t.i8", I8).u8(0x9c);  // -100
    m.key("t.u16", U16).u16(65000);
    m.key("t.i16", I16).u16(0x8000);  // -32768
    m.key("t.u32", U32).u32(4000000000u);
    m.key("t.i32", I32).i32(-2000000000);
    m.key("t.f32", F32).f32(1.5f);
    m.key("t.bool", BOOL).u8(1);
    m.key("t.u64", U64).u64(0xfedcba9876543210ull);
    m.key("t.i64", I64).i64(-5000000000ll);
    m.key("t.f64", F64).f64(-0.125);
    m.key("t.strings", ARR).u32(STR).u64(3).str("a").str("").str("\xe4\xbd\xa0");
    m.key("t.i32s", ARR).u32(I32).u64(3).i32(-1).i32(0).i32(7);
    m.key("t.u32big", ARR).u32(U32).u64(2).u32(1).u32(3000000000u);
    m.key("t.nested", ARR).u32(ARR).u64(2);
    m.u32(U8).u64(2).u8(1).u8(2);
    m.u32(F32).u64(1).f32(0.5f);
    m.key("t.bools", ARR).u32(BOOL).u64(2).u8(0).u8(1);
    m.tensor("a", {4, 2}, 0, 0);  // f32, 32 bytes
    m.tensor("b", {32}, 8, 32);   // q8_0, one 34-byte block
    m.pad_to(32);
    if (data_start) *data_start = m.size();
    for (int i = 0; i < 8; ++i) m.f32(i * 0.25f);
    for (int i = 0; i < 34; ++i) m.u8((uint8_t)(i * 7 + 1));
    if (with_tail) m.pad_to(32);
    return m;
}

void check_spec_image(const File& f, const Image& m, size_t data_start) {
    EXPECT_EQ(f.metadata().size(), 17u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("t.u8"), 200);
    EXPECT_EQ(f.get_int("t.i8"), -100);
    EXPECT_EQ(f.get_int("t.u16"), 65000);
    EXPECT_EQ(f.get_int("t.i16"), -32768);
    EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(f.get_int("t.i32"), -2000000000);
    EXPECT_EQ(f.get_float("t.f32"), 1.5);
    EXPECT_TRUE(f.get_bool("t.bool"));
    EXPECT_EQ(f.get_uint("t.u64"), 0xfedcba9876543210ull);
    EXPECT_EQ(f.get_int("t.i64"), -5000000000ll);
    EXPECT_EQ(f.get_float("t.f64"), -0.125);
    EXPECT_EQ(f.find("t.u8")->type, ValueType::UINT8);
    EXPECT_EQ(f.find("t.f64")->type, ValueType::FLOAT64);

    const Array& s = f.get_array("t.strings");
    EXPECT_EQ(s.elem_type, ValueType::STRING);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s.string_at(0), "a");
    EXPECT_EQ(s.string_at(1), "");
    EXPECT_EQ(s.string_at(2), "\xe4\xbd\xa0");

    const Array& i = f.get_array("t.i32s");
    ASSERT_EQ(i.size(), 3u);
    EXPECT_EQ(i.int_at(0), -1);
    EXPECT_EQ(i.int_at(2), 7);
    EXPECT_EQ(i.ints, (std::vector<int32_t>{-1, 0, 7}));

    const Array& big = f.get_array("t.u32big");
    ASSERT_EQ(big.size(), 2u);
    EXPECT_EQ(big.int_at(0), 1);
    EXPECT_EQ(big.int_at(1), 3000000000ll);  // not wrapped to a negative int32

    const Array& n = f.get_array("t.nested");
    ASSERT_EQ(n.size(), 2u);
    EXPECT_EQ(n.items[0].as_array().int_at(1), 2);
    EXPECT_EQ(n.items[1].as_array().float_at(0), 0.5);

    const Array& b = f.get_array("t.bools");
    ASSERT_EQ(b.size(), 2u);
    EXPECT_FALSE(b.items[0].as_bool());
    EXPECT_TRUE(b.items[1].as_bool());

    ASSERT_EQ(f.tensors().size(), 2u);
    const TensorInfo* a = f.tensor("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->ne, (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(a->type, QType::F32);
    EXPECT_EQ(a->nbytes, 32u);
    EXPECT_EQ(a->n_elements(), 8);
    EXPECT_EQ(data_start % 32, 0u);
    EXPECT_EQ(a->data, m.b.data() + data_start);
    float x;
    std::memcpy(&x, a->data + 4 * 5, 4);
    EXPECT_EQ(x, 1.25f);
    const TensorInfo* q = f.tensor("b");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, QType::Q8_0);
    EXPECT_EQ(q->nbytes, 34u);
    EXPECT_EQ(q->data, a->data + 32);
    EXPECT_EQ(q->data[33], (uint8_t)(33 * 7 + 1));
    EXPECT_EQ(f.tensor("c"), nullptr);
}

TEST(GgufSpecImage, ReadsVersion3) {
    size_t data_start = 0;
    Image m = spec_image(3, false, &data_start);
    File f = File::parse(m.b.data(), m.size(), "v3.gguf");
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.file_size(), m.size());
    check_spec_image(f, m, data_start);
}

TEST(GgufSpecImage, ReadsVersion2) {
    size_t data_start = 0;
    Image m = spec_image(2, false, &data_start);
    File f = File::parse(m.b.data(), m.size(), "v2.gguf");
    EXPECT_EQ(f.version(), 2u);
    check_spec_image(f, m, data_start);
}

TEST(GgufSpecImage, RejectsVersion1AndUnknownVersions) {
    for (uint32_t v : {1u, 0u, 4u, 77u}) {
        Image m = spec_image(3);
        std::memcpy(m.b.data() + 4, &v, 4);
        std::string msg = test::expect_error([&] { File::parse(m.b.data(), m.size(), "old.gguf"); },
                                             {"old.gguf", "version"});
        if (v == 1) {
            EXPECT_NE(msg.find("unsupported"), std::string::npos) << msg;
        }
    }
    Image m = spec_image(3);
    uint32_t be = 0x03000000;  // version 3 as a big-endian writer stores it
    std::memcpy(m.b.data() + 4, &be, 4);
    test::expect_error([&] { File::parse(m.b.data(), m.size(), "be.gguf"); }, {"big-endian"});
}

TEST(GgufSpecImage, WriterOutputEqualsHandAssembledBytes) {
    Writer w;
    w.set("general.architecture", Value::str("llama"));
    w.set("t.u8", Value{ValueType::UINT8, uint64_t{200}});
    w.set("t.i8", Value{ValueType::INT8, int64_t{-100}});
    w.set("t.u16", Value{ValueType::UINT16, uint64_t{65000}});
    w.set("t.i16", Value{ValueType::INT16, int64_t{-32768}});
    w.set("t.u32", Value::u32(4000000000u));
    w.set("t.i32", Value::i32(-2000000000));
    w.set("t.f32", Value::f32(1.5f));
    w.set("t.bool", Value::boolean(true));
    w.set("t.u64", Value::u64(0xfedcba9876543210ull));
    w.set("t.i64", Value{ValueType::INT64, int64_t{-5000000000ll}});
    w.set("t.f64", Value{ValueType::FLOAT64, -0.125});
    w.set("t.strings", Value::array_of_strings({"a", "", "\xe4\xbd\xa0"}));
    w.set("t.i32s", Value::array_of_i32({-1, 0, 7}));
    auto big = std::make_shared<Array>();
    big->elem_type = ValueType::UINT32;
    big->items = {Value::u32(1), Value::u32(3000000000u)};
    w.set("t.u32big", Value{ValueType::ARRAY, big});
    auto inner1 = std::make_shared<Array>();
    inner1->elem_type = ValueType::UINT8;
    inner1->ints = {1, 2};
    auto nested = std::make_shared<Array>();
    nested->elem_type = ValueType::ARRAY;
    nested->items = {Value{ValueType::ARRAY, inner1}, Value::array_of_f32({0.5f})};
    w.set("t.nested", Value{ValueType::ARRAY, nested});
    auto bools = std::make_shared<Array>();
    bools->elem_type = ValueType::BOOL;
    bools->items = {Value::boolean(false), Value::boolean(true)};
    w.set("t.bools", Value{ValueType::ARRAY, bools});
    std::vector<uint8_t> fa, fb;
    for (int i = 0; i < 8; ++i) {
        float x = i * 0.25f;
        fa.insert(fa.end(), (uint8_t*)&x, (uint8_t*)&x + 4);
    }
    for (int i = 0; i < 34; ++i) fb.push_back((uint8_t)(i * 7 + 1));
    w.add_tensor("a", QType::F32, {4, 2}, fa);
    w.add_tensor("b", QType::Q8_0, {32}, fb);

    Image expected = spec_image(3, /*with_tail=*/true);
    std::vector<uint8_t> got = w.to_bytes();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], expected.b[i]) << "first difference at byte " << i;
}

TEST(GgufSpecImage, FileWithoutTensorsMayEndRightAfterTheMetadata) {
    Image m;
    m.header(3, 0, 1).key("general.name", STR).str("x");  // 49 bytes, no padding
    File f = File::parse(m.b.data(), m.size());
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.get_string("general.name"), "x");
}

TEST(GgufSpecImage, HonoursGeneralAlignment) {
    for (uint32_t align : {1u, 8u, 64u, 4096u}) {
        Image m;
        m.header(3, 2, 1).key("general.alignment", U32).u32(align);
        m.tensor("x", {3}, 0, 0);
        uint64_t second = (12 + align - 1) / align * align;
        m.tensor("y", {2}, 0, second);
        m.pad_to(align);
        size_t start = m.size();
        m.f32(1).f32(2).f32(3);
        m.zeros(second - 12);
        m.f32(4).f32(5);
        File f = File::parse(m.b.data(), m.size());
        EXPECT_EQ(f.alignment(), align);
        EXPECT_EQ(f.tensor("x")->data, m.b.data() + start);
        EXPECT_EQ(f.tensor("y")->data, m.b.data() + start + second);
    }
}

}  // namespace
}  // namespace dl::gguf
