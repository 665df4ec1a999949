// Peer all-reduce: the sum over the tensor-parallel ranks of one process, for the small
// activations of decode steps, by direct stores over NVLink (peer access) instead of NCCL. The
// same idea as vLLM's and TensorRT-LLM's custom all-reduce; NCCL's ring pays ~15 us of
// protocol per call, and a batch-1 step makes 65 calls (two H200s: 4.1 us against 19.7 at 8 KiB).
//
// One shot, push: each rank stores its elements into slot [rank] of every rank's staging
// buffer, raises a flag per (block, rank) on every rank (a release at system scope), waits for every rank's flag (acquire), then sums the `world` slots of its own staging
// in rank order in fp32 and rounds once: every rank gets the same bits. Staging comes in two
// halves used by alternate calls (parity of the per-block call counter kept on the device, so it
// works inside CUDA graphs): call n+2 writes where call n was read only after every rank raised
// its flags of call n+1, which each rank does after its whole call n kernel ran. The ranks must
// make the same calls in the same order (they do: each rank runs the same step).
//
// A rank that never arrives would leave the others spinning: after ~60 s the kernel traps, and
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

// What one rank's kernel needs: every rank's staging and flags (device pointers valid on this
// rank's device through peer access), and this rank's call counters.
struct PeerAllReduceView {
  int rank = 0, world = 0;
  size_t max_bytes = 0;  // per rank and call
  // Rank p's staging: [2 halves][world slots][max_bytes]; its flags: [kPeerMaxBlocks][kPeerMaxRanks].
  void* staging[kPeerMaxRanks] = {};
  uint32_t* flags[kPeerMaxRanks] = {};
  uint32_t* calls = nullptr;  // this rank's [kPeerMaxBlocks] call counters
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

 private:
  PeerAllReduceView view_;
  DeviceBuffer staging_, flags_, calls_;
};

// Whether a message of `bytes` goes by peer stores: within max_bytes and whole 16-byte vectors.
bool peer_all_reduce_fits(const PeerAllReduceView& v, size_t bytes);

// buf[i] = sum over ranks of buf[i], in place, `elems` elements of `dt`, on `stream`.
Status peer_all_reduce_sum(const PeerAllReduceView& v, DType dt, void* buf, size_t elems,
                           void* stream);

// The same over x [rows, dim], then y = rms_norm(x) with `weight` and `eps` in the same launch,
// bit for bit what rms_norm (rms_norm.h) writes from the summed x: the all-reduce + RMSNorm
// fusion of TensorRT-LLM and vLLM, one launch and one pass over x fewer. Needs
// peer_all_reduce_fits for the whole of x and rms_norm_is_block_pack8(dim).
bool peer_all_reduce_norm_fits(const PeerAllReduceView& v, int rows, int dim);
Status peer_all_reduce_rms_norm(const PeerAllReduceView& v, DType dt, void* x, const void* weight,
                                void* y, int rows, int dim, float eps, void* stream);

}  // namespace folio::cuda
