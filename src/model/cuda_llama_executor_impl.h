// Private to cuda_llama_executor*.cc: the executor's state and the forward's building blocks.
// Buffers only grow; every device call is on the legacy default stream (nullptr), so the step's
// uploads, kernels and the logits copy are ordered without events.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/cuda_events.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/logits_gemm.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/stage_timer.h"
#include "backend/device_sampling.h"
#include "model/cuda_llama_executor.h"
#include "model/cuda_llama_weights.h"
#include "model/cuda_tp_rank.h"

namespace folio {

// Grows `buf` to at least `bytes` (never shrinks; the old contents are dropped).
Status ensure_device(cuda::DeviceBuffer& buf, size_t bytes);
// A pinned staging buffer of at least `bytes`: regrown with headroom (half again) when short, so
// steps that grow slowly do not reallocate each time.
Status ensure_pinned(cuda::PinnedHostBuffer& buf, size_t bytes);

// Where each layer's K and V cache lives: the real cache, or the profiling forward's scratch.
struct CacheView {
  std::vector<void*> k, v;  // [num_layers], each [num_slots, num_kv_heads, head_dim]
  int64_t num_slots = 0;
};

// The step's ForwardBatch arrays on the device (one upload, offsets into one buffer).
struct StepArrays {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_table_start = nullptr;
  const int32_t* block_table = nullptr;
  const int32_t* logits_rows = nullptr;
  const int32_t* step_partition = nullptr;  // graph steps: PagedAttentionParams's (one int)
};

// What a step returns: the raw logits of some rows to the host, and/or tokens sampled on the
// device (then `sampling` lists the rows and `host_rows` which logits still come back).
struct LogitsRequest {
  std::vector<float>* host_logits = nullptr;      // [returned rows, vocab]; nullptr: none
  const DeviceSamplingBatch* sampling = nullptr;  // nullptr: every row returns (execute())
  std::vector<DeviceSample>* samples = nullptr;   // one per sampling->rows
  // Executor::launch_sampled: the samples come down asynchronously (collect_samples), and the
  // step returns without waiting for the device.
  bool launch_only = false;
};

// The token and sequence counts a forward runs at (a CUDA-graph step is padded to its bucket).
struct StepShape {
  int tokens = 0;
  int seqs = 0;
};

// Rows of logits computed per lm_head GEMM: bounds the fp32 logits buffer (256 x 128k vocab =
// 128 MiB) however many rows a step asks for (prompt_logprobs asks for every prompt token).
inline constexpr int kLogitsChunkRows = 256;

struct CudaLlamaExecutor::Impl {
  // With tensor parallelism `config` is this rank's view (rank_config: local heads, KV heads and
  // intermediate size) and `full_config` the whole model; without, both are the model.
  ModelConfig config, full_config;
  TpShard shard;  // world 1 (the whole model) without tensor parallelism
  const CudaTpRank* tp = nullptr;
  CudaExecutorOptions options;
  cuda::DType dt = cuda::DType::kBF16;
  cuda::DeviceInfo info;
  KvCacheShape kv;
  CudaMemoryReport report;
  CudaLlamaWeights weights;
  std::unique_ptr<cuda::Gemm> gemm;
  std::unique_ptr<cuda::LogitsGemm> logits_gemm;
  cuda::DeviceBuffer inv_freq;  // [head_dim / 2] fp32

  // KV cache: one arena, layer l's K then V; the swap pool has the same layout on the host.
  cuda::DeviceBuffer kv_arena;
  cuda::PinnedHostBuffer swap_arena;
  CacheView cache;
  cuda::DeviceBuffer cache_ptrs;  // device [2 * num_layers] bases for copy_blocks and swaps
  cuda::DeviceBuffer swap_ptrs;   // device [2 * num_layers] bases of the swap pool (none: null)
  cuda::DeviceBuffer copy_pairs;  // the pairs of the last copy_blocks / swap (legacy stream order)

