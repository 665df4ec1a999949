// The shared part of the prefill kernels' emulator checks (prefill_v2_emu.cc, prefill_v3_emu.cc):
// a random paged problem (shuffled physical blocks), the kernel variant under test run on the
// SIMT emulator, and the relative error against a double-precision reference. Include after the
// kernel source (.inc), which brings PagedAttentionParams, PrefillPlan and Status.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

namespace folio::cuda::emu_case {

struct Seq {
  int ctx, q_len;  // context after the step, new tokens
};

struct Case {
  DType dt;
  int heads, kv_heads, head_dim, block_size, rows_per_warp;  // rows_per_warp: v2 only
  std::vector<Seq> seqs;
};

// Runs the kernel variant under test on (params, plan).
using Launcher =
    std::function<Status(const Case&, const PagedAttentionParams&, const PrefillPlan&)>;

// Returns the relative error over all outputs; *worst_row (if given) gets the largest relative
// error of one (token, head) row, which a bug confined to a few rows (a key dropped at a tile
// edge) moves far more than the global figure.
template <typename T>
double run_case(const Case& c, const Launcher& launch, std::mt19937& rng,
                double* worst_row = nullptr) {
  if (worst_row != nullptr) *worst_row = INFINITY;
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
  std::vector<T> kc = random_vec(cache), vc = random_vec(cache);
  // The slots past each sequence's end in its last block hold NaN, as a reused pool's slots may:
  // a kernel must read keys past the end as zeros (a masked score times a NaN V row is NaN).
  for (size_t s = 0; s < c.seqs.size(); ++s)
    for (int j = c.seqs[s].ctx; j < (bts[s + 1] - bts[s]) * bs; ++j) {
      const size_t slot = static_cast<size_t>(bt[bts[s] + j / bs]) * bs + j % bs;
      std::fill_n(kc.begin() + slot * KV * D, KV * D, T(NAN));
      std::fill_n(vc.begin() + slot * KV * D, KV * D, T(NAN));
    }
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
  plan.num_tokens = qs.back();
  const Status st = launch(c, p, plan);
  if (!st.ok()) {
    std::printf("launch: %s\n", st.to_string().c_str());
    return INFINITY;
  }
  double num = 0, den = 0, worst = 0;
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
        double row_num = 0, row_den = 0;
        for (int d = 0; d < D; ++d) {
          double ref = 0;
          for (int j = 0; j <= pos; ++j) ref += w[j] * float(vc[kv_at(j) + d]);
          ref /= sum;
          const float got = float(out[(static_cast<size_t>(t) * H + h) * D + d]);
          if (!std::isfinite(got)) return INFINITY;
          row_num += (got - ref) * (got - ref);
          row_den += ref * ref;
        }
        num += row_num;
        den += row_den;
        worst = std::max(worst, std::sqrt(row_num / row_den));
      }
    }
  if (worst_row != nullptr) *worst_row = worst;
  return std::sqrt(num / den);
}

}  // namespace folio::cuda::emu_case
