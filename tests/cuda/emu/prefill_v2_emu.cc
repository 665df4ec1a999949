// Runs the v2 prefill kernel's own source (prefill_attention_v2.cu, rewritten for the host by
// scripts/emu-prefill-v2.sh) on the SIMT emulator against a double-precision reference: head dims
// 8..256 (padded ones too), block sizes 1 / 3 / 16 / 24, GQA / MHA / MQA, 16 and 32 rows per
// warp, chunked prefill over a cached prefix and decode rows. Exits non-zero on any miss.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

// clang-format off
#include "simt_emu.h"  // first: the kernel source's headers use its shims
#include "prefill_attention_v2_emu.inc"
// clang-format on

namespace folio::cuda {
namespace {

struct Seq {
  int ctx, q_len;  // context after the step, new tokens
};

struct Case {
  DType dt;
  int heads, kv_heads, head_dim, block_size, rows_per_warp;
  std::vector<Seq> seqs;
};

template <typename T>
double run_case(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<int32_t> qs{0}, ctx, bts{0}, bt;
  int blocks = 0;
  for (const Seq& s : c.seqs) blocks += (s.ctx + c.block_size - 1) / c.block_size;
  std::vector<int32_t> phys(blocks + 3);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  int next = 0;
  for (const Seq& s : c.seqs) {
    qs.push_back(qs.back() + s.q_len);
    ctx.push_back(s.ctx);
    for (int b = 0; b < (s.ctx + c.block_size - 1) / c.block_size; ++b) bt.push_back(phys[next++]);
    bts.push_back(static_cast<int32_t>(bt.size()));
  }
  const int D = c.head_dim, H = c.heads, KV = c.kv_heads, G = H / KV, bs = c.block_size;
  auto random_vec = [&](size_t n) {
    std::vector<T> v(n);
    for (auto& x : v) x = T(u(rng));
    return v;
  };
  const size_t cache = phys.size() * bs * KV * D;
  const std::vector<T> kc = random_vec(cache), vc = random_vec(cache);
  const std::vector<T> q = random_vec(static_cast<size_t>(qs.back()) * H * D);
  std::vector<T> out(q.size());
  std::memset(out.data(), 0xFF, out.size() * sizeof(T));  // NaN: unwritten outputs fail

  PagedAttentionParams p;
  p.dtype = c.dt;
  p.num_seqs = static_cast<int>(c.seqs.size());
  p.num_heads = H;
  p.num_kv_heads = KV;
  p.head_dim = D;
  p.block_size = bs;
  p.scale = 1.f / std::sqrt(static_cast<float>(D));
  p.q = q.data();
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.out = out.data();
  p.query_start = qs.data();
  p.context_lens = ctx.data();
  p.block_table_start = bts.data();
  p.block_table = bt.data();
  PrefillPlan plan;
  plan.num_seqs = p.num_seqs;
  for (const Seq& s : c.seqs) plan.max_rows = std::max(plan.max_rows, s.q_len * G);
  const Status st = prefill_detail::launch_v2(p, plan, c.rows_per_warp, nullptr);
  if (!st.ok()) {
    std::printf("launch: %s\n", st.to_string().c_str());
    return INFINITY;
  }
  double num = 0, den = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s)
    for (int i = 0; i < c.seqs[s].q_len; ++i) {
      const int pos = c.seqs[s].ctx - c.seqs[s].q_len + i, t = qs[s] + i;
      for (int h = 0; h < H; ++h) {
        auto kv_at = [&](int j) {
          return (static_cast<size_t>(bt[bts[s] + j / bs]) * bs + j % bs) * KV * D + (h / G) * D;
        };
        const T* qv = q.data() + (static_cast<size_t>(t) * H + h) * D;
        std::vector<double> w(pos + 1);
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += float(qv[d]) * float(kc[kv_at(j) + d]);
          w[j] = dot * p.scale;
          mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int d = 0; d < D; ++d) {
          double ref = 0;
          for (int j = 0; j <= pos; ++j) ref += w[j] * float(vc[kv_at(j) + d]);
          ref /= sum;
          const float got = float(out[(static_cast<size_t>(t) * H + h) * D + d]);
          if (!std::isfinite(got)) return INFINITY;
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
      }
    }
  return std::sqrt(num / den);
}

}  // namespace
}  // namespace folio::cuda

int main() {
  using folio::cuda::Case;
  using folio::cuda::DType;
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const std::vector<Case> cases = {
      {bf, 4, 2, 16, 16, 16, {{37, 37}, {1, 1}, {70, 65}, {200, 3}}},
      {bf, 4, 2, 16, 16, 32, {{37, 37}, {1, 1}, {70, 65}, {200, 3}}},
      {bf, 8, 2, 128, 16, 16, {{130, 130}, {300, 100}, {5, 1}}},
      {bf, 8, 2, 128, 16, 32, {{130, 130}, {300, 100}, {5, 1}}},
      {fp, 3, 3, 64, 1, 16, {{129, 129}, {66, 1}}},
      {fp, 3, 3, 64, 1, 32, {{129, 129}, {66, 1}}},
      {bf, 12, 1, 80, 8, 32, {{100, 40}, {17, 17}}},
      {bf, 16, 2, 96, 16, 16, {{64, 64}, {65, 1}}},
      {fp, 4, 2, 256, 3, 16, {{90, 90}, {65, 2}}},
      {fp, 6, 3, 40, 24, 32, {{150, 150}}},
      {bf, 4, 2, 8, 16, 16, {{70, 70}}},
      {bf, 4, 4, 32, 32, 32, {{1, 1}, {5, 1}, {64, 1}, {65, 1}}},
      {bf, 8, 1, 64, 16, 32, {{400, 150}, {129, 2}}},
      {fp, 12, 1, 128, 8, 16, {{300, 100}}},
  };
  std::mt19937 rng(1);
  int failures = 0;
  for (const Case& c : cases) {
    const double err = c.dt == bf ? folio::cuda::run_case<__nv_bfloat16>(c, rng)
                                  : folio::cuda::run_case<__half>(c, rng);
    const double tol = c.dt == bf ? 1e-2 : 3e-3;
    failures += !(err < tol);
    std::printf("%s %s h%d kv%d d%d bs%d rows/warp %d: rel err %.3g\n", err < tol ? "ok  " : "FAIL",
                c.dt == bf ? "bf16" : "fp16", c.heads, c.kv_heads, c.head_dim, c.block_size,
                c.rows_per_warp, err);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
