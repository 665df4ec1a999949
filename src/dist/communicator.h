// Communicator: one rank's NCCL communicator (collectives between the GPUs of a tensor-parallel
// group), with every failure as a Status. NCCL is loaded at run time (dlopen of libnccl.so.2,
// from LD_LIBRARY_PATH or the CUDA toolkit): a single-GPU folio never needs the library, and a
// missing one is a clear error at startup rather than a loader failure.
//
// Usage, one thread per rank: the coordinator calls unique_id() once and hands it to every rank;
// each rank thread makes its device current (cudaSetDevice) and calls init() with it. init()
// is non-blocking underneath (ncclCommInitRankConfig with blocking = 0) and polls the
// communicator's state until ready or `timeout_s`, so a rank that never arrives gives an error,
// not a hang (FOLIO_NCCL_BLOCKING=1: NCCL's blocking mode, no deadline). Collectives run on
// `stream` (nullptr: the legacy default stream, which orders them with the executor's kernels) and
// are asynchronous like kernels.
//
// NVLink multicast (NVLS) stays off: init sets NCCL_NVLS_ENABLE=0 in the process environment
// before NCCL reads it, unless the user set the variable. On hosts whose GPUs others share, NVLS
// can put the GPUs out of service.
//
// Only built with FOLIO_CUDA. Plain C++ header.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace folio {

enum class CommType { kBF16, kFP16, kF32, kI32 };

using NcclUniqueId = std::array<char, 128>;  // ncclUniqueId's bytes

class Communicator {
 public:
  // Loads NCCL (once per process) and makes a fresh id for one group.
  static Result<NcclUniqueId> unique_id();
  // Collective over the `world` ranks; call from the rank's thread with its device current.
  static Result<std::unique_ptr<Communicator>> init(const NcclUniqueId& id, int rank, int world,
                                                    double timeout_s = 120.0);
  // NCCL_NVLS_ENABLE=0 unless already set; called by unique_id() and init().
  static void disable_nvls_unless_set();
  // "2.28.9" (the loaded library), or why it could not be loaded.
  static Result<std::string> version();

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }

  // buf[i] = sum over ranks of buf[i], in place, `count` elements.
  Status all_reduce_sum(void* buf, size_t count, CommType type, void* stream = nullptr);
  // recv = [rank 0's send, rank 1's send, ...], `count` elements each.
  Status all_gather(const void* send, void* recv, size_t count, CommType type,
                    void* stream = nullptr);
  // buf = root's buf on every rank, in place, `count` elements.
  Status broadcast(void* buf, size_t count, CommType type, int root, void* stream = nullptr);

 private:
  Communicator() = default;
  void* comm_ = nullptr;  // ncclComm_t
  int rank_ = 0, world_ = 1;
  double timeout_s_ = 120.0;
};

}  // namespace folio