  // Step inputs: packed on the host (pinned), uploaded in one copy. Every pinned staging buffer
  // a step writes on the host comes in two, used by alternate steps (`staging`): with async
  // steps the host packs step k+1 while step k's uploads may still wait behind step k-1 on the
  // stream; step k-1's have run by then (its samples were collected).
  int staging = 0;
  cuda::PinnedHostBuffer host_in[2];
  cuda::DeviceBuffer dev_in;
  // Activations, [tokens, width] each, sized for max_num_batched_tokens.
  int act_tokens = 0;
  cuda::DeviceBuffer x, normed, qkv, q, k, v, attn, gate_up, act;
  cuda::DeviceBuffer rows, rows_normed, logits;  // [kLogitsChunkRows, hidden | vocab]
  cuda::DeviceBuffer attn_workspace;
  cuda::DeviceBuffer gathered;  // TP: [world, kLogitsChunkRows, local_vocab] fp32 logits
  Status deferred;              // a copy/swap failure, returned by the next execute()
  // Device sampling: rows and ops uploaded in one copy, results downloaded in one copy.
  cuda::PinnedHostBuffer sample_host[2];
  cuda::DeviceBuffer sample_in, sample_out, op_saved;
  // A step's samples come down into sample_down[slot] (pinned), where sample_ready's event
  // `slot` marks them; `launched` holds the steps not yet collected, oldest first (a
  // synchronous step collects its own at once; Executor::launch_sampled's wait). The next
  // launch's placeholders name the sample rows of the step launched last (launch_rows; -1 after
  // a synchronous step: no placeholders then), still in sample_out on the device;
  // placeholder_rows is that count during a launched forward.
  struct LaunchedStep {
    int slot = 0;
    size_t rows = 0;
    bool any_top = false;
  };
  std::deque<LaunchedStep> launched;
  cuda::PinnedHostBuffer sample_down[2];
  cuda::CudaEvents sample_ready;
  int launch_rows = -1;
  int placeholder_rows = -1;
  // Tensor parallelism: rank 0 samples and broadcasts the launched step's SampleOut rows into
  // every rank's sample_out (the other ranks' placeholders read them). A rank other than 0
  // collects nothing, so it marks its launched steps' ends here and waits for the step that
  // used a staging slot before packing into it again (rank 0's wait is its collect).
  cuda::CudaEvents rank_step_done;
  bool rank_step_pending[2] = {false, false};
  cuda::DeviceBuffer sample_scratch;        // the split sampler's (sample_rows.h), zeroed once
  std::unique_ptr<cuda::StageTimer> timer;  // FOLIO_CUDA_STAGE_TIMES=1 only

