#include "model/cuda_tp_executor.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "base/log.h"
#include "dist/communicator.h"
#include "dist/rank_threads.h"
#include "dist/tp_shard.h"
#include "model/cuda_tp_rank.h"

namespace folio {

// Rank r's state lives in slot r and is only touched from rank r's thread (after creation).
struct CudaTpExecutor::Group {
  explicit Group(int world) : threads(world), agreement(world), ranks(world) {}
  struct Rank {
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<cuda::PeerAllReduceRank> peer;  // null: NCCL for every all-reduce
    CudaTpRank ctx;
    std::unique_ptr<CudaLlamaExecutor> exec;
    std::vector<float> scratch_logits;  // ranks other than 0 get none back
  };
  RankThreads threads;
  RankAgreement agreement;
  std::vector<Rank> ranks;
  std::string name;

  ~Group() {
    // Every device idle first: a rank's peer all-reduce stores into the others' staging and
    // activations, which must outlive every kernel still queued anywhere. Work stuck after a
    // failure (a collective one rank never joined) is cut short by aborting NCCL; a stuck peer
    // all-reduce traps.
    if (!threads.run([](int) { return cuda::wait_idle(30.0); }).ok()) {
      (void)threads.run([this](int r) {
        ranks[r].comm.reset();  // finalize with a deadline, else abort
        return Status();
      });
      (void)threads.run([](int) { return cuda::wait_idle(90.0); });
    }
    // Executors and communicators are torn down on their own thread (their device current).
    (void)threads.run([this](int r) {
      ranks[r].exec.reset();
      ranks[r].peer.reset();
      ranks[r].comm.reset();
      return Status();
    });
  }
};

namespace {

// The largest all-reduce by peer stores: decode steps' activations, [max_num_seqs, hidden] of
// 16-bit elements, up to a cap. Each rank stores its message to world - 1 peers, while NCCL's
// ring moves about twice the message whatever the world, so the cap shrinks with the world. On
// two H200s (PeerAllReduceBench) peer stores take 4.1 us at 8 KiB against NCCL's 19.7, 11.6 us
// at 2 MiB against 38.1, 36.9 us at 8 MiB against 56.8.
constexpr size_t kPeerAllReduceCapBytes = size_t{8} << 20;

size_t peer_all_reduce_bytes(const ModelConfig& c, const CudaExecutorOptions& o, int world) {
  const size_t decode = static_cast<size_t>(std::max(1, o.max_num_seqs)) * c.hidden_size * 2;
  const size_t cap = kPeerAllReduceCapBytes / static_cast<size_t>(world - 1);
  return std::min(cap, decode) / 16 * 16;
}

// FOLIO_PEER_TWO_SHOT_FROM=<KiB> moves the one-shot / two-shot crossover (measuring runs);
// "off" keeps the two-shot form out (messages past the staging then go by NCCL).
size_t two_shot_from_bytes() {
  const char* e = std::getenv("FOLIO_PEER_TWO_SHOT_FROM");
  if (e && std::string(e) == "off") return cuda::kPeerTwoShotOff;
  if (!e || !*e) return cuda::kPeerTwoShotFromDefault;
  char* end = nullptr;
  const unsigned long long kib = std::strtoull(e, &end, 10);
  if (*end != '\0' || e[0] == '-' || kib > (1ull << 40)) {
    log_warn(std::string("FOLIO_PEER_TWO_SHOT_FROM=") + e +
             ": not a size in KiB or \"off\"; the default crossover stays");
    return cuda::kPeerTwoShotFromDefault;
  }
  return static_cast<size_t>(kib) << 10;
}

// `view`: rank 0's (null without peer access), whose two-shot form may not exist for this world.
std::string all_reduce_summary(const cuda::PeerAllReduceView* view, size_t peer_bytes) {
  if (!view) return "by NCCL";
  const size_t two_shot_from = view->two_shot_from;
  const std::string one_shot = "up to " + std::to_string(peer_bytes >> 10) + " KiB";
  if (two_shot_from == cuda::kPeerTwoShotOff || !cuda::peer_all_reduce_two_shot_fits(*view, 16))
    return "by peer stores " + one_shot + " (one-shot), larger by NCCL";
  return "by peer stores: one-shot " + one_shot + " (with the norm after it) and below " +
         std::to_string(two_shot_from >> 10) + " KiB, two-shot (in place) from there";
}

}  // namespace

Status check_tensor_parallel(const ModelConfig& c, int world) {
  FOLIO_RETURN_IF_ERROR(
      check_tp_divisibility(c.num_heads, c.num_kv_heads, c.intermediate_size, world));
  FOLIO_ASSIGN_OR_RETURN(int n, cuda::device_count());
  if (n < world)
    return invalid_argument("--tensor-parallel-size " + std::to_string(world) + " needs " +
                            std::to_string(world) + " GPUs; " + std::to_string(n) +
                            (n == 1 ? " is" : " are") + " visible (CUDA_VISIBLE_DEVICES?)");
  return Status();
}

Result<std::unique_ptr<CudaTpExecutor>> CudaTpExecutor::create(const ModelConfig& config,
                                                               const Checkpoint* checkpoint,
                                                               const CudaExecutorOptions& options,
                                                               int world, double nccl_timeout_s) {
  if (world < 2) return invalid_argument("CudaTpExecutor needs at least 2 ranks");
  FOLIO_RETURN_IF_ERROR(check_tensor_parallel(config, world));
  FOLIO_ASSIGN_OR_RETURN(NcclUniqueId id, Communicator::unique_id());
  auto g = std::make_unique<Group>(world);
  // First every rank's communicator and peer all-reduce buffers (allocated before the executor
  // plans its memory, so the plan sees them), then the executors, each given every rank's view.
  const bool peer =
      options.custom_all_reduce && cuda::PeerAllReduceRank::all_peers_reachable(world);
  const size_t peer_bytes = peer_all_reduce_bytes(config, options, world);
  const size_t two_shot_from = two_shot_from_bytes();
  Status st = g->threads.run([&](int r) -> Status {
    Group::Rank& rank = g->ranks[r];
    Status s = [&]() -> Status {
      FOLIO_RETURN_IF_ERROR(cuda::set_device(r));
      FOLIO_ASSIGN_OR_RETURN(rank.comm, Communicator::init(id, r, world, nccl_timeout_s));
      if (!peer) return Status();
      FOLIO_RETURN_IF_ERROR(cuda::PeerAllReduceRank::enable_peer_access(r, world));
      FOLIO_ASSIGN_OR_RETURN(rank.peer, cuda::PeerAllReduceRank::allocate(r, world, peer_bytes));
      return Status();
    }();
    if (!s.ok()) g->agreement.fail(s);
    return s;
  });
  FOLIO_RETURN_IF_ERROR(st);
  if (peer) {
    std::vector<cuda::PeerAllReduceRank*> views;
    for (Group::Rank& rank : g->ranks) views.push_back(rank.peer.get());
    cuda::PeerAllReduceRank::connect(views);
    for (Group::Rank& rank : g->ranks) rank.peer->mutable_view().two_shot_from = two_shot_from;
  }
  st = g->threads.run([&](int r) -> Status {
    Group::Rank& rank = g->ranks[r];
    Status s = [&]() -> Status {
      if (rank.peer) rank.ctx.peer = &rank.peer->view();
      FOLIO_ASSIGN_OR_RETURN(rank.ctx.shard,
                             make_tp_shard(config.num_heads, config.num_kv_heads,
                                           config.intermediate_size, config.vocab_size, r, world));
      rank.ctx.comm = rank.comm.get();
      RankAgreement* agreement = &g->agreement;  // lives as long as the executor
      rank.ctx.agree = [agreement](const Status& own, int64_t v) {
        return agreement->agree(own, v);
      };
      CudaExecutorOptions o = options;
      o.device = r;
      o.tp = &rank.ctx;
      FOLIO_ASSIGN_OR_RETURN(rank.exec, CudaLlamaExecutor::create(config, checkpoint, o));
      return Status();
    }();
    if (!s.ok()) g->agreement.fail(s);  // no rank waits for this one any more
    return s;
  });
  FOLIO_RETURN_IF_ERROR(st);
  const KvCacheShape& kv0 = g->ranks[0].exec->kv_shape();
  for (int r = 1; r < world; ++r) {
    const KvCacheShape& kv = g->ranks[r].exec->kv_shape();
    if (kv.num_blocks != kv0.num_blocks || kv.num_swap_blocks != kv0.num_swap_blocks)
      return internal_error("tensor-parallel ranks planned different KV caches");
  }
  auto version = Communicator::version();
  const std::string nccl = version.ok() ? *version : "?";
  g->name = "cuda:0-" + std::to_string(world - 1) + " (" +
            g->ranks[0].exec->memory_report().device + ", tensor-parallel " +
            std::to_string(world) + ", NCCL " + nccl + ")";
  log_info("tensor parallel: " + std::to_string(world) + " ranks over NCCL " + nccl +
           "; KV cache " + std::to_string(kv0.num_blocks) + " blocks on every rank, " +
           std::to_string(g->ranks[0].ctx.shard.local_kv_heads) + " KV heads each" +
           (g->ranks[0].ctx.shard.kv_replicated ? " (replicated)" : "") + "; all-reduces " +
           all_reduce_summary(peer ? &g->ranks[0].peer->view() : nullptr, peer_bytes));
  return std::unique_ptr<CudaTpExecutor>(new CudaTpExecutor(std::move(g)));
}

CudaTpExecutor::CudaTpExecutor(std::unique_ptr<Group> group) : g_(std::move(group)) {}
CudaTpExecutor::~CudaTpExecutor() = default;

std::string CudaTpExecutor::device_name() const {
  return g_->name;
}
Result<double> CudaTpExecutor::measure_copy_gbps() const {
  double sum = 0;
  for (int r = 0; r < world(); ++r) {
    FOLIO_ASSIGN_OR_RETURN(const double gbps, g_->ranks[r].exec->measure_copy_gbps());
    sum += gbps;
  }
  return sum;
}
int CudaTpExecutor::vocab_size() const {
  return g_->ranks[0].exec->vocab_size();
}
const KvCacheShape& CudaTpExecutor::kv_shape() const {
  return g_->ranks[0].exec->kv_shape();
}
const CudaMemoryReport& CudaTpExecutor::memory_report() const {
  return g_->ranks[0].exec->memory_report();
}
int CudaTpExecutor::world() const {
  return g_->threads.world();
}
std::vector<int> CudaTpExecutor::cascade_steps_by_rank() const {
  std::vector<int> steps;
  for (const Group::Rank& r : g_->ranks) steps.push_back(r.exec->cascade_steps());
  return steps;
}

Status CudaTpExecutor::execute(const ForwardBatch& batch, std::vector<float>& logits) {
  return execute_on_ranks(batch, nullptr, logits, nullptr);
}

Status CudaTpExecutor::execute_sampled(const ForwardBatch& batch,
                                       const DeviceSamplingBatch& sampling,
                                       std::vector<float>& host_logits,
                                       std::vector<DeviceSample>& samples) {
  return execute_on_ranks(batch, &sampling, host_logits, &samples);
}

Status CudaTpExecutor::execute_on_ranks(const ForwardBatch& batch,
                                        const DeviceSamplingBatch* sampling,
                                        std::vector<float>& logits,
                                        std::vector<DeviceSample>* samples) {
  FOLIO_RETURN_IF_ERROR(ranks_pending_error());
  if (uncollected_ > 0) return internal_error("a synchronous step with launched steps uncollected");
  return g_->threads.run([&](int r) {
    Group::Rank& rank = g_->ranks[r];
    if (r == 0 && sampling) return rank.exec->execute_sampled(batch, *sampling, logits, *samples);
    return rank.exec->execute(batch, r == 0 ? logits : rank.scratch_logits);
  });
}

// A rank whose copy/swap failed would leave the step at once while the others wait for it in
// the first all-reduce: check them all before starting.
Status CudaTpExecutor::ranks_pending_error() const {
  for (int r = 0; r < world(); ++r)
    if (Status st = g_->ranks[r].exec->pending_error(); !st.ok())
      return Status(st.code(), "tensor-parallel rank " + std::to_string(r) + ": " + st.message());
  return Status();
}

bool CudaTpExecutor::launches_async() const {
  for (const Group::Rank& rank : g_->ranks)
    if (!rank.exec->launches_async()) return false;
  return true;
}

// Each rank's launch returns once its work is queued; the collectives inside pair up on the
// devices. Every rank gets the same sampling rows (the other ranks need their count).
Status CudaTpExecutor::launch_sampled(const ForwardBatch& batch,
                                      const DeviceSamplingBatch& sampling) {
  FOLIO_RETURN_IF_ERROR(ranks_pending_error());
  if (uncollected_ >= 2) return internal_error("launch_sampled: two steps uncollected");
  if (!sampling.host_rows.empty() || batch.num_tokens() == 0)
    return internal_error("launch_sampled: a step with tokens and no host rows");
  FOLIO_RETURN_IF_ERROR(
      g_->threads.run([&](int r) { return g_->ranks[r].exec->launch_sampled(batch, sampling); }));
  ++uncollected_;
  return Status();
}

// On rank 0's thread, where its executor's state lives (the other ranks have nothing to do).
Status CudaTpExecutor::collect_samples(std::vector<DeviceSample>& samples) {
  if (uncollected_ == 0) return internal_error("collect_samples: no samples queued");
  --uncollected_;
  return g_->threads.run(
      [&](int r) { return r == 0 ? g_->ranks[0].exec->collect_samples(samples) : Status(); });
}

void CudaTpExecutor::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  (void)g_->threads.run([&](int r) {
    g_->ranks[r].exec->copy_blocks(copies);  // a failure is deferred to the rank's next execute
    return Status();
  });
}

void CudaTpExecutor::swap_out(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  (void)g_->threads.run([&](int r) {
    g_->ranks[r].exec->swap_out(copies);
    return Status();
  });
}

void CudaTpExecutor::swap_in(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  (void)g_->threads.run([&](int r) {
    g_->ranks[r].exec->swap_in(copies);
    return Status();
  });
}

}  // namespace folio
