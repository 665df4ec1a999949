// The GPU sampler's split path for plain rows (sample_rows.h): a row of a 128k vocabulary scanned
// by one thread block is latency bound (~60 us per pass on one SM at batch 1), so here each row
// is cut into chunks of 4-token groups, one block per (row, chunk), and the partial results are
// merged by the last block of the row to finish (a counter per row and pass, reset by that block).
//
// Only split-eligible rows (sample_split_eligible: no logits ops, no top-k/top-p/min-p, no top
// logprobs) come here, so the draw and the logprobs read the same raw row and the contract is
// sample_rows.cu's:
//   pass 1: m = max x (NaN skipped);
//   pass 2: greedy: argmax x (ties to the lower id, 0 if every entry is NaN); temperature T:
//           s = x / T, ms = m / T (= max s: division by T > 0 is monotonic under rounding),
//           w = exp(s - ms), the Philox race argmax w / -log(u) over the groups' counters, the
//           argmax of s when ms is not finite; and sum exp(x - m) in double for the log-sum-exp.
//           The last block picks the token, and writes its logprob = x_token - lse;
//   pass 3: rank = #(x >= x_token).
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/sample_block.cuh"
#include "backend/cuda/sample_rows_split.cuh"
#include "base/philox.h"

namespace folio::cuda {
namespace {

using sampling::Best;
using sampling::kSampleThreads;

constexpr float kGreedyTemperature = 1e-5f;  // Sampler::kGreedyTemperature
constexpr int kTargetBlocks = 256;          // ~2 blocks per SM on an H100 (132 SMs)
constexpr int kMinGroupsPerChunk = 64;      // below this a chunk's fixed cost dominates
constexpr int kMaxGroupsPerChunk = 4096;    // 16k logits: a block's scan stays short at many rows

// One (row, chunk)'s partial results.
struct Partial {
  float max;      // pass 1
  Best draw;      // pass 2: the best candidate of the draw (greedy: of the argmax)
  Best argmax_s;  // pass 2: argmax of s (the fallback when max s is not finite)
  double sum;     // pass 2: sum exp(x - m)
  int32_t count;  // pass 3: #(x >= x_token)
};

struct Split {
  int chunks;            // per row
  int groups_per_chunk;  // 4-token groups
  Partial* partials;     // [rows][chunks]
  unsigned* counters;    // [rows][2]: blocks of pass 2 / pass 3 done
};

__device__ const float* row_ptr(const SampleRowsArgs& a, int row) {
  return a.logits + static_cast<int64_t>(a.rows[row].logits_row - a.logits_row_offset) * a.vocab;
}

// Elements [begin, end) of the row that chunk blockIdx.x covers.
__device__ void chunk_range(const SampleRowsArgs& a, const Split& sp, int& begin, int& end) {
  begin = blockIdx.x * sp.groups_per_chunk * 4;
  end = min(a.vocab, begin + sp.groups_per_chunk * 4);
}

// True in every thread of the row's last block to finish (after its partial is visible).
__device__ bool last_block(unsigned* counter, int chunks) {
  __shared__ bool last;
  __syncthreads();  // the partial was written by thread 0 before this
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1u) == static_cast<unsigned>(chunks - 1);
    if (last) {
      *counter = 0;  // ready for the next launch; nobody else touches it in this one
      __threadfence();
    }
  }
  __syncthreads();
  return last;
}

__global__ void __launch_bounds__(kSampleThreads) split_max_kernel(SampleRowsArgs a, Split sp) {
  __shared__ float maxes[sampling::kSampleWarps];
  const float* x = row_ptr(a, blockIdx.y);
  int begin, end;
  chunk_range(a, sp, begin, end);
  float m = -INFINITY;
  for (int i = begin + threadIdx.x; i < end; i += kSampleThreads) m = fmaxf(m, x[i]);
  m = sampling::block_max(m, maxes);
  if (threadIdx.x == 0) sp.partials[blockIdx.y * sp.chunks + blockIdx.x].max = m;
}