  // The stream the forward's embedding and layers go to: the legacy default stream (nullptr),
  // or a capture stream while a CUDA graph is being captured.
  void* stream = nullptr;
  // One qkv_post launch instead of split_qkv .. reshape_and_cache (FOLIO_QKV_POST=0: the chain;
  // heads|pairs: qkv_post in that form, qkv_post.h).
  bool fused_qkv_post = true;
  // All-decode steps whose plan allows it (decode_fuses_qkv_post) and no q/k norm: qkv_post's
  // work done by the decode attention kernel itself, one launch fewer per layer
  // (FOLIO_FUSED_QKV_ATTN=0: qkv_post runs).
  bool fused_qkv_attn = true;
  // At m where gate_up runs on the skinny kernel: silu_and_mul folded into it
  // (skinny_gemm_silu; FOLIO_FUSED_SILU=0: the two launches).
  bool fused_gate_up_silu = true;
  // At m where qkv (gate_up) runs on the skinny kernel: the RMSNorm before it computed inside it
  // (skinny_gemm.h's fused norm, bit-identical). FOLIO_FUSED_NORM=0 | qkv | all.
  bool fused_norm_qkv = true;
  bool fused_norm_mlp = false;
  // Tensor parallelism: where the peer all-reduce takes x, the RMSNorm after it runs in the same
  // launch (peer_all_reduce_rms_norm; FOLIO_TP_FUSED_NORM=0: its own launch). input_normed: the
  // all-reduce before layer l left its input norm in `normed` (set and consumed in order, as
  // run_layers calls the layers).
  bool fused_tp_norm = true;
  bool input_normed = false;
  // Tensor parallelism, FOLIO_TP_OVERLAP_CHUNKS=n (opt-in; cuda_llama_tp_overlap.cc): in steps
  // of at least tp_overlap_from tokens (FOLIO_TP_OVERLAP_FROM), o_proj and down run in n chunks
  // of rows, each chunk's all-reduce on comm_stream beside the next chunk's product, the
  // two-shot's grid then tp_overlap_blocks (FOLIO_TP_OVERLAP_BLOCKS). Off by default: 1-2%
  // faster at 16384-token steps, level at 8192, 4% slower at 2048 (NOTES.md, session 39).
  int tp_overlap_chunks = 0;
  int tp_overlap_from = 16384;
  int tp_overlap_blocks = 32;
  cuda::CudaStream comm_stream;     // made at the first overlapped product
  cuda::CudaEvents overlap_events;  // [0] a chunk's product done, [1] its all-reduces done
  Status configure_tp_overlap();    // reads the environment (an error on a malformed value)
  bool tp_overlaps(int tokens) const;
  // x[tokens, hidden] (+)= a[tokens, k] . w^T, then summed over the ranks, chunk by chunk; the
  // legacy stream waits for the sums before its next launch.
  Status row_parallel_overlapped(const void* a, const void* w, int tokens, int k, bool residual);
  // Batch-1 decode: gate_up (+ silu) and down as a SkinnyFlow pair (skinny_gemm.h), down's warps
  // waiting per segment of act instead of for gate_up's whole grid. On by default for a rank
  // gate_up of at most 128 MiB (B3: Llama-3.2-3B -5.7%, 8B -tp 2 -4.7 to -6.7%),
  // FOLIO_SKINNY_FLOW=0|1 forces it (skinny_flow_policy.h). One set of cumulative counters
  // serves every layer: the pairs run one after the other on the stream.
  bool skinny_flow = false;
  cuda::DeviceBuffer skinny_flow_counters;
  // Batch-1 decode, one rank, FOLIO_DECODE_MLP=1: o_proj .. down in one persistent launch
  // (decode_mlp.h, bit-identical to the skinny launches). Off by default: slower on the H100
  // (B3 6.0 against 5.7 ms, NOTES.md "B3, session 11"). Its counters: mlp_sync.
  bool decode_mlp = false;
  cuda::DeviceBuffer mlp_sync;

  // CUDA graphs of decode steps (cuda_llama_graphs.cc), one per batch-size bucket: captured on
  // the second step of a bucket (the first, eager, creates the GEMM plans), replayed after;
  // warm_up_graphs runs those two steps for every bucket when the executor is created.
  // The step arrays of graph steps live in graph_in at offsets fixed per bucket, and attention
  // uses plans bounded by max_model_len with graph_workspace, so nothing a graph points to moves.
  bool graphs_enabled = false;
  int max_model_len = 0;
  std::vector<int> graph_buckets;  // ascending batch sizes
  // By 3 x bucket index, + 1 for the plan with DecodePlan::step_split (taken on steps that
  // split), + 2 for cascade steps (cuda_llama_cascade.cc); invalid until captured.
  static constexpr int kGraphsPerBucket = 3;
  std::vector<cuda::CudaGraph> graphs;
  std::vector<uint8_t> graph_warm;  // by bucket index: ran eagerly once
  cuda::DeviceBuffer graph_in, graph_workspace;
  cuda::PinnedHostBuffer graph_host[2];
  int graph_steps = 0, eager_decode_steps = 0;  // for the executor's summary
  int graph_captures = 0;                       // CudaLlamaExecutor::graph_captures
  // Every bucket's decode graphs (the plan without step_split, and with it where the bucket's
  // plan has it) captured from dummy steps, where options.capture_graphs_at_startup and one GPU;
  // the counters above start again at 0.
  Status warm_up_graphs();
  // Captures graphs[g_index]: the layers of a step of B rows reading `d` (in graph_in) under
  // `plan` (the bucket's bounded plan, or it without step_split).
  Status capture_decode_graph(size_t g_index, int B, const StepArrays& d,
                              const cuda::DecodePlan& plan);

