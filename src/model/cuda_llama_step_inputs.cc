// CudaLlamaExecutor: a step's inputs: host-side checks of the ForwardBatch and its upload.
#include <cstring>
#include <string>

#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

template <typename T>
size_t bytes_of(const std::vector<T>& v) { return v.size() * sizeof(T); }

}  // namespace

// Host-side checks of what the kernels would otherwise read out of bounds: token ids, slots,
// block ids, each sequence's table covering its context, logits rows.
Status CudaLlamaExecutor::Impl::validate(const ForwardBatch& b, const CacheView& c) const {
  const int T = b.num_tokens(), S = b.num_seqs(), V = config.vocab_size;
  if (b.positions.size() != static_cast<size_t>(T) || b.slot_mapping.size() != static_cast<size_t>(T) ||
      b.query_start.size() != static_cast<size_t>(S) + 1 ||
      b.block_table_start.size() != static_cast<size_t>(S) + 1 || b.query_start[S] != T)
    return internal_error("ForwardBatch: inconsistent array sizes");
  for (int32_t id : b.token_ids) {
    if (id < 0 && placeholder_sample(id) >= placeholder_rows)  // -1: none accepted
      return internal_error("placeholder token " + std::to_string(id) + " names no sample of " +
                            "the step launched before (" + std::to_string(placeholder_rows) + ")");
    if (id >= V)
      return invalid_argument("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                              std::to_string(V) + ")");
  }
  for (int64_t s : b.slot_mapping)
    if (s >= c.num_slots) return internal_error("slot " + std::to_string(s) + " outside the KV cache");
  const int64_t num_blocks = c.num_slots / kv.block_size;
  for (int32_t blk : b.block_table)
    if (blk < 0 || blk >= num_blocks)
      return internal_error("block " + std::to_string(blk) + " outside the KV cache");
  for (int s = 0; s < S; ++s) {
    const int q_len = b.query_start[s + 1] - b.query_start[s];
    const int64_t need = (static_cast<int64_t>(b.context_lens[s]) + kv.block_size - 1) / kv.block_size;
    if (q_len < 0 || q_len > b.context_lens[s] ||
        b.block_table_start[s + 1] - b.block_table_start[s] < need)
      return internal_error("ForwardBatch: sequence " + std::to_string(s) +
                            " has a query longer than its context or too few blocks");
  }
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= T) return internal_error("logits row " + std::to_string(r) + " outside the step");
  return Status();
}

// Packs the step's arrays into the pinned staging buffer and uploads them in one copy.
Status CudaLlamaExecutor::Impl::upload(const ForwardBatch& b, StepArrays& d) {
  struct Src { const void* p; size_t n; };
  const Src srcs[] = {{b.token_ids.data(), bytes_of(b.token_ids)},
                      {b.positions.data(), bytes_of(b.positions)},
                      {b.slot_mapping.data(), bytes_of(b.slot_mapping)},
                      {b.query_start.data(), bytes_of(b.query_start)},
                      {b.context_lens.data(), bytes_of(b.context_lens)},
                      {b.block_table_start.data(), bytes_of(b.block_table_start)},
                      {b.block_table.data(), bytes_of(b.block_table)},
                      {b.logits_rows.data(), bytes_of(b.logits_rows)}};
  size_t offsets[8], total = 0;
  for (int i = 0; i < 8; ++i) {
    offsets[i] = total;
    total += align16(srcs[i].n);
  }
  cuda::PinnedHostBuffer& staged = host_in[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(staged, total));
  FOLIO_RETURN_IF_ERROR(ensure_device(dev_in, staged.bytes()));
  auto* h = static_cast<std::byte*>(staged.data());
  for (int i = 0; i < 8; ++i)
    if (srcs[i].n) std::memcpy(h + offsets[i], srcs[i].p, srcs[i].n);
  FOLIO_RETURN_IF_ERROR(cuda::copy_async(dev_in.data(), staged.data(), total, nullptr));
  FOLIO_RETURN_IF_ERROR(resolve_placeholders(b, reinterpret_cast<int32_t*>(dev_in.data())));
  const auto* base = static_cast<const std::byte*>(dev_in.data());
  auto i32 = [&](int i) { return reinterpret_cast<const int32_t*>(base + offsets[i]); };
  d.token_ids = i32(0);
  d.positions = i32(1);
  d.slot_mapping = reinterpret_cast<const int64_t*>(base + offsets[2]);
  d.query_start = i32(3);
  d.context_lens = i32(4);
  d.block_table_start = i32(5);
  d.block_table = i32(6);
  d.logits_rows = i32(7);
  return Status();
}

}  // namespace folio