__global__ void __launch_bounds__(kSampleThreads) split_draw_kernel(SampleRowsArgs a, Split sp) {
  __shared__ sampling::SampleShared sh;
  const int row = blockIdx.y;
  const DeviceSampleRow& r = a.rows[row];
  const float* x = row_ptr(a, row);
  Partial* parts = sp.partials + row * sp.chunks;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < sp.chunks; c += kSampleThreads) m = fmaxf(m, __ldcg(&parts[c].max));
  m = sampling::block_max(m, sh.maxes);
  const bool greedy = r.temperature < kGreedyTemperature;
  const float t = greedy ? 1.0f : r.temperature;
  const float ms = m / t;
  const bool race = !greedy && ms > -INFINITY && isfinite(ms);
  const PhiloxKey key{r.rng_key_lo, r.rng_key_hi};
  int begin, end;
  chunk_range(a, sp, begin, end);
  Best draw = sampling::no_best(), amax = sampling::no_best();
  double sum = 0.0;
  for (int g = begin / 4 + threadIdx.x; 4 * g < end; g += kSampleThreads) {
    PhiloxCounter bits{};
    if (race) bits = philox4x32_10({static_cast<uint32_t>(g), r.rng_step, r.rng_seq_index, r.rng_tag}, key);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int i = 4 * g + lane;
      if (i >= end) break;
      const float xi = x[i];
      if (isfinite(m)) sum += expf(xi - m);
      const float s = xi / t;
      if (!isnan(s) && sampling::better(Best{s, i}, amax)) amax = Best{s, i};
      if (!race) continue;
      const float w = expf(s - ms);
      if (!(w > 0.0f)) continue;
      const Best cand{w / -logf(uniform_open01(bits[lane])), i};
      if (sampling::better(cand, draw)) draw = cand;
    }
  }
  amax = sampling::block_best(amax, sh.best);
  draw = race ? sampling::block_best(draw, sh.best) : amax;
  sum = sampling::block_sum1(sum, sh.sums);
  if (threadIdx.x == 0) {
    Partial& p = parts[blockIdx.x];
    p.draw = draw;
    p.argmax_s = amax;
    p.sum = sum;
  }
  if (!last_block(&sp.counters[2 * row], sp.chunks)) return;
  // The merge, by the whole block (one thread walking 256 chunks' partials through L2 took ~45 us
  // at batch 1): better() is a total order (ties to the lower id), so the picks do not depend on
  // the reduction's shape; the sum's fixed tree makes it the same from launch to launch.
  Best d = sampling::no_best(), ds = sampling::no_best();
  double part = 0.0;
  for (int c = threadIdx.x; c < sp.chunks; c += kSampleThreads) {
    const Best cd{__ldcg(&parts[c].draw.key), __ldcg(&parts[c].draw.id)};
    const Best cs{__ldcg(&parts[c].argmax_s.key), __ldcg(&parts[c].argmax_s.id)};
    if (sampling::better(cd, d)) d = cd;
    if (sampling::better(cs, ds)) ds = cs;
    part += __ldcg(&parts[c].sum);
  }
  Best best = sampling::block_best(d, sh.best);
  const Best best_s = sampling::block_best(ds, sh.best);
  const double total = sampling::block_sum1(part, sh.sums);
  if (threadIdx.x != 0) return;
  if (best.id == INT_MAX) best = best_s;  // greedy on all-NaN, or a race with no candidate
  const int32_t token = best.id == INT_MAX ? 0 : best.id;
  const double lse = isfinite(m) ? static_cast<double>(m) + log(total) : static_cast<double>(m);
  SampleOut& o = a.out[row];
  o.token_id = token;
  o.logprob = static_cast<float>(static_cast<double>(x[token]) - lse);
  o.num_top = 0;
}