  // A step that is not all decodes, as groups of sequences (cuda_llama_step_attention.cc): runs
  // of decodes through the decode kernel, runs of prefill chunks through the prefill kernel,
  // which with an fp8 KV cache (kv.dtype == kFp8E4m3) reads a 16-bit scratch copy of the
  // group's blocks (fp8_scratch_blocks blocks, at least one sequence of max_model_len).
  // split_mixed: always with fp8; by default for 16-bit caches (FOLIO_SPLIT_MIXED=0: not).
  struct StepGroup {
    bool decode = false;
    int seq_begin = 0, seq_end = 0;    // sequences [seq_begin, seq_end) of the step
    int pair_begin = 0, pair_end = 0;  // fp8: their (cache block, scratch block) pairs
    cuda::DecodePlan decode_plan;      // over the group's context lengths
    cuda::PrefillPlan prefill_plan;    // over the group's query_start
  };
  bool kv_fp8() const { return kv.dtype == KvCacheDtype::kFp8E4m3; }
  // Decode-attention plans for this model and cache (the planner's default kernel depends on the
  // cache's block size and dtype and the GPU's DRAM rate too: DecodeCacheFormat): over the step's
  // lengths, or bounded by max_model_len (the CUDA-graph plans).
  cuda::DecodeCacheFormat decode_cache_format() const {
    return {kv.block_size, kv_fp8(), info.peak_memory_gbps};
  }
  // The window that binds: the model's sliding_window where sequences can outgrow it (below it,
  // windowed attention is the whole context, and every kernel serves it); else 0.
  int binding_window() const {
    return config.sliding_window && max_model_len > *config.sliding_window ? *config.sliding_window
                                                                           : 0;
  }
  int attention_window(int layer) const {
    return binding_window() ? config.layer_window(layer) : 0;
  }
  // Decode-attention plans (cuda_llama_decode_plans.cc). Under a binding window a decode row
  // attends to at most the window's keys; where every layer slides it (plan_window) the plans,
  // and a graph step's split, cover the lengths clamped to it (attended_lens).
  int plan_window() const { return binding_window() ? config.kv_window() : 0; }
  std::span<const int32_t> attended_lens(std::span<const int32_t> lens,
                                         std::vector<int32_t>& scratch) const;
  Result<cuda::DecodePlan> plan_decode(std::span<const int32_t> lens) const;
  Result<cuda::DecodePlan> plan_decode_bounded(int num_seqs) const;
  bool split_mixed = false;
  std::vector<StepGroup> step_groups;   // the current step's
  std::vector<int32_t> fp8_table_host;  // block_table's CSR layout, scratch block ids
  std::vector<BlockCopy> fp8_pairs_host;
  cuda::PinnedHostBuffer fp8_host[2];
  cuda::DeviceBuffer fp8_dev;  // [fp8_table | fp8_pairs] of the step
  const int32_t* fp8_table = nullptr;
  const BlockCopy* fp8_pairs = nullptr;
  cuda::DeviceBuffer fp8_scratch_k, fp8_scratch_v;  // [fp8_scratch_blocks] 16-bit blocks each
  int fp8_scratch_blocks = 0;
  Status reserve_step_attention(int max_len);
  Status plan_step_attention(const ForwardBatch& b);
  Status step_attention(const cuda::PagedAttentionParams& p);

