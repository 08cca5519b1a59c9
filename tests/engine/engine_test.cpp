// Opening models: device names, the driver hook (declines fall back under auto, fail under an
// explicit device), defaults taken from the file, and the memory estimate against hand counts.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/tiny_image.h"

using namespace dl;

TEST(Engine, DeviceNames) {
    EXPECT_EQ(DeviceSpec::parse("auto").kind, DeviceSpec::Kind::automatic);
    EXPECT_EQ(DeviceSpec::parse("cpu").kind, DeviceSpec::Kind::cpu);
    DeviceSpec v = DeviceSpec::parse("vulkan");
    EXPECT_EQ(v.kind, DeviceSpec::Kind::vulkan);
    EXPECT_EQ(v.index, -1);
    DeviceSpec v2 = DeviceSpec::parse("vulkan:2");
    EXPECT_EQ(v2.index, 2);
    EXPECT_EQ(v2.str(), "vulkan:2");
    for (const char* bad :
         {"", "gpu", "vulkan:", "vulkan:-1", "vulkan:x", "vulkan2", "cpu:0", "vulkan:1x"})
        EXPECT_THROW(DeviceSpec::parse(bad), Error) << bad;
}

TEST(Engine, DemoModelDefaults) {
    auto e = Engine::open_image(test::tiny_qwen35_image(), "demo");
    EXPECT_EQ(e->model().hp.arch_name, "qwen35");
    EXPECT_TRUE(e->has_tokenizer());
    EXPECT_EQ(e->n_ctx(), std::min<int64_t>(e->model().hp.n_ctx_train, kDefaultContext));
    EXPECT_EQ(e->chat_format().style(), ChatStyle::chatml);
    EXPECT_EQ(e->executor().name(), "cpu");
    auto s = e->new_session();
    EXPECT_EQ(s->n_ctx, e->n_ctx());
    EXPECT_EQ(s->n_past, 0);

    EngineOptions o;
    o.n_ctx = 64;
    EXPECT_EQ(Engine::open_image(test::tiny_qwen35_image(), "demo", o)->n_ctx(), 64);
    o.n_ctx = -5;
    EXPECT_THROW(Engine::open_image(test::tiny_qwen35_image(), "demo", o), Error);
}

TEST(Engine, BadImagesAreErrors) {
    std::vector<uint8_t> img = test::tiny_qwen35_image();
    img.resize(img.size() / 2);
    EXPECT_THROW(Engine::open_image(img, "half"), Error);
    EXPECT_THROW(Engine::open_image({'n', 'o', 'p', 'e'}, "junk"), Error);
    EXPECT_THROW(Engine::open("/nonexistent/model.gguf"), Error);
}

TEST(Engine, MemoryEstimateByHand) {
    auto e = Engine::open_image(test::tiny_qwen35_image(), "demo");
    const Hparams& hp = e->model().hp;
    int64_t n_attn = 0, n_gdn = 0;
    for (int64_t i = 0; i < hp.n_layer; ++i) (hp.is_recurrent(i) ? n_gdn : n_attn)++;
    ASSERT_GT(n_attn, 0);
    ASSERT_GT(n_gdn, 0);
    MemoryEstimate m = estimate_memory(e->model(), 1000);
    // K and V: per attention layer and token, n_head_kv * head_dim halves (2 bytes) each.
    EXPECT_EQ(m.kv_cache, (uint64_t)(n_attn * 1000 * hp.n_head_kv * hp.head_dim * 2 * 2));
    // S: H_v matrices of d x d floats; conv: the last 3 inputs of 2*H_k*d + H_v*d channels.
    const int64_t d = hp.ssm_d_state;
    const int64_t channels = 2 * hp.ssm_n_k_heads * d + hp.ssm_n_v_heads * d;
    EXPECT_EQ(m.recurrent_state, (uint64_t)(n_gdn * (hp.ssm_n_v_heads * d * d + 3 * channels) * 4));
    EXPECT_EQ(m.weights, e->model().weight_bytes());
    EXPECT_EQ(m.total(), m.weights + m.kv_cache + m.recurrent_state);
}

namespace {
// A stand-in GPU executor: the CPU chain under another name.
class FakeGpu : public Executor {
  public:
    explicit FakeGpu(std::shared_ptr<const Model> m) : chain_(std::move(m)) {}
    std::string name() const override { return "fake-gpu"; }
    const Model& model() const override { return chain_.model(); }
    std::unique_ptr<SessionState> new_session(int64_t n_ctx) override {
        return chain_.new_session(n_ctx);
    }
    void prefill(SessionState& s, std::span<const int32_t> t, LogitsRows r,
                 std::vector<float>& l) override {
        chain_.prefill(s, t, r, l);
    }
    std::span<const float> decode(SessionState& s, int32_t t) override {
        return chain_.decode(s, t);
    }

  private:
    cpu::Chain chain_;
};
}  // namespace

TEST(Engine, DriverHookChoosesFallsBackAndRefuses) {
    bool decline = true;
    int asked_index = -7;
    Capacity asked;
    DeviceDriver d;
    d.name = "vulkan";
    d.make = [&](std::shared_ptr<const Model> m, int index, Capacity c,
                 std::string* reason) -> std::unique_ptr<Executor> {
        asked_index = index;
        asked = c;
        if (decline) {
            *reason = "layer 1: no kernel for this type";
            return nullptr;
        }
        return std::make_unique<FakeGpu>(m);
    };
    register_device(d);

    EngineOptions o;  // auto
    auto e = Engine::open_image(test::tiny_qwen35_image(), "demo", o);
    EXPECT_EQ(e->fallback_reason(), "layer 1: no kernel for this type");
    EXPECT_EQ(e->executor().name(), "cpu");

    o.device = DeviceSpec::parse("vulkan:3");
    try {
        Engine::open_image(test::tiny_qwen35_image(), "demo", o);
        FAIL() << "an explicit device that declines must be an error";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("no kernel for this type"), std::string::npos);
        // and says what runs it instead
        EXPECT_NE(std::string(err.what()).find("--device cpu"), std::string::npos) << err.what();
    }
    EXPECT_EQ(asked_index, 3);

    decline = false;
    o.n_ctx = 300;
    o.sequences = 5;  // a server's slots reach the driver, which sizes its KV cache by them
    auto g = Engine::open_image(test::tiny_qwen35_image(), "demo", o);
    EXPECT_EQ(g->executor().name(), "fake-gpu");
    EXPECT_EQ(asked.n_ctx, 300);
    EXPECT_EQ(asked.sequences, 5);
    EXPECT_TRUE(g->fallback_reason().empty());

    // A driver with only a software device is skipped under auto but used when named.
    d.preferred_under_auto = [] { return false; };
    register_device(d);
    asked_index = -7;
    o.device = DeviceSpec::parse("auto");
    auto a = Engine::open_image(test::tiny_qwen35_image(), "demo", o);
    EXPECT_EQ(a->executor().name(), "cpu");
    EXPECT_EQ(asked_index, -7);
    EXPECT_FALSE(a->fallback_reason().empty());
    o.device = DeviceSpec::parse("vulkan");
    EXPECT_EQ(Engine::open_image(test::tiny_qwen35_image(), "demo", o)->executor().name(),
              "fake-gpu");
    EXPECT_EQ(asked_index, -1);

    o.device = DeviceSpec::parse("cpu");  // cpu never asks the driver
    asked_index = -7;
    Engine::open_image(test::tiny_qwen35_image(), "demo", o);
    EXPECT_EQ(asked_index, -7);
}