__global__ void __launch_bounds__(kSampleThreads) split_rank_kernel(SampleRowsArgs a, Split sp) {
  __shared__ double sums[sampling::kSampleWarps];
  const int row = blockIdx.y;
  const float* x = row_ptr(a, row);
  const float value = x[__ldcg(&a.out[row].token_id)];
  int begin, end;
  chunk_range(a, sp, begin, end);
  double n = 0.0;
  for (int i = begin + threadIdx.x; i < end; i += kSampleThreads) n += x[i] >= value ? 1.0 : 0.0;
  n = sampling::block_sum1(n, sums);
  Partial* parts = sp.partials + row * sp.chunks;
  if (threadIdx.x == 0) parts[blockIdx.x].count = static_cast<int32_t>(n);
  if (!last_block(&sp.counters[2 * row + 1], sp.chunks)) return;
  double rank = 0.0;  // whole counts: exact in double, whatever the order
  for (int c = threadIdx.x; c < sp.chunks; c += kSampleThreads) rank += __ldcg(&parts[c].count);
  rank = sampling::block_sum1(rank, sums);
  if (threadIdx.x == 0) a.out[row].rank = static_cast<int32_t>(rank);
}

// Chunks per row: about kTargetBlocks blocks in all, at least kMinGroupsPerChunk groups each;
// with many rows, chunks of at most kMaxGroupsPerChunk (one block per 128k-logit row would scan
// 500 logits per thread, latency bound, at 2 blocks per SM).
Split plan_split(const SampleRowsArgs& a) {
  const int groups = (a.vocab + 3) / 4;
  int chunks = std::max({1, kTargetBlocks / std::max(1, a.num_rows),
                         (groups + kMaxGroupsPerChunk - 1) / kMaxGroupsPerChunk});
  int per = (groups + chunks - 1) / chunks;
  per = std::max(per, kMinGroupsPerChunk);
  chunks = (groups + per - 1) / per;
  Split sp{};
  sp.chunks = chunks;
  sp.groups_per_chunk = per;
  return sp;
}

// Scratch layout: the counters ([kSampleSplitMaxRows][2], zero between launches), then the
// partials. The counters' place must not depend on the launch's row count: a launch of fewer
// rows would write partials over the counters that a later, larger launch expects at zero.
constexpr size_t kCounterBytes = 2 * sizeof(unsigned) * kSampleSplitMaxRows;
static_assert(kCounterBytes % 16 == 0);

}  // namespace

bool sample_split_usable(const SampleRowsArgs& a) {
  if (!a.split_rows || a.num_rows > sample_split_max_rows() || a.any_ops || !a.scratch ||
      !sample_split_enabled())
    return false;
  const Split sp = plan_split(a);
  return kCounterBytes + sizeof(Partial) * sp.chunks * a.num_rows <= a.scratch_bytes;
}

Status sample_rows_split(const SampleRowsArgs& a, cudaStream_t stream) {
  Split sp = plan_split(a);
  // The counters must start at zero: the caller zeroes the scratch once, every launch leaves
  // them at zero.
  auto* base = static_cast<std::byte*>(a.scratch);
  sp.counters = reinterpret_cast<unsigned*>(base);
  sp.partials = reinterpret_cast<Partial*>(base + kCounterBytes);
  const dim3 grid(sp.chunks, a.num_rows);
  split_max_kernel<<<grid, kSampleThreads, 0, stream>>>(a, sp);
  FOLIO_RETURN_IF_ERROR(launch_status("split_max_kernel"));
  split_draw_kernel<<<grid, kSampleThreads, 0, stream>>>(a, sp);
  FOLIO_RETURN_IF_ERROR(launch_status("split_draw_kernel"));
  split_rank_kernel<<<grid, kSampleThreads, 0, stream>>>(a, sp);
  return launch_status("split_rank_kernel");
}

}  // namespace folio::cuda
