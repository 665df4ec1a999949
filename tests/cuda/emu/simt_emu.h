// A host SIMT emulator for checking a CUDA kernel's logic without a GPU (see
// scripts/emu-prefill-v2.sh): every thread of a block is a std::thread, __syncthreads is a block
// barrier, and warp collectives (shuffles, ldmatrix, mma in shim/backend/cuda/mma_ptx.cuh) publish
// each lane's operands in a per-warp exchange area between two warp barriers. Blocks run one
// after another; cp.async copies synchronously. Shared memory starts as 0xFF bytes (NaN in
// bf16/fp16), so reads of never-written shared memory show up in the output. It checks indexing,
// fragment layouts, masking and the online softmax; not timing, races or PTX syntax.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#undef __launch_bounds__
#define __launch_bounds__(...)

namespace emu {

struct Block {
  std::vector<unsigned char> smem;
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
  uint64_t xch[32][32][8];  // [warp][lane][payload word]
  // Asynchronous copies and mbarriers (emu_async.h): their state, created on first use, and the
  // lock and wake-up they share with thread exit (an exited thread never arrives again, which
  // the deadlock check counts on).
  std::shared_ptr<void> async;
  std::mutex mu;
  std::condition_variable cv;
  int threads = 0, exited = 0;
};

inline thread_local Block* cur = nullptr;
inline thread_local unsigned tid = 0;

inline unsigned char* smem() {
  return cur->smem.data();
}
// __syncthreads; emu_block_sync.h hooks in the race check's memory ordering (sync_hook_enter runs
// before the barrier, sync_hook_leave after it, then a second barrier).
inline void (*sync_hook_enter)() = nullptr;
inline void (*sync_hook_leave)() = nullptr;
inline void sync() {
  if (sync_hook_enter != nullptr) sync_hook_enter();
  cur->bar->arrive_and_wait();
  if (sync_hook_leave != nullptr) {
    sync_hook_leave();
    cur->bar->arrive_and_wait();
  }
}
inline void warp_sync() {
  cur->warp_bar[tid / 32]->arrive_and_wait();
}
// __syncwarp: a warp barrier; emu_block_sync.h hooks in the race check's memory ordering.
inline void (*syncwarp_hook)() = nullptr;
inline void syncwarp() {
  if (syncwarp_hook != nullptr)
    syncwarp_hook();
  else
    warp_sync();
}
inline uint64_t (&lane_slot(int lane))[8] {
  return cur->xch[tid / 32][lane];
}

}  // namespace emu

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 gridDim;
inline int min(int a, int b) {
  return a < b ? a : b;
}
#define __syncthreads() emu::sync()
#define __syncwarp(...) emu::syncwarp()  // any mask: the emulated warps are whole

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  const int lane = emu::tid % 32;
  emu::warp_sync();  // the previous collective's reads are done
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  emu::lane_slot(lane)[0] = bits;
  emu::warp_sync();
  bits = static_cast<uint32_t>(emu::lane_slot(lane ^ mask)[0]);
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}

inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask) {
  float f;
  std::memcpy(&f, &v, 4);
  f = __shfl_xor_sync(mask, f, lane_mask);
  unsigned r;
  std::memcpy(&r, &f, 4);
  return r;
}

inline int __shfl_sync(unsigned, int v, int src_lane) {
  const int lane = emu::tid % 32;
  emu::warp_sync();
  emu::lane_slot(lane)[0] = static_cast<uint32_t>(v);
  emu::warp_sync();
  return static_cast<int>(static_cast<uint32_t>(emu::lane_slot(src_lane % 32)[0]));
}

// Device-memory atomics (blocks run one after another, threads of a block concurrently).
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline unsigned atomicExch(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).exchange(v);
}

namespace emu {

// kernel<<<grid, threads, smem_bytes>>>(args...), one block at a time.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, int threads, size_t smem_bytes, const Args&... args) {
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        b.smem.assign(smem_bytes, 0xFF);
        b.bar = std::make_unique<std::barrier<>>(threads);
        b.threads = threads;
        for (int w = 0; w < threads / 32; ++w)
          b.warp_bar.push_back(std::make_unique<std::barrier<>>(32));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            cur = &b;
            tid = t;
            threadIdx = uint3{static_cast<unsigned>(t), 0, 0};
            blockIdx = uint3{x, y, z};
            gridDim = grid;
            kernel(args...);
            {
              std::lock_guard<std::mutex> lk(b.mu);
              ++b.exited;
            }
            b.cv.notify_all();
          });
        for (auto& t : ts) t.join();
      }
}

}  // namespace emu
