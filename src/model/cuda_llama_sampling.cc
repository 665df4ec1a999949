// CudaLlamaExecutor's device sampling (backend/cuda/sample_rows.h) around compute_logits: the
// step's sampling rows and ops go up in one copy before the lm_head chunks, each chunk samples
// its rows while its logits are on the device, and the results come down in one copy to pinned
// memory behind an event (collected at once, or by collect_samples for a launched step).
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/placeholder_tokens.h"
#include "backend/cuda/sample_rows.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// Layout of sample_in: [rows][ops]; of sample_out: [SampleOut x rows][TopEntry x rows x K].
struct SampleLayout {
  size_t rows_bytes, ops_bytes, out_bytes, top_bytes;
  explicit SampleLayout(const DeviceSamplingBatch& s)
      : rows_bytes(align16(s.rows.size() * sizeof(DeviceSampleRow))),
        ops_bytes(align16(s.ops.size() * sizeof(LogitOp))),
        out_bytes(align16(s.rows.size() * sizeof(cuda::SampleOut))),
        top_bytes(s.rows.size() * kMaxDeviceLogprobs * sizeof(cuda::TopEntry)) {}
};

}  // namespace

Status CudaLlamaExecutor::Impl::upload_sampling(const DeviceSamplingBatch& s) {
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const DeviceSampleRow& r = s.rows[i];
    if (r.logits_row < 0 || (i > 0 && r.logits_row < s.rows[i - 1].logits_row) ||
        r.op_begin < 0 || r.phase_end[3] > static_cast<int32_t>(s.ops.size()))
      return internal_error("DeviceSamplingBatch: rows out of order or ops out of range");
  }
  bool placeholder_ops = false;
  for (const LogitOp& op : s.ops) {
    if (op.token < 0 && placeholder_sample(op.token) < placeholder_rows) {
      placeholder_ops = true;  // resolved below from the step launched before
      continue;
    }
    if (op.token < 0 || op.token >= config.vocab_size)
      return internal_error("DeviceSamplingBatch: op token outside the vocabulary");
  }
  const SampleLayout L(s);
  const size_t in_bytes = L.rows_bytes + L.ops_bytes;
  if (in_bytes == 0) return Status();
  cuda::PinnedHostBuffer& staged = sample_host[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(staged, in_bytes));
  FOLIO_RETURN_IF_ERROR(ensure_device(sample_in, staged.bytes()));
  FOLIO_RETURN_IF_ERROR(ensure_device(op_saved, std::max<size_t>(16, s.ops.size() * sizeof(float))));
  if (sample_scratch.bytes() == 0) {
    FOLIO_RETURN_IF_ERROR(ensure_device(sample_scratch, cuda::kSampleSplitScratchBytes));
    FOLIO_RETURN_IF_ERROR(cuda::memset_async(sample_scratch.data(), 0, sample_scratch.bytes()));
  }
  auto* h = static_cast<std::byte*>(staged.data());
  std::memcpy(h, s.rows.data(), s.rows.size() * sizeof(DeviceSampleRow));
  if (!s.ops.empty()) std::memcpy(h + L.rows_bytes, s.ops.data(), s.ops.size() * sizeof(LogitOp));
  FOLIO_RETURN_IF_ERROR(cuda::copy_async(sample_in.data(), staged.data(), in_bytes, nullptr));
  // The ops' placeholders read the previous step's samples, so sample_out may only grow (and
  // lose them) after this.
  if (placeholder_ops) {
    auto* in = static_cast<std::byte*>(sample_in.data());
    FOLIO_RETURN_IF_ERROR(cuda::resolve_placeholder_ops(
        reinterpret_cast<const DeviceSampleRow*>(in), static_cast<int>(s.rows.size()),
        reinterpret_cast<LogitOp*>(in + L.rows_bytes), sample_out.as<cuda::SampleOut>(),
        placeholder_rows, nullptr));
  }
  return ensure_device(sample_out, L.out_bytes + L.top_bytes);
}

