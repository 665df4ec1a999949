// CudaLlamaExecutor: attention of a step that is not all decodes, run as groups of sequences.
//
// The scheduler puts a mixed step's decodes first (schedule_running's decode pass), then its
// prefill chunks. Two reasons to split such a step instead of sending every row to the prefill
// kernel:
//  - An fp8 KV cache. The prefill kernels (prefill_attention.h) load K/V tiles as bf16/fp16
//    through TMA or cp.async straight into the layouts the tensor cores read, so rather than
//    teach each of them e4m3, a prefill group's blocks are gathered into a 16-bit scratch pool
//    (dequant_kv_blocks: exact, every e4m3 value is a bf16/fp16 value) and the same kernels run
//    on it through a block table of scratch ids. The scratch holds fp8_scratch_blocks blocks,
//    never fewer than one sequence of max_model_len, so prefill sequences whose contexts do not
//    fit at once form several groups. Decode rows skip all that: the decode kernel reads e4m3.
//  - Decode rows in the prefill kernel take a 128-row tile item each (4 rows used at GQA 4);
//    the decode kernel is built for them. On by default for 16-bit caches too: B1 (H100,
//    2026-11-26, alternated twice) 49.81 / 49.85 req/s split against 49.22 / 48.96 unsplit.
//    FOLIO_SPLIT_MIXED=0 sends a 16-bit cache's mixed steps to the prefill kernel whole.
// The groups, the scratch block table (ForwardBatch's CSR layout) and the (cache block, scratch
// block) pairs are planned once per step on the host and uploaded in one copy; every layer
// reuses them: per layer, one launch per decode group, two (dequantize, attend) per prefill
// group of an fp8 cache. Under FOLIO_CUDA_STAGE_TIMES each launch is its own stage (attn_decode,
// kv_dequant, attn_prefill), so a mixed step's decode rows count as decode attention.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/kv_dequant.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

// Tokens the fp8 scratch holds beyond max_model_len's floor: enough that the prefill chunks of a
// 16k-token step run as one group (Llama-3-8B: 2 x 128 MiB).
constexpr int kFp8ScratchTokens = 65536;

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

Status CudaLlamaExecutor::Impl::reserve_step_attention(int max_len) {
  split_mixed = true;
  if (const char* e = std::getenv("FOLIO_SPLIT_MIXED")) split_mixed = std::string(e) != "0";
  if (!kv_fp8()) return Status();
  split_mixed = true;
  const int bs = kv.block_size;
  int extra = kFp8ScratchTokens;  // FOLIO_FP8_SCRATCH_TOKENS: a smaller scratch (tests: groups)
  if (const char* e = std::getenv("FOLIO_FP8_SCRATCH_TOKENS")) extra = std::max(1, std::atoi(e));
  const int tokens = std::max(max_len, extra);
  fp8_scratch_blocks = (tokens + bs - 1) / bs;
  const size_t bytes = static_cast<size_t>(fp8_scratch_blocks) * bs * config.kv_size() *
                       cuda::dtype_size(dt);
  FOLIO_RETURN_IF_ERROR(ensure_device(fp8_scratch_k, bytes));
  FOLIO_RETURN_IF_ERROR(ensure_device(fp8_scratch_v, bytes));
  // Rows past a context's end are masked, but must be finite: start from zeros.
  FOLIO_RETURN_IF_ERROR(cuda::memset_async(fp8_scratch_k.data(), 0, bytes));
  return cuda::memset_async(fp8_scratch_v.data(), 0, bytes);
}