  // Cascade decode attention (cuda_llama_cascade.cc): a decode step whose rows share enough
  // prefix blocks runs cascade_attention instead of the per-row kernel, replaying its bucket's
  // cascade graph where its rows fit a bucket (cascade_graphable), else eagerly.
  bool cascade_requested = true;    // FOLIO_CASCADE_ATTENTION (unset: one GPU only)
  int cascade_mode = -1;            // -1 not decided yet; 0 off; 1 on (requested and supported)
  // The least share of the reads a plan must save (FOLIO_CASCADE_MIN_SAVING; unset: by the
  // cache's dtype, cascade_default_min_saving).
  double cascade_min_saving = 0.3;
  bool cascade_wide = true;         // FOLIO_CASCADE_WIDE: wide items on the wgmma kernel
  bool cascade_pack_one_row_only = false;  // FOLIO_CASCADE_PACKS=one-row
  bool cascade_graphs = true;              // FOLIO_CASCADE_GRAPHS
  cuda::CascadeTuning cascade_tuning;  // FOLIO_CASCADE_STAGES
  Status read_cascade_env();  // after shard and kv.dtype are set
  bool cascade_on = false;        // this step runs cascade_attention
  int cascade_steps = 0;          // steps that did
  cuda::CascadeDevicePlan cascade_plan;
  cuda::PinnedHostBuffer cascade_host[2];
  cuda::DeviceBuffer cascade_dev, cascade_ws;
  // The plan's arrays sit in cascade_dev at offsets set by these capacities (grown, never
  // shrunk; growing moves the arrays, so it drops the cascade graphs), so that a graph captured
  // on one step's plan replays the next one's (CascadeDevicePlan: the counts read on the device).
  struct CascadeCapacity {
    int items = 0, rows = 0, seqs = 0, row_slots = 0, slots = 0, packs = 0;
  };
  CascadeCapacity cascade_cap;
  bool cascade_graphable = false;           // this step may replay its bucket's cascade graph
  // This step's plan's counts (cascade_plan.counts: the same on the device).
  cuda::CascadeCounts cascade_step_counts;
  struct CascadeGraphBounds {               // a bucket's cascade graph: its kernels' grids
    int wgmma_blocks = 0, mma_blocks = 0;   // (0: not launched)
    bool warm = false;                      // a cascade step of this bucket ran
  };
  std::vector<CascadeGraphBounds> cascade_graph_bounds;  // by bucket
  int cascade_graph_steps = 0;
  Status plan_cascade_step(const ForwardBatch& b);
  Status upload_cascade_plan(const CascadePlan& plan, const std::vector<int32_t>& packs,
                             int padded_seqs);
  // Sets this step's grids (cascade_graphable) to bucket k's cascade graph's bounds, widening
  // them (and dropping the graph) where the plan needs more blocks;
  // false where the step runs eagerly: the bucket's first cascade step, and a step whose plan
  // brings a kernel the graph did not launch.
  bool bound_cascade_graph(size_t k);
  // The planner's options for this model and GPU (the kernel's rows per item, enough items).
  CascadeOptions cascade_options() const;
  cuda::PagedAttentionParams cascade_geometry() const;  // the layers' (no pointers)

  // Attributes the op launched since the last mark to `stage` (no-op without a timer, and while
  // capturing: events on the legacy stream cannot be recorded then).
  void mark(const char* stage) {
    if (timer && stream == nullptr) timer->mark(stage, nullptr);
  }