// Samples the rows whose logits_row lies in this chunk [r0, r0 + n) of ForwardBatch::logits_rows
// (the rows are ascending, so they form one run).
Status CudaLlamaExecutor::Impl::sample_chunk(const DeviceSamplingBatch& s, int r0, int n,
                                             float* chunk) {
  size_t begin = 0;
  while (begin < s.rows.size() && s.rows[begin].logits_row < r0) ++begin;
  size_t end = begin;
  while (end < s.rows.size() && s.rows[end].logits_row < r0 + n) ++end;
  if (begin == end) return Status();
  const SampleLayout L(s);
  auto* in = static_cast<std::byte*>(sample_in.data());
  auto* out = static_cast<std::byte*>(sample_out.data());
  cuda::SampleRowsArgs a;
  a.logits = chunk;
  a.vocab = config.vocab_size;
  a.num_logits_rows = n;
  a.logits_row_offset = r0;
  a.rows = reinterpret_cast<const DeviceSampleRow*>(in) + begin;
  a.num_rows = static_cast<int>(end - begin);
  a.ops = reinterpret_cast<const LogitOp*>(in + L.rows_bytes);
  a.op_saved = op_saved.as<float>();
  a.split_rows = true;
  for (size_t i = begin; i < end; ++i) {
    a.any_ops = a.any_ops || s.rows[i].phase_end[3] > s.rows[i].op_begin;
    a.split_rows = a.split_rows && cuda::sample_split_eligible(s.rows[i], config.vocab_size);
  }
  a.scratch = sample_scratch.data();
  a.scratch_bytes = sample_scratch.bytes();
  a.out = reinterpret_cast<cuda::SampleOut*>(out) + begin;
  a.top = reinterpret_cast<cuda::TopEntry*>(out + L.out_bytes) + begin * kMaxDeviceLogprobs;
  return cuda::sample_rows(a, nullptr);
}

namespace {

void unpack_samples(const cuda::SampleOut* outs, const cuda::TopEntry* tops, size_t rows,
                    std::vector<DeviceSample>& result) {
  result.assign(rows, DeviceSample{});
  for (size_t i = 0; i < rows; ++i) {
    DeviceSample& d = result[i];
    d.token_id = outs[i].token_id;
    d.logprob = outs[i].logprob;
    d.rank = outs[i].rank;
    if (!tops) continue;
    for (int j = 0; j < outs[i].num_top; ++j) {
      const cuda::TopEntry& t = tops[i * kMaxDeviceLogprobs + j];
      d.top.emplace_back(t.token_id, t.logprob);
    }
  }
}

bool any_top(const DeviceSamplingBatch& s) {
  for (const DeviceSampleRow& r : s.rows)
    if (r.num_logprobs > 0) return true;
  return false;
}

}  // namespace

// sample_down[staging] holds [SampleOut x rows] then, when any row asked for logprobs, the
// [TopEntry x rows x K] block, at the offsets of sample_out.
Status CudaLlamaExecutor::Impl::enqueue_samples(const DeviceSamplingBatch& s) {
  if (sample_ready.ev.empty()) FOLIO_RETURN_IF_ERROR(sample_ready.create(2, cudaEventDisableTiming));
  const SampleLayout L(s);
  LaunchedStep step;
  step.slot = staging;
  step.rows = s.rows.size();
  step.any_top = any_top(s);
  const size_t bytes = step.any_top ? L.out_bytes + L.top_bytes : L.out_bytes;
  cuda::PinnedHostBuffer& down = sample_down[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(down, bytes));
  if (bytes > 0)  // a step of prompt chunks only samples nothing
    FOLIO_RETURN_IF_ERROR(cuda::copy_async(down.data(), sample_out.data(), bytes, nullptr));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(sample_ready.ev[static_cast<size_t>(staging)], nullptr));
  launched.push_back(step);
  return Status();
}

Status CudaLlamaExecutor::Impl::collect_launched(std::vector<DeviceSample>& result) {
  if (launched.empty()) return internal_error("collect_samples: no samples queued");
  const LaunchedStep step = launched.front();
  launched.pop_front();
  // Surfaces any asynchronous error of the step, as the synchronous path's synchronize does.
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(sample_ready.ev[static_cast<size_t>(step.slot)]));
  const auto* down = static_cast<const std::byte*>(sample_down[step.slot].data());
  const size_t out_bytes = align16(step.rows * sizeof(cuda::SampleOut));
  unpack_samples(reinterpret_cast<const cuda::SampleOut*>(down),
                 step.any_top ? reinterpret_cast<const cuda::TopEntry*>(down + out_bytes) : nullptr,
                 step.rows, result);
  return Status();
}

}  // namespace folio
