#include "backend/cpu/cpu_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp8.h"
#include "base/parallel_for.h"

namespace folio::cpu {

void matmul_nt(const float* x, const float* w, float* y, int m, int n, int k) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

namespace {
// Accumulates in double: the reference should not be the source of error.
inline void rms_norm_row(const float* x, const float* weight, float* y, int dim, float eps) {
  double ss = 0;
  for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
  for (int i = 0; i < dim; ++i) y[i] = x[i] * inv * weight[i];
}
}  // namespace

void rms_norm(const float* x, const float* weight, float* y, int rows, int dim, float eps) {
  parallel_for(rows, std::max(1, 16384 / dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) rms_norm_row(x + r * dim, weight, y + r * dim, dim, eps);
  });
}

void add_rms_norm(float* residual, const float* x, const float* weight, float* y, int rows, int dim,
                  float eps) {
  parallel_for(rows, std::max(1, 16384 / dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* res = residual + r * dim;
      const float* xr = x + r * dim;
      for (int i = 0; i < dim; ++i) res[i] += xr[i];
      rms_norm_row(res, weight, y + r * dim, dim, eps);
    }
  });
}

void apply_rope(float* x, const int32_t* positions, int num_tokens, int num_heads, int head_dim,
                std::span<const double> inv_freq) {
  if (num_tokens <= 0 || num_heads <= 0 || head_dim <= 0) return;  // nothing to rotate
  const int half = head_dim / 2;
  parallel_for(num_tokens, std::max(1, 8192 / (num_heads * head_dim)), [&](int64_t tb, int64_t te) {
    std::vector<float> cos_v(half), sin_v(half);
    for (int64_t t = tb; t < te; ++t) {
      for (int i = 0; i < half; ++i) {
        double angle = positions[t] * inv_freq[i];
        cos_v[i] = static_cast<float>(std::cos(angle));
        sin_v[i] = static_cast<float>(std::sin(angle));
      }
      for (int h = 0; h < num_heads; ++h) {
        float* v = x + (static_cast<size_t>(t) * num_heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          float a = v[i], b = v[i + half];
          v[i] = a * cos_v[i] - b * sin_v[i];
          v[i + half] = b * cos_v[i] + a * sin_v[i];
        }
      }
    }
  });
}

void silu_and_mul(const float* gate_up, float* out, int rows, int inter) {
  parallel_for(rows, std::max(1, 8192 / inter), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = gate_up + r * 2 * inter;
      const float* u = g + inter;
      float* o = out + r * inter;
      for (int i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
}

void reshape_and_cache(const float* k, const float* v, const int64_t* slot_mapping, int num_tokens,
                       int kv_width, float* k_cache, float* v_cache, KvCacheDtype kv_dtype) {
  const bool fp8 = kv_dtype == KvCacheDtype::kFp8E4m3;
  for (int t = 0; t < num_tokens; ++t) {
    int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    const float* kt = k + static_cast<size_t>(t) * kv_width;
    const float* vt = v + static_cast<size_t>(t) * kv_width;
    float* kc = k_cache + slot * kv_width;
    float* vc = v_cache + slot * kv_width;
    if (!fp8) {
      std::memcpy(kc, kt, sizeof(float) * kv_width);
      std::memcpy(vc, vt, sizeof(float) * kv_width);
      continue;
    }
    // Only the step's rows are rounded, once, as they are written; reads stay plain fp32.
    for (int i = 0; i < kv_width; ++i) {
      kc[i] = round_to_fp8_e4m3(kt[i]);
      vc[i] = round_to_fp8_e4m3(vt[i]);
    }
  }
}

void paged_attention(const PagedAttentionArgs& a, const float* q, const float* k_cache,
                     const float* v_cache, float* out) {
  const int num_tokens = a.query_start[a.num_seqs];
  const int group = a.num_heads / a.num_kv_heads;
  const int kv_width = a.num_kv_heads * a.head_dim;
  // Map each token to its sequence once; then (token, head) pairs are independent work items.
  std::vector<int> seq_of(num_tokens);
  for (int s = 0; s < a.num_seqs; ++s)
    for (int i = a.query_start[s]; i < a.query_start[s + 1]; ++i) seq_of[i] = s;
  // Work items are (token, head) pairs; each costs O(position * head_dim).
  parallel_for(static_cast<int64_t>(num_tokens) * a.num_heads, 4, [&](int64_t ib, int64_t ie) {
    std::vector<float> scores;
    std::vector<double> acc;
    for (int64_t item = ib; item < ie; ++item) {
      const int t = static_cast<int>(item / a.num_heads), h = static_cast<int>(item % a.num_heads);
      const int s = seq_of[t];
      const int q_len = a.query_start[s + 1] - a.query_start[s];
      const int pos = a.context_lens[s] - q_len + (t - a.query_start[s]);
      const int kv_head = h / group;
      const int32_t* table = a.block_table + a.block_table_start[s];
      const float* qv = q + (static_cast<size_t>(t) * a.num_heads + h) * a.head_dim;
      const int first = a.sliding_window > 0 ? std::max(0, pos - a.sliding_window + 1) : 0;
      scores.resize(pos + 1);
      float max_score = -INFINITY;
      for (int j = first; j <= pos; ++j) {
        int64_t slot =
            static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
        const float* kv = k_cache + slot * kv_width + kv_head * a.head_dim;
        float dot = 0;
        for (int d = 0; d < a.head_dim; ++d) dot += qv[d] * kv[d];
        scores[j] = dot * a.scale;
        max_score = std::max(max_score, scores[j]);
      }
      double denom = 0;
      for (int j = first; j <= pos; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        denom += scores[j];
      }
      acc.assign(a.head_dim, 0.0);
      for (int j = first; j <= pos; ++j) {
        int64_t slot =
            static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
        const float* vv = v_cache + slot * kv_width + kv_head * a.head_dim;
        for (int d = 0; d < a.head_dim; ++d) acc[d] += static_cast<double>(scores[j]) * vv[d];
      }
      float* o = out + (static_cast<size_t>(t) * a.num_heads + h) * a.head_dim;
      for (int d = 0; d < a.head_dim; ++d) o[d] = static_cast<float>(acc[d] / denom);
    }
  });
}

void copy_blocks(float* cache, size_t block_elems, std::span<const int32_t> src,
                 std::span<const int32_t> dst) {
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(cache + dst[i] * block_elems, cache + src[i] * block_elems,
                block_elems * sizeof(float));
}

}  // namespace folio::cpu