Status CudaLlamaExecutor::Impl::plan_step_attention(const ForwardBatch& b) {
  const int S = b.num_seqs(), bs = kv.block_size;
  step_groups.clear();
  fp8_pairs_host.clear();
  // Entries a sequence does not need (its table may run past its context) point at scratch
  // block 0: any read stays inside the scratch.
  if (kv_fp8()) fp8_table_host.assign(b.block_table.size(), 0);
  auto is_decode = [&](int s) { return b.query_start[s + 1] - b.query_start[s] == 1; };
  int s = 0;
  while (s < S) {
    StepGroup g;
    g.decode = is_decode(s);
    g.seq_begin = s;
    g.pair_begin = static_cast<int>(fp8_pairs_host.size());
    int used = 0;  // scratch blocks the group takes (fp8 prefill groups)
    for (; s < S && is_decode(s) == g.decode; ++s) {
      if (g.decode || !kv_fp8()) continue;
      const int need = (b.context_lens[s] + bs - 1) / bs;
      if (need > fp8_scratch_blocks)
        return internal_error("fp8 prefill: a context of " + std::to_string(b.context_lens[s]) +
                              " tokens exceeds the scratch (" +
                              std::to_string(static_cast<int64_t>(fp8_scratch_blocks) * bs) + ")");
      if (used + need > fp8_scratch_blocks) break;  // the next group starts at s
      const int t0 = b.block_table_start[s];
      for (int i = 0; i < need; ++i) {
        fp8_table_host[t0 + i] = used + i;
        fp8_pairs_host.push_back({b.block_table[t0 + i], used + i});
      }
      used += need;
    }
    g.seq_end = s;
    g.pair_end = static_cast<int>(fp8_pairs_host.size());
    if (g.decode) {
      const std::span<const int32_t> lens(b.context_lens.data() + g.seq_begin,
                                          static_cast<size_t>(g.seq_end - g.seq_begin));
      FOLIO_ASSIGN_OR_RETURN(g.decode_plan, plan_decode(lens));
      FOLIO_RETURN_IF_ERROR(ensure_device(attn_workspace, g.decode_plan.workspace_bytes));
    } else {
      const std::span<const int32_t> qs(b.query_start.data() + g.seq_begin,
                                        static_cast<size_t>(g.seq_end - g.seq_begin) + 1);
      FOLIO_ASSIGN_OR_RETURN(g.prefill_plan, cuda::plan_prefill_attention(qs, config.num_heads,
                                                                          config.num_kv_heads));
    }
    step_groups.push_back(g);
  }
  if (!kv_fp8()) return Status();

  const size_t table_bytes = align16(fp8_table_host.size() * sizeof(int32_t));
  const size_t pair_bytes = fp8_pairs_host.size() * sizeof(BlockCopy);
  const size_t total = table_bytes + pair_bytes;
  cuda::PinnedHostBuffer& staged = fp8_host[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(staged, total));
  FOLIO_RETURN_IF_ERROR(ensure_device(fp8_dev, staged.bytes()));
  auto* h = static_cast<std::byte*>(staged.data());
  if (!fp8_table_host.empty())
    std::memcpy(h, fp8_table_host.data(), fp8_table_host.size() * sizeof(int32_t));
  if (pair_bytes) std::memcpy(h + table_bytes, fp8_pairs_host.data(), pair_bytes);
  // The legacy stream orders this copy before the step's kernels; this staging copy's last user,
  // two steps back, has finished (see Impl::staging).
  if (total) FOLIO_RETURN_IF_ERROR(cuda::copy_async(fp8_dev.data(), staged.data(), total, nullptr));
  auto* d = static_cast<std::byte*>(fp8_dev.data());
  fp8_table = reinterpret_cast<const int32_t*>(d);
  fp8_pairs = reinterpret_cast<const BlockCopy*>(d + table_bytes);
  return Status();
}

// One layer's attention over the step's groups; p describes the whole step.
Status CudaLlamaExecutor::Impl::step_attention(const cuda::PagedAttentionParams& p) {
  const int64_t block_elems = static_cast<int64_t>(kv.block_size) * config.kv_size();
  for (const StepGroup& g : step_groups) {
    cuda::PagedAttentionParams gp = p;
    gp.num_seqs = g.seq_end - g.seq_begin;
    // Rows of q and out stay absolute: query_start[s] is still the row of sequence s.
    gp.query_start = p.query_start + g.seq_begin;
    gp.context_lens = p.context_lens + g.seq_begin;
    gp.block_table_start = p.block_table_start + g.seq_begin;
    if (g.decode) {
      FOLIO_RETURN_IF_ERROR(
          cuda::decode_attention(gp, g.decode_plan, attn_workspace.data(), stream));
      mark("attn_decode");
      continue;
    }
    if (kv_fp8()) {
      FOLIO_RETURN_IF_ERROR(cuda::dequant_kv_blocks(
          dt, p.k_cache, p.v_cache, fp8_scratch_k.data(), fp8_scratch_v.data(), block_elems,
          fp8_pairs + g.pair_begin, g.pair_end - g.pair_begin, stream));
      mark("kv_dequant");
      gp.kv_dtype = KvCacheDtype::kAuto;
      gp.k_cache = fp8_scratch_k.data();
      gp.v_cache = fp8_scratch_v.data();
      gp.block_table = fp8_table;
    }
    FOLIO_RETURN_IF_ERROR(cuda::prefill_attention(gp, g.prefill_plan, stream));
    mark("attn_prefill");
  }
  return Status();
}

}  // namespace folio
