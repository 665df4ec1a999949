// decode_mlp (decode_mlp.h): one persistent launch for x += o_proj(attn), the post-attention
// RMSNorm, silu(gate) * up and x += down(act) at batch 1. It must give the same bits as the
// launches it replaces (skinny_gemm accumulate, rms_norm, skinny_gemm_silu, skinny_gemm
// accumulate), stay close to an fp64 reference, leave its counters zeroed for the next launch,
// and refuse what it cannot take.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/decode_mlp.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/skinny_gemm.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;

constexpr float kEps = 1e-5f;

struct Shape {
  int hidden, inter, attn_width;
};

struct Layer {
  std::vector<float> w_o, norm, w_gate_up, w_down;
  DevTensor d_o, d_norm, d_gate_up, d_down;
};

Layer make_layer(DType dt, const Shape& s, std::mt19937& rng) {
  Layer l;
  // Weights scaled like a trained layer's (|w| ~ 1 / sqrt(depth)), norm weights around 1.
  auto mat = [&](int rows, int depth) {
    const float a = 1.f / std::sqrt(static_cast<float>(depth));
    return testing::rounded(dt, testing::random_vec(static_cast<size_t>(rows) * depth, rng, -a, a));
  };
  l.w_o = mat(s.hidden, s.attn_width);
  l.norm = testing::rounded(dt, testing::random_vec(s.hidden, rng, 0.5f, 1.5f));
  l.w_gate_up = mat(2 * s.inter, s.hidden);
  l.w_down = mat(s.hidden, s.inter);
  l.d_o = DevTensor::upload(dt, l.w_o);
  l.d_norm = DevTensor::upload(dt, l.norm);
  l.d_gate_up = DevTensor::upload(dt, l.w_gate_up);
  l.d_down = DevTensor::upload(dt, l.w_down);
  return l;
}

// The launches decode_mlp replaces, on x (updated in place) and act.
void run_chain(DType dt, const Shape& s, const Layer& l, const DevTensor& attn, DevTensor& x,
               DevTensor& act) {
  DevTensor normed = DevTensor::poisoned(dt, s.hidden);
  FOLIO_ASSERT_OK(skinny_gemm(dt, attn.data(), l.d_o.data(), x.data(), 1, s.hidden, s.attn_width,
                              true, nullptr));
  FOLIO_ASSERT_OK(rms_norm(dt, x.data(), l.d_norm.data(), normed.data(), 1, s.hidden, kEps,
                           nullptr));
  FOLIO_ASSERT_OK(skinny_gemm_silu(dt, normed.data(), l.d_gate_up.data(), act.data(), 1, s.inter,
                                   s.hidden, nullptr));
  FOLIO_ASSERT_OK(skinny_gemm(dt, act.data(), l.d_down.data(), x.data(), 1, s.hidden, s.inter,
                              true, nullptr));
}

DecodeMlpParams params(DType dt, const Shape& s, const Layer& l, const DevTensor& attn,
                       DevTensor& x, DevTensor& act, unsigned* sync) {
  DecodeMlpParams p;
  p.dtype = dt;
  p.hidden = s.hidden;
  p.inter = s.inter;
  p.attn_width = s.attn_width;
  p.attn = attn.data();
  p.w_o = l.d_o.data();
  p.post_norm = l.d_norm.data();
  p.eps = kEps;
  p.w_gate_up = l.d_gate_up.data();
  p.w_down = l.d_down.data();
  p.x = x.data();
  p.act = act.data();
  p.sync = sync;
  return p;
}

// fp64 x + o(attn), then + down(silu(gate(n)) * up(n)) with n = rms_norm of the first sum.
std::vector<float> reference(const Shape& s, const Layer& l, const std::vector<float>& attn,
                             const std::vector<float>& x0) {
  const int H = s.hidden, I = s.inter, A = s.attn_width;
  std::vector<double> h(H), n(H), act(I);
  double ss = 0;
  for (int r = 0; r < H; ++r) {
    double d = x0[r];
    for (int i = 0; i < A; ++i) d += static_cast<double>(l.w_o[static_cast<size_t>(r) * A + i]) * attn[i];
    h[r] = d;
    ss += d * d;
  }
  const double inv = 1.0 / std::sqrt(ss / H + kEps);
  for (int i = 0; i < H; ++i) n[i] = h[i] * inv * l.norm[i];
  for (int j = 0; j < I; ++j) {
    double g = 0, u = 0;
    for (int i = 0; i < H; ++i) {
      g += l.w_gate_up[static_cast<size_t>(j) * H + i] * n[i];
      u += l.w_gate_up[static_cast<size_t>(I + j) * H + i] * n[i];
    }
    act[j] = g / (1.0 + std::exp(-g)) * u;
  }
  std::vector<float> out(H);
  for (int r = 0; r < H; ++r) {
    double d = h[r];
    for (int j = 0; j < I; ++j) d += l.w_down[static_cast<size_t>(r) * I + j] * act[j];
    out[r] = static_cast<float>(d);
  }
  return out;
}

