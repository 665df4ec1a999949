// Communicator over NCCL loaded with dlopen: only nccl.h's types are used at compile time, every
// function comes from the library found at run time.
#include "dist/communicator.h"

#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

namespace folio {
namespace {

// The NCCL entry points folio uses.
struct NcclApi {
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*CommFinalize)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  const char* (*GetLastError)(ncclComm_t) = nullptr;
};

// Loads the library once; the error (no library, a missing symbol) is kept and returned to
// every caller.
Result<const NcclApi*> nccl() {
  static NcclApi api;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = nullptr;
    std::string tried;
    for (const char* name : {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      const char* e = dlerror();
      tried += std::string("\n  ") + name + ": " + (e ? e : "not found");
    }
    if (!lib) {
      status = not_found(
          "tensor parallelism needs NCCL (libnccl.so.2), which could not be "
          "loaded; add its folder to LD_LIBRARY_PATH:" +
          tried);
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && status.ok()) status = not_found(std::string("NCCL library lacks ") + name);
    };
    sym(api.GetVersion, "ncclGetVersion");
    sym(api.GetUniqueId, "ncclGetUniqueId");
    sym(api.CommInitRankConfig, "ncclCommInitRankConfig");
    sym(api.CommGetAsyncError, "ncclCommGetAsyncError");
    sym(api.CommFinalize, "ncclCommFinalize");
    sym(api.CommDestroy, "ncclCommDestroy");
    sym(api.CommAbort, "ncclCommAbort");
    sym(api.AllReduce, "ncclAllReduce");
    sym(api.AllGather, "ncclAllGather");
    sym(api.Broadcast, "ncclBroadcast");
    sym(api.GetErrorString, "ncclGetErrorString");
    sym(api.GetLastError, "ncclGetLastError");
  });
  if (!status.ok()) return status;
  return &api;
}

Status nccl_status(const NcclApi& api, ncclResult_t r, ncclComm_t comm, const char* what) {
  if (r == ncclSuccess) return Status();
  std::string msg = std::string("NCCL ") + what + ": " + api.GetErrorString(r);
  const char* last = api.GetLastError ? api.GetLastError(comm) : nullptr;
  if (last && *last) msg += std::string(" (") + last + ")";
  return internal_error(msg);
}

// A non-blocking communicator's calls may return ncclInProgress; poll its state until the call
// completed or failed, at most timeout_s.
Status wait_ready(const NcclApi& api, ncclComm_t comm, ncclResult_t r, double timeout_s,
                  const char* what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  for (int spins = 0; r == ncclInProgress; ++spins) {
    if (std::chrono::steady_clock::now() > deadline)
      return internal_error(std::string("NCCL ") + what + " did not complete within " +
                            std::to_string(static_cast<int>(timeout_s)) +
                            " s (a rank missing, or GPUs that cannot reach each other)");
    // Spin first (an enqueue finishing), then sleep (initialisation takes seconds).
    if (spins < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (ncclResult_t e = api.CommGetAsyncError(comm, &r); e != ncclSuccess) r = e;
  }
  return nccl_status(api, r, comm, what);
}

ncclDataType_t nccl_type(CommType t) {
  switch (t) {
    case CommType::kBF16:
      return ncclBfloat16;
    case CommType::kFP16:
      return ncclFloat16;
    case CommType::kF32:
      return ncclFloat32;
    case CommType::kI32:
      return ncclInt32;
  }
  return ncclFloat32;
}

}  // namespace

void Communicator::disable_nvls_unless_set() {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
}

Result<std::string> Communicator::version() {
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  int v = 0;
  FOLIO_RETURN_IF_ERROR(nccl_status(*api, api->GetVersion(&v), nullptr, "ncclGetVersion"));
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

Result<NcclUniqueId> Communicator::unique_id() {
  disable_nvls_unless_set();
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  ncclUniqueId id;
  FOLIO_RETURN_IF_ERROR(nccl_status(*api, api->GetUniqueId(&id), nullptr, "ncclGetUniqueId"));
  NcclUniqueId out;
  static_assert(sizeof(id.internal) == sizeof(NcclUniqueId));
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

Result<std::unique_ptr<Communicator>> Communicator::init(const NcclUniqueId& uid, int rank,
                                                         int world, double timeout_s) {
  disable_nvls_unless_set();
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  if (world < 1 || rank < 0 || rank >= world)
    return invalid_argument("NCCL init: rank " + std::to_string(rank) + " of " +
                            std::to_string(world));
  ncclUniqueId id;
  std::memcpy(id.internal, uid.data(), uid.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: returns at once and we poll with a deadline. FOLIO_NCCL_BLOCKING=1 selects
  // NCCL's blocking mode instead (no deadline), to compare if the non-blocking path misbehaves.
  const char* blocking = std::getenv("FOLIO_NCCL_BLOCKING");
  config.blocking = blocking && std::string(blocking) == "1" ? 1 : 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = api->CommInitRankConfig(&comm, world, id, rank, &config);
  Status st = r == ncclInProgress || r == ncclSuccess
                  ? wait_ready(*api, comm, r, timeout_s, "communicator initialisation")
                  : nccl_status(*api, r, comm, "ncclCommInitRankConfig");
  if (!st.ok()) {
    if (comm) api->CommAbort(comm);
    return Status(st.code(), "rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                 ": " + st.message());
  }
  std::unique_ptr<Communicator> c(new Communicator());
  c->comm_ = comm;
  c->rank_ = rank;
  c->world_ = world;
  c->timeout_s_ = timeout_s;
  return c;
}

Communicator::~Communicator() {
  if (!comm_) return;
  auto api = nccl();
  if (!api.ok()) return;
  auto comm = static_cast<ncclComm_t>(comm_);
  // A non-blocking communicator finalizes asynchronously: wait (bounded) before freeing it.
  const Status st = wait_ready(**api, comm, (*api)->CommFinalize(comm), 10.0, "finalize");
  if (st.ok())
    (*api)->CommDestroy(comm);
  else
    (*api)->CommAbort(comm);
}

Status Communicator::all_reduce_sum(void* buf, size_t count, CommType type, void* stream) {
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  auto comm = static_cast<ncclComm_t>(comm_);
  const ncclResult_t r = api->AllReduce(buf, buf, count, nccl_type(type), ncclSum, comm,
                                        static_cast<cudaStream_t>(stream));
  return wait_ready(*api, comm, r, timeout_s_, "all-reduce");
}

Status Communicator::all_gather(const void* send, void* recv, size_t count, CommType type,
                                void* stream) {
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  auto comm = static_cast<ncclComm_t>(comm_);
  const ncclResult_t r =
      api->AllGather(send, recv, count, nccl_type(type), comm, static_cast<cudaStream_t>(stream));
  return wait_ready(*api, comm, r, timeout_s_, "all-gather");
}

Status Communicator::broadcast(void* buf, size_t count, CommType type, int root, void* stream) {
  FOLIO_ASSIGN_OR_RETURN(const NcclApi* api, nccl());
  auto comm = static_cast<ncclComm_t>(comm_);
  const ncclResult_t r = api->Broadcast(buf, buf, count, nccl_type(type), root, comm,
                                        static_cast<cudaStream_t>(stream));
  return wait_ready(*api, comm, r, timeout_s_, "broadcast");
}

}  // namespace folio
