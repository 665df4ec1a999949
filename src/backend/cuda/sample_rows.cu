// The GPU sampler's kernels: the logits-processor edits, the draw, and the restore (the logprobs
// kernel is in row_logprobs.cu). The draw follows sample/row_sampler.h's contract exactly; the
// filters run as searches over the 32-bit order key of the scaled logits instead of sorts:
//   top-k: the largest key K with count(key >= K) >= k, i.e. the k-th largest value (ties kept);
//   top-p: the largest key K* with mass(key >= K*) >= top_p * total among the survivors: every
//     token above K* has less than the target ranked before it, so it is kept; tokens equal to
//     K* are kept in id order while the mass before them stays below the target;
// each search takes 8 passes over the row, 4 bits of the key per pass (15 thresholds at once).
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/row_logprobs.cuh"
#include "backend/cuda/sample_block.cuh"
#include "backend/cuda/sample_rows.h"
#include "backend/cuda/sample_rows_split.cuh"
#include "base/philox.h"

namespace folio::cuda {
namespace {

using sampling::Best;
using sampling::kSampleThreads;
using sampling::order_key;
using sampling::SampleShared;

constexpr float kGreedyTemperature = 1e-5f;  // Sampler::kGreedyTemperature

// grid (num_rows), kSampleThreads: saves the raw values the row's ops touch, then applies the
// ops phase by phase (within a phase the tokens are distinct or the op is idempotent).
__global__ void __launch_bounds__(kSampleThreads)
    apply_ops_kernel(SampleRowsArgs a) {
  const DeviceSampleRow& r = a.rows[blockIdx.x];
  float* x = a.logits + static_cast<int64_t>(r.logits_row - a.logits_row_offset) * a.vocab;
  const int end = r.phase_end[3];
  if (end == r.op_begin) return;
  for (int j = r.op_begin + threadIdx.x; j < end; j += blockDim.x) a.op_saved[j] = x[a.ops[j].token];
  __syncthreads();
  int begin = r.op_begin;
  for (int p = 0; p < 4; ++p) {
    for (int j = begin + threadIdx.x; j < r.phase_end[p]; j += blockDim.x) {
      const LogitOp op = a.ops[j];
      float& v = x[op.token];
      switch (op.kind) {
        case LogitOpKind::kAdd: v += op.a; break;
        case LogitOpKind::kSet: v = op.a; break;
        case LogitOpKind::kRepetition: v = v > 0.0f ? v / op.a : v * op.a; break;
        case LogitOpKind::kSubTwo: v -= op.a; v -= op.b; break;
        case LogitOpKind::kNone: break;
      }
    }
    begin = r.phase_end[p];
    __syncthreads();
  }
}

// Writes back the saved raw values (every save happened before any edit, so tokens named by
// several ops get the same value from each).
__global__ void __launch_bounds__(kSampleThreads) restore_ops_kernel(SampleRowsArgs a) {
  const DeviceSampleRow& r = a.rows[blockIdx.x];
  float* x = a.logits + static_cast<int64_t>(r.logits_row - a.logits_row_offset) * a.vocab;
  for (int j = r.op_begin + threadIdx.x; j < r.phase_end[3]; j += blockDim.x)
    x[a.ops[j].token] = a.op_saved[j];
}

// The row as the draw sees it: s_i = x_i / T, w_i = exp(s_i - m), and the survivor filters.
struct Row {
  const float* x;
  int vocab;
  float temperature;
  float m = 0.f;
  bool top_k_on = false, top_p_on = false, min_p_on = false;
  uint32_t k_key = 0;           // top-k: survivors have key >= k_key
  uint32_t p_key = 0;           // top-p: survivors have key > p_key, or == p_key and id < p_cut
  int32_t p_cut = 0;
  float min_p = 0.f;