  size_t layer_block_bytes() const;  // one block of one layer's K (or V) cache
  Status reserve_activations(int tokens);
  Status upload(const ForwardBatch& b, StepArrays& d);
  Status validate(const ForwardBatch& b, const CacheView& c) const;
  Status forward(const ForwardBatch& b, const CacheView& c, const LogitsRequest& req);
  Status run_layers(StepShape sh, const StepArrays& d, const CacheView& c,
                    const cuda::DecodePlan* decode, const cuda::PrefillPlan* prefill,
                    void* workspace);
  Status layer(int l, StepShape sh, const StepArrays& d, const CacheView& c,
               const cuda::DecodePlan* decode, const cuda::PrefillPlan* prefill, void* workspace);
  // x[tokens, hidden] (+)= a[tokens, k] . w^T, summed over the ranks (tp_all_reduce_norm, with
  // norm_weight; or by chunks, row_parallel_overlapped, leaving the norm to the caller).
  struct RowParallelStages {
    const char* product;     // stage of the product (the all-reduce marks its own)
    const char* overlapped;  // stage of the chunked product + all-reduce
  };
  Status row_parallel(const void* a, const void* w, int tokens, int k, bool residual,
                      const void* norm_weight, bool& was_normed, RowParallelStages stages);
  // Layer l + 1's input norm where the end-of-layer all-reduce may run it, else nullptr.
  const void* next_input_norm(int l, int tokens) const;
  Status run_decode_mlp(int l, bool& done);  // cuda_llama_decode_mlp.cc
  Status run_skinny_flow(const cuda::SkinnyProblem& up, const CudaLayerWeights& w, bool residual);
  // cuda_llama_graphs.cc.
  Status init_graphs();
  int graph_bucket(int num_seqs) const;  // 0: no graph for this batch
  Status forward_graph(const ForwardBatch& b, const LogitsRequest& req, int bucket);
  void drop_graphs();
  Status compute_logits(const ForwardBatch& b, const StepArrays& d, const LogitsRequest& req);
  // begin: checks and uploads req.sampling, sizes req.host_logits; end: downloads the samples
  // and synchronizes (surfacing any asynchronous error of the step).
  Status begin_logits(const LogitsRequest& req, int num_rows);
  Status end_logits(const LogitsRequest& req);
  // Hands one chunk of [n, vocab] fp32 logits (rows [r0, r0 + n) of logits_rows, at `chunk` on
  // the device) to the request: the device rows are sampled, the host rows copied.
  // `next_host` walks req.sampling->host_rows across chunks.
  Status deliver_chunk(const LogitsRequest& req, int r0, int n, float* chunk, size_t& next_host);
  // cuda_llama_sampling.cc: the device sampler around compute_logits' chunks.
  Status upload_sampling(const DeviceSamplingBatch& s);
  Status sample_chunk(const DeviceSamplingBatch& s, int r0, int n, float* chunk);
  // The samples' copy to sample_down[staging] queued behind an event (end_logits), and taken
  // once the oldest queued step's event has fired: at once for a synchronous step, by
  // collect_samples for a launched one.
  Status enqueue_samples(const DeviceSamplingBatch& s);
  // TP, launched steps: rank 0's samples of this step to every rank (compute_logits_tp), and a
  // non-root rank's mark of the step's end / wait before reusing its staging slot.
  Status broadcast_samples(const LogitsRequest& req);
  Status mark_rank_step_end();
  Status wait_staging_slot();
  Status collect_launched(std::vector<DeviceSample>& out);
  // Resolves the step's placeholder token ids (already uploaded to `ids`) from the samples of
  // the step launched before, when it has any.
  Status resolve_placeholders(const ForwardBatch& b, int32_t* ids);
  // Tensor parallelism (cuda_llama_executor_tp.cc): x = sum of x over the ranks (no-op alone);
  // logits of the rank's vocabulary slice, gathered to rank 0 (the only one that delivers).
  Status tp_all_reduce(void* buf, size_t elements);
  // The same on stream `on` with `peer`'s buffers (nullptr: NCCL), no stage mark.
  Status all_reduce_on(const cuda::PeerAllReduceView* peer, void* buf, size_t elements, void* on);
  // The same over x [rows, hidden]; with a `weight`, and where the peer all-reduce fuses it,
  // also y = rms_norm(x) (`normed` says whether it did; else the caller norms).
  Status tp_all_reduce_norm(void* x, int rows, const void* weight, void* y, bool& normed);
  // Whether layer l's input norm runs inside its skinny qkv GEMV at this many tokens.
  bool qkv_norm_in_skinny(int l, int tokens) const;
  Status compute_logits_tp(const ForwardBatch& b, const StepArrays& d, const LogitsRequest& req);
  // Ok alone; with TP, every rank's `st` agreed on (an error anywhere is an error everywhere).
  Status tp_barrier(const Status& st);
};

}  // namespace folio
