// Peer all-reduce: the sum over the tensor-parallel ranks of one process by direct loads and
// stores over NVLink (peer access) instead of NCCL, the idea of vLLM's and TensorRT-LLM's custom
// all-reduce. NCCL's ring pays ~15 us of protocol per call, and a batch-1 step makes 65 calls
// (two H200s: 4.1 us against 19.7 at 8 KiB); at prefill sizes it moves the same bytes as the
// two-shot form below, slower (256 MiB: 0.89 ms against 0.80).
//
// One shot, push (small messages): each rank stores its elements into slot [rank] of every
// rank's staging buffer, raises a flag per (block, rank) on every rank (a release at system
// scope), waits for every rank's flag (acquire), then sums the `world` slots of its own staging
// in rank order in fp32 and rounds once: every rank gets the same bits. Staging comes in two
// halves used by alternate calls (parity of the per-block call counter kept on the device, so it
// works inside CUDA graphs): call n+2 writes where call n was read only after every rank raised
// its flags of call n+1, which each rank does after its whole call n kernel ran. The ranks must
// make the same calls in the same order (they do: each rank runs the same step).
//
// Two shot, in place (from 2 MiB, and past the staging): see peer_all_reduce_two_shot below.
// Either way a rank that fails on the host before a call leaves the others spinning in it until
// the trap (NCCL, where it still runs, times out instead).
//
// A rank that never arrives would leave the others spinning: after ~60 s the kernels trap, and
// the step fails with a CUDA error instead of hanging. Tools that run one kernel at a time
// across the process (compute-sanitizer) make the ranks wait for each other forever: run TP
// under them with --disable-custom-all-reduce. Host code; plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kPeerMaxRanks = 8;
inline constexpr int kPeerMaxBlocks = 64;
// Where the two-shot form overtakes the one-shot on two H200s (PeerAllReduceBench, session 38).
inline constexpr size_t kPeerTwoShotFromDefault = size_t{2} << 20;
// The two-shot grid: 64, 128 and 256 blocks measured level at 16-256 MiB (NVLink is the limit);
// at 2-8 MiB 64 level with 128 and up to 13% ahead of 256 (PeerAllReduceBench.TwoShot, s38).
inline constexpr int kTwoShotMaxBlocks = 256, kTwoShotBlocksDefault = 64;
inline constexpr size_t kPeerTwoShotOff = ~size_t{0};  // two_shot_from: never two-shot

// What one rank's kernel needs: every rank's staging and flags (device pointers valid on this
// rank's device through peer access), and this rank's call counters.
struct PeerAllReduceView {
  int rank = 0, world = 0;
  size_t max_bytes = 0;  // per rank and call
  // Rank p's staging: [2 halves][world slots][max_bytes]; its flags:
  // [kPeerMaxBlocks][kPeerMaxRanks].
  void* staging[kPeerMaxRanks] = {};
  uint32_t* flags[kPeerMaxRanks] = {};
  uint32_t* calls = nullptr;  // this rank's [kPeerMaxBlocks] call counters
  // The two-shot form (in place, no staging; peer_all_reduce_two_shot.cu): rank p's flags and
  // buffer addresses, [kTwoShotMaxBlocks][kPeerMaxRanks] each, this rank's call counters, and
  // the grid every rank launches (the same on every rank; may change between calls).
  uint32_t* two_shot_flags[kPeerMaxRanks] = {};
  uint64_t* two_shot_ptrs[kPeerMaxRanks] = {};
  uint32_t* two_shot_calls = nullptr;
  int two_shot_blocks = kTwoShotBlocksDefault;
  int two_shot_resident = 0;  // blocks resident at once on this rank's device (at allocation)
  // Messages of at least this many bytes take the two-shot form (peer_all_reduce_form).
  size_t two_shot_from = kPeerTwoShotFromDefault;
};

// One rank's buffers, allocated on its device (the current one) and freed there.
class PeerAllReduceRank {
 public:
  // max_bytes: the largest message (per rank) this will carry.
  static Result<std::unique_ptr<PeerAllReduceRank>> allocate(int rank, int world, size_t max_bytes);
  // Whether every device in [0, world) can reach every other by peer access (beyond two, with
  // native atomics too: NVLink, not PCIe).
  static bool all_peers_reachable(int world);
  // Enables this rank's device (current) to access the others' memory. Call from every rank.
  static Status enable_peer_access(int rank, int world);
  // Every rank's view, once each rank has allocated (ranks[p] is rank p's).
  static void connect(const std::vector<PeerAllReduceRank*>& ranks);

  const PeerAllReduceView& view() const { return view_; }
  PeerAllReduceView& mutable_view() { return view_; }  // to set two_shot_from

 private:
  PeerAllReduceView view_;
  DeviceBuffer staging_, flags_, calls_, two_shot_flags_, two_shot_ptrs_, two_shot_calls_;
};

// Whether a message of `bytes` goes by peer stores: within max_bytes and whole 16-byte vectors.
bool peer_all_reduce_fits(const PeerAllReduceView& v, size_t bytes);

// buf[i] = sum over ranks of buf[i], in place, `elems` elements of `dt`, on `stream`.
Status peer_all_reduce_sum(const PeerAllReduceView& v, DType dt, void* buf, size_t elems,
                           void* stream);

// Blocks of the world's two-shot kernels (either dtype) resident at once on the current device;
// 0 where the world has no instance or the query fails.
int peer_two_shot_resident_blocks(int world);

// Two-shot, in place, for messages past the staging (prefill steps) or where it is faster: each
// rank publishes buf's address and a flag to every rank, then sums its 1/world share of the
// vectors over every rank's buf (peer loads) in rank order, fp32, rounded once, and stores the
// result into every rank's buf (peer stores); a second flag per rank says its stores are done.
// Each rank moves (world - 1) / world of the message in and out, as NCCL's ring does, without
// its protocol. Any size of whole 16-byte vectors; world 2, 4 or 8. The same bits as the
// one-shot form. buf must be cudaMalloc memory (peer access maps it; pool and virtual-memory
// allocations are not); it may be freed once the call has ended on its own rank, which waits
// for every rank to be done with it.
bool peer_all_reduce_two_shot_fits(const PeerAllReduceView& v, size_t bytes);
Status peer_all_reduce_two_shot(const PeerAllReduceView& v, DType dt, void* buf, size_t elems,
                                void* stream);

// Which form a message of `bytes` takes: the two-shot from v.two_shot_from on, the one-shot below
// where it fits, the two-shot past the staging, none (NCCL) where neither fits or the two-shot is
// off (kPeerTwoShotOff) and the one-shot does not fit.
enum class PeerAllReduceForm { kNone, kOneShot, kTwoShot };
PeerAllReduceForm peer_all_reduce_form(const PeerAllReduceView& v, size_t bytes);

// The same over x [rows, dim], then y = rms_norm(x) with `weight` and `eps` in the same launch,
// bit for bit what rms_norm (rms_norm.h) writes from the summed x: the all-reduce + RMSNorm
// fusion of TensorRT-LLM and vLLM, one launch and one pass over x fewer. Needs
// peer_all_reduce_fits for the whole of x and rms_norm_is_block_pack8(dim).
bool peer_all_reduce_norm_fits(const PeerAllReduceView& v, int rows, int dim);
Status peer_all_reduce_rms_norm(const PeerAllReduceView& v, DType dt, void* x, const void* weight,
                                void* y, int rows, int dim, float eps, void* stream);

}  // namespace folio::cuda