  __device__ float s(int i) const { return x[i] / temperature; }
  __device__ float w(float s) const { return expf(s - m); }
  // Survives top-k (or has w > 0 when top-k is off).
  __device__ bool stage1(float s, float w) const {
    if (isnan(s)) return false;
    return top_k_on ? order_key(s) >= k_key : w > 0.0f;
  }
  __device__ bool survives(int i, float s, float w) const {
    if (!stage1(s, w)) return false;
    if (top_p_on) {
      const uint32_t k = order_key(s);
      if (k < p_key || (k == p_key && i >= p_cut)) return false;
    }
    return !min_p_on || w >= min_p;
  }
};

// The largest key K with sum(weight over stage-1 tokens with key >= K) >= target, where weight is
// 1 (count) or w (mass). Precondition: the sum over every stage-1 token is >= target.
template <bool kMass>
__device__ uint32_t find_key(const Row& row, double target, SampleShared& sh) {
  uint32_t lo = 0;
  for (int shift = 28; shift >= 0; shift -= 4) {
    double c[15];
#pragma unroll
    for (int j = 0; j < 15; ++j) c[j] = 0.0;
    for (int i = threadIdx.x; i < row.vocab; i += kSampleThreads) {
      const float s = row.s(i);
      const float w = row.w(s);
      if (!row.stage1(s, w)) continue;
      const uint32_t k = order_key(s);
      if (k < lo) continue;
      const double wt = kMass ? static_cast<double>(w) : 1.0;
      const uint32_t d = (k - lo) >> shift;  // bucket of k; >= 15 means at or above the last threshold
#pragma unroll
      for (int j = 0; j < 15; ++j)
        if (d >= static_cast<uint32_t>(j + 1)) c[j] += wt;
    }
    sampling::block_sum<15>(c, sh.sums);
    int pick = 0;
#pragma unroll
    for (int j = 0; j < 15; ++j)
      if (c[j] >= target) pick = j + 1;
    lo += static_cast<uint32_t>(pick) << shift;
  }
  return lo;
}

// Top-p boundary: sets row.p_key and row.p_cut (see Row).
__device__ void find_nucleus(Row& row, float top_p, SampleShared& sh) {
  double total = 0.0;
  for (int i = threadIdx.x; i < row.vocab; i += kSampleThreads) {
    const float s = row.s(i), w = row.w(s);
    if (row.stage1(s, w)) total += w;
  }
  total = sampling::block_sum1(total, sh.sums);
  const double target = static_cast<double>(top_p) * total;
  const uint32_t kstar = find_key<true>(row, target, sh);
  double v[2] = {0.0, 0.0};  // mass strictly above K*, count equal to K*
  for (int i = threadIdx.x; i < row.vocab; i += kSampleThreads) {
    const float s = row.s(i), w = row.w(s);
    if (!row.stage1(s, w)) continue;
    const uint32_t k = order_key(s);
    if (k > kstar) v[0] += w;
    else if (k == kstar) v[1] += 1.0;
  }
  sampling::block_sum<2>(v, sh.sums);
  row.p_key = kstar;
  row.p_cut = row.vocab;
  const int ties = static_cast<int>(v[1]);
  if (ties <= 1) return;
  // Tied tokens have equal w; keep them in id order while the mass before them is < target.
  const double w_eq = row.w(sampling::key_to_float(kstar));
  double before = v[0];
  int keep = 1;
  while (keep < ties) {
    before += w_eq;
    if (before >= target) break;
    ++keep;
  }
  if (keep == ties) return;
  // p_cut: the smallest c with #(tied tokens with id < c) >= keep (bisection over ids).
  int lo = 0, hi = row.vocab;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    double n = 0.0;
    for (int i = threadIdx.x; i < mid; i += kSampleThreads) {
      const float s = row.s(i), w = row.w(s);
      if (row.stage1(s, w) && order_key(s) == kstar) n += 1.0;
    }
    n = sampling::block_sum1(n, sh.sums);
    if (n >= keep) hi = mid;
    else lo = mid + 1;
  }
  row.p_cut = lo;
}

// argmax over survivors of w_i / E_i, E_i = -log(u) from the row's Philox stream (rng_stream.h).
__device__ int32_t race(const Row& row, const DeviceSampleRow& r, bool filtered, SampleShared& sh) {
  Best best = sampling::no_best();
  const PhiloxKey key{r.rng_key_lo, r.rng_key_hi};
  const int groups = (row.vocab + 3) / 4;
  for (int g = threadIdx.x; g < groups; g += kSampleThreads) {
    const PhiloxCounter bits =
        philox4x32_10({static_cast<uint32_t>(g), r.rng_step, r.rng_seq_index, r.rng_tag}, key);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int i = 4 * g + lane;
      if (i >= row.vocab) break;
      const float s = row.s(i), w = row.w(s);
      if (!(w > 0.0f)) continue;
      if (filtered && !row.survives(i, s, w)) continue;
      const Best cand{w / -logf(uniform_open01(bits[lane])), i};
      if (sampling::better(cand, best)) best = cand;
    }
  }
  return sampling::block_best(best, sh.best).id;
}