// "h1024i3584a1024" (appended piecewise: GCC 12's -Wrestrict misfires on "x" + std::string).
std::string shape_name(const Shape& s) {
  std::string name;
  for (auto [tag, v] : {std::pair{'h', s.hidden}, {'i', s.inter}, {'a', s.attn_width}}) {
    name += tag;
    name += std::to_string(v);
  }
  return name;
}

class DecodeMlpTest : public ::testing::TestWithParam<Shape> {};

// Two launches in a row on the same counters (the second must find them zeroed), each against
// the chain, bit for bit; the first also against fp64.
TEST_P(DecodeMlpTest, SameBitsAsTheLaunchesItReplaces) {
  FOLIO_REQUIRE_GPU();
  const Shape s = GetParam();
  std::mt19937 rng(11 + s.hidden + s.inter);
  const auto device = device_info(0);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  auto sync = DeviceBuffer::allocate(sizeof(unsigned) * kDecodeMlpSyncWords);
  ASSERT_TRUE(sync.ok());
  FOLIO_ASSERT_OK(memset_async(sync->data(), 0, sizeof(unsigned) * kDecodeMlpSyncWords));
  for (DType dt : {DType::kBF16, DType::kFP16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_name(s));
    const Layer l = make_layer(dt, s, rng);
    auto x0 = testing::rounded(dt, testing::random_vec(s.hidden, rng, -4.f, 4.f));
    DevTensor x_chain = DevTensor::upload(dt, x0), x_fused = DevTensor::upload(dt, x0);
    DevTensor act_chain = DevTensor::poisoned(dt, s.inter);
    DevTensor act_fused = DevTensor::poisoned(dt, s.inter);
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE("launch " + std::to_string(round));
      const auto attn_h = testing::rounded(dt, testing::random_vec(s.attn_width, rng, -2.f, 2.f));
      const DevTensor attn = DevTensor::upload(dt, attn_h);
      const auto before = x_chain.download();
      run_chain(dt, s, l, attn, x_chain, act_chain);
      FOLIO_ASSERT_OK(decode_mlp(
          params(dt, s, l, attn, x_fused, act_fused, static_cast<unsigned*>(sync->data())),
          *device, nullptr));
      const auto got = x_fused.download();
      ASSERT_EQ(got, x_chain.download());
      ASSERT_EQ(act_fused.download(), act_chain.download());
      const auto want = reference(s, l, attn_h, before);
      std::vector<float> got_delta(s.hidden), want_delta(s.hidden);
      for (int i = 0; i < s.hidden; ++i) {
        got_delta[i] = got[i] - before[i];
        want_delta[i] = want[i] - before[i];
      }
      EXPECT_LT(testing::rel_error(got_delta, want_delta), dt == DType::kBF16 ? 3e-2 : 5e-3);
    }
    std::vector<unsigned> words(kDecodeMlpSyncWords, 1);
    FOLIO_ASSERT_OK(copy(words.data(), sync->data(), sizeof(unsigned) * words.size()));
    EXPECT_EQ(words, std::vector<unsigned>(kDecodeMlpSyncWords, 0u)) << "counters left set";
  }
}

// Llama-3-8B's widths scaled down; rows that end inside a 4 KiB chunk (H 1000, I 1496); fewer
// gate/up pairs than SMs (I 64: blocks with no rows in a phase); a ring shallower than a row of
// down (I 14336).
INSTANTIATE_TEST_SUITE_P(Shapes, DecodeMlpTest,
                         ::testing::Values(Shape{1024, 3584, 1024}, Shape{1000, 1496, 520},
                                           Shape{2048, 64, 4096}, Shape{4096, 14336, 4096}),
                         [](const auto& info) { return shape_name(info.param); });

TEST(DecodeMlp, RefusesWhatItCannotTake) {
  // Checked before any device work: no GPU needed. Addresses are never dereferenced.
  alignas(16) static char dummy_bytes[64];
  void* dummy = dummy_bytes;
  DecodeMlpParams p;
  p.hidden = 4096;
  p.inter = 14336;
  p.attn_width = 4096;
  p.attn = p.w_o = p.post_norm = p.w_gate_up = p.w_down = dummy;
  p.x = p.act = dummy;
  EXPECT_TRUE(decode_mlp_supported(p));
  EXPECT_FALSE(decode_mlp(p, DeviceInfo{}, nullptr).ok()) << "null counters";
  DecodeMlpParams q = p;
  q.hidden = 512;  // rms_norm's warp kernel there: another summation order
  EXPECT_FALSE(decode_mlp_supported(q));
  q = p;
  q.inter = 14340;  // not whole packs
  EXPECT_FALSE(decode_mlp_supported(q));
  q = p;
  q.w_o = dummy_bytes + 2;
  EXPECT_FALSE(decode_mlp_supported(q));
  q = p;
  q.inter = 120000;  // the input vector leaves no room for the ring
  EXPECT_FALSE(decode_mlp_supported(q));
}

}  // namespace
}  // namespace folio::cuda