// argmax of x / temperature (temperature 1 for greedy), NaN skipped, ties to the lower id; 0 when
// every entry is NaN (RowSampler::greedy).
__device__ int32_t argmax(const Row& row, SampleShared& sh) {
  Best best = sampling::no_best();
  for (int i = threadIdx.x; i < row.vocab; i += kSampleThreads) {
    const float s = row.s(i);
    if (isnan(s)) continue;
    const Best cand{s, i};
    if (sampling::better(cand, best)) best = cand;
  }
  const Best b = sampling::block_best(best, sh.best);
  return b.id == INT_MAX ? 0 : b.id;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(SampleRowsArgs a) {
  __shared__ SampleShared sh;
  const DeviceSampleRow& r = a.rows[blockIdx.x];
  Row row;
  row.x = a.logits + static_cast<int64_t>(r.logits_row - a.logits_row_offset) * a.vocab;
  row.vocab = a.vocab;
  const bool greedy = r.temperature < kGreedyTemperature;
  row.temperature = greedy ? 1.0f : r.temperature;
  int32_t token;
  if (greedy) {
    token = argmax(row, sh);
  } else {
    float m = -INFINITY;
    double valid = 0.0;
    for (int i = threadIdx.x; i < a.vocab; i += kSampleThreads) {
      const float s = row.s(i);
      m = fmaxf(m, s);
      valid += isnan(s) ? 0.0 : 1.0;
    }
    row.m = sampling::block_max(m, sh.maxes);
    valid = sampling::block_sum1(valid, sh.sums);
    if (!(row.m > -INFINITY) || !isfinite(row.m)) {
      token = argmax(row, sh);  // nothing to draw from
    } else {
      row.top_k_on = r.top_k > 0 && r.top_k < a.vocab;
      row.top_p_on = r.top_p < 1.0f;
      row.min_p_on = r.min_p > 0.0f;
      row.min_p = r.min_p;
      if (row.top_k_on) row.k_key = find_key<false>(row, fmin(static_cast<double>(r.top_k), valid), sh);
      if (row.top_p_on) find_nucleus(row, r.top_p, sh);
      token = race(row, r, row.top_k_on || row.top_p_on || row.min_p_on, sh);
      if (token == INT_MAX) token = argmax(row, sh);  // unreachable: the max token survives
    }
  }
  if (threadIdx.x == 0) a.out[blockIdx.x].token_id = token;
}

}  // namespace

bool sample_split_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FOLIO_SAMPLE_SPLIT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

int sample_split_max_rows() {
  static const int rows = [] {
    const char* e = std::getenv("FOLIO_SAMPLE_SPLIT_ROWS");
    const int v = e ? std::atoi(e) : 0;
    return v >= 1 && v <= kSampleSplitMaxRows ? v : kSampleSplitMaxRows;
  }();
  return rows;
}

Status sample_rows(const SampleRowsArgs& a, void* stream) {
  if (a.num_rows == 0) return Status();
  if (a.vocab <= 0 || a.logits == nullptr || a.rows == nullptr || a.out == nullptr)
    return invalid_argument("sample_rows: empty vocabulary or missing buffers");
  cudaStream_t st = as_stream(stream);
  if (sample_split_usable(a)) return sample_rows_split(a, st);
  if (a.any_ops) {
    apply_ops_kernel<<<a.num_rows, kSampleThreads, 0, st>>>(a);
    FOLIO_RETURN_IF_ERROR(launch_status("apply_ops_kernel"));
  }
  sample_kernel<<<a.num_rows, kSampleThreads, 0, st>>>(a);
  FOLIO_RETURN_IF_ERROR(launch_status("sample_kernel"));
  if (a.any_ops) {
    restore_ops_kernel<<<a.num_rows, kSampleThreads, 0, st>>>(a);
    FOLIO_RETURN_IF_ERROR(launch_status("restore_ops_kernel"));
  }
  return launch_row_logprobs(a, st);
}

}  // namespace folio::cuda
