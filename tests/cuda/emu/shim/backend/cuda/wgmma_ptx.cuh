// Emulated stand-in for src/backend/cuda/wgmma_ptx.cuh (same API, host code on simt_emu.h).
// Operands are read straight from the emulated shared memory by decoding the 64-bit matrix
// descriptor from the PTX ISA definitions (start address, LBO, SBO, swizzle mode) and the
// canonical layouts of wgmma ("Shared Memory Matrix Layout": K-major and MN-major, no swizzle
// and 128-byte swizzle), written here independently of the kernel's own address math. Shared
// addresses are offsets into emu::smem(), so a 1024-byte-aligned offset plays the role of an
// aligned shared address. Each thread computes its own accumulator entries (layout in the real
// header); register-A operands are exchanged within the warp, which holds all 16 rows it needs.
// Asynchrony is modelled the other way round from the hardware's worst case: a wgmma only
// records itself; it runs, reading its accumulator and A registers and shared memory then, when a
// wgmma.wait_group retires its commit group. So a kernel that reads an accumulator before the
// wait, or writes accumulator / A registers or the tile before it, gets wrong results here.
// Two checks besides (emu_async.h, emu_block_sync.h): a wgmma's shared-memory operands (the part this thread's
// entries read) are hashed at issue and again when it runs, and a change in between fails: the
// tile was overwritten while the wgmma was in flight (a stage released or refilled too early).
// And a wgmma issued after an mbarrier wait on cp.async-filled data without fence.proxy.async in
// between fails. Other fences are no-ops (not checked).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <vector>

#include "backend/cuda/mma_ptx.cuh"  // half_bits_to_float, smem_addr
#include "emu_block_sync.h"
#include "simt_emu.h"

namespace folio::cuda {

inline uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (uint64_t{1} << 62);
}

// As the kernel's, plus the check its comment promises: the start address stays in its field.
inline uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  if (bytes % 16 != 0 || (desc & 0x3FFF) + (bytes >> 4) > 0x3FFF) {
    std::fprintf(stderr, "emulated wgmma: descriptor advanced past its start-address field\n");
    std::abort();
  }
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

namespace emu_wgmma {
struct Pending {
  std::vector<std::function<void()>> open;                // issued, not yet committed
  std::deque<std::vector<std::function<void()>>> groups;  // committed, oldest first
};
inline thread_local Pending pending;
}  // namespace emu_wgmma

inline void wgmma_fence() {}
inline void wgmma_commit() {
  auto& q = emu_wgmma::pending;
  q.groups.push_back(std::move(q.open));
  q.open.clear();
}
// Runs the committed groups but the N most recent, oldest first (every lane of the warp runs
// the same sequence, so the warp exchanges inside stay in step).
template <int N>
inline void wgmma_wait() {
  auto& q = emu_wgmma::pending;
  while (q.groups.size() > N) {
    for (auto& f : q.groups.front()) f();
    q.groups.pop_front();
  }
}
// As the kernel's, and recorded as a write for the race check (emu_async.h).
inline void store_zero_16_smem(void* p) {
  std::memset(p, 0, 16);
  emu::generic_smem_store(p);
}
inline void store_16_smem(void* p, uint4 v) {
  std::memcpy(p, &v, 16);
  emu::generic_smem_store(p);
}
// Lane l = 8i + r writes row r of matrix i at its own address: lanes 4r..4r+3's r[i], in lane
// order (the layout wgmma_ptx.cuh documents), recorded as a write for the race check.
inline void stmatrix_x4(void* p, const uint32_t (&r)[4]) {
  const int lane = emu::tid % 32;
  emu::warp_sync();  // the previous collective's reads are done
  for (int i = 0; i < 4; ++i) emu::lane_slot(lane)[i] = r[i];
  emu::warp_sync();
  const int matrix = lane / 8, row = lane % 8;
  if ((static_cast<unsigned char*>(p) - emu::smem()) % 16 != 0) {
    std::fprintf(stderr, "emulated stmatrix: row address not 16-byte aligned\n");
    std::abort();
  }
  for (int t = 0; t < 4; ++t) {
    const uint32_t v = static_cast<uint32_t>(emu::lane_slot(4 * row + t)[matrix]);
    std::memcpy(static_cast<unsigned char*>(p) + 4 * t, &v, 4);
  }
  emu::generic_smem_store(p);
}
inline void fence_proxy_async_smem() {
  emu::unfenced_acquire = false;
}
template <int N>
inline void wgmma_fence_operand(float (&)[N]) {}

namespace emu_wgmma {

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "emulated wgmma: %s\n", what);
  std::abort();
}

// Byte address in shared memory of element (mn, k) of a 16-bit operand (A: mn = row m; B:
// mn = column n; k in [0, 16)) described by `desc`, `k_major` = no transpose.
inline uint32_t element_addr(uint64_t desc, int mn, int k, bool k_major) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFF) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
  const int base_offset = static_cast<int>((desc >> 49) & 7);
  const int swizzle = static_cast<int>(desc >> 62);
  if (base_offset != 0) fail("base offset other than 0 is not emulated");
  const uint64_t reserved =
      (uint64_t{3} << 14) | (uint64_t{3} << 30) | (uint64_t{7} << 46) | (uint64_t{0x3FF} << 52);
  if ((desc & reserved) != 0) fail("reserved bits set");
  uint32_t addr;
  if (swizzle == 0) {  // interleave: 8 x 16-byte core matrices
    // K-major ((8,m),(T,2)):((1T,SBO),(1,LBO)); MN-major ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)).
    if (k_major)
      addr = start + (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo;
    else
      addr = start + (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo;
    return addr;
  }
  if (swizzle != 1) fail("only no-swizzle and 128-byte swizzle are emulated");
  // 128-byte swizzle. K-major ((8,m),(T,2)):((8T,SBO),(1,T)): row mn at 128 bytes, 8-row groups
  // SBO apart, k contiguous. MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): 64 mn contiguous,
  // 64-element panels LBO apart, k rows at 128 bytes, 8-k groups SBO apart.
  if (k_major)
    addr = start + (mn % 8) * 128 + (mn / 8) * sbo + k * 2;
  else
    addr = start + (mn % 64) * 2 + (mn / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo;
  // The hardware swizzle: 16-byte chunk bits [4,7) XOR row-in-atom bits [7,10).
  return addr ^ (((addr >> 7) & 7) << 4);
}

// FNV-1a over the operand elements this thread's share of a wgmma reads: the warp's 16 rows of
// A (when A is in shared memory) and B's columns of this thread's accumulator entries.
// at_issue: also the race check's read-after-write test, else the record of the reads (emu_race.h).
template <int N>
inline uint64_t operand_hash(bool has_a, uint64_t desc_a, uint64_t desc_b, bool b_k_major,
                             bool at_issue) {
  uint64_t h = 1469598103934665603ull;
  std::vector<uint32_t> addrs;
  addrs.reserve(16 * 16 + N * 4);
  auto mix = [&](uint32_t addr) {
    if (addr + 2 > emu::cur->smem.size()) fail("operand address out of range");
    uint16_t v;
    std::memcpy(&v, emu::smem() + addr, 2);
    h = (h ^ v) * 1099511628211ull;
    addrs.push_back(addr);
  };
  if (has_a) {
    const int w = (emu::tid / 32) % 4;
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k) mix(element_addr(desc_a, 16 * w + r, k, true));
  }
  const int t = emu::tid % 4;
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 2; ++e)
      for (int k = 0; k < 16; ++k) mix(element_addr(desc_b, 8 * j + 2 * t + e, k, b_k_major));
  if (emu::race_check) emu::wgmma_reads(addrs, at_issue);
  return h;
}

// At issue: the fence check, and the operand hash to compare when the wgmma runs.
template <int N>
inline uint64_t on_issue(bool has_a, uint64_t desc_a, uint64_t desc_b, bool b_k_major) {
  if (emu::unfenced_acquire)
    fail("wgmma issued after an mbarrier wait on cp.async data without fence.proxy.async");
  return operand_hash<N>(has_a, desc_a, desc_b, b_k_major, true);
}
template <int N>
inline void on_run(uint64_t h, bool has_a, uint64_t desc_a, uint64_t desc_b, bool b_k_major) {
  if (operand_hash<N>(has_a, desc_a, desc_b, b_k_major, false) != h)
    fail(
        "shared-memory operand changed between wgmma issue and its wait_group (a stage "
        "released or refilled too early)");
}

template <typename T>
inline float smem_elem(uint32_t addr) {
  if (addr % 2 != 0 || addr + 2 > emu::cur->smem.size()) fail("operand address out of range");
  uint16_t b;
  std::memcpy(&b, emu::smem() + addr, 2);
  return half_bits_to_float<T>(b);
}

// d (rows 16w.., this thread's entries) op= A (16 rows of the warp, as a[16][16]) · B.
template <typename T, int N>
inline void accumulate(float (&d)[N / 2], const float (&A)[16][16], uint64_t desc_b, bool b_k_major,
                       int scale_d) {
  const int lane = emu::tid % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < N / 2; ++i) {
    const int row = g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * t + i % 2;
    float s = 0.f;
    for (int k = 0; k < 16; ++k)
      s += A[row][k] * smem_elem<T>(element_addr(desc_b, col, k, b_k_major));
    d[i] = (scale_d ? d[i] : 0.f) + s;
  }
}

}  // namespace emu_wgmma

template <typename T>
inline void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  const uint64_t h = emu_wgmma::on_issue<64>(true, desc_a, desc_b, true);
  emu_wgmma::pending.open.push_back([&d, desc_a, desc_b, scale_d, h] {
    emu_wgmma::on_run<64>(h, true, desc_a, desc_b, true);
    const int w = (emu::tid / 32) % 4;
    float A[16][16];
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k)
        A[r][k] = emu_wgmma::smem_elem<T>(emu_wgmma::element_addr(desc_a, 16 * w + r, k, true));
    emu_wgmma::accumulate<T, 64>(d, A, desc_b, true, scale_d);
  });
}

template <typename T>
inline void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  const uint64_t h = emu_wgmma::on_issue<128>(true, desc_a, desc_b, true);
  emu_wgmma::pending.open.push_back([&d, desc_a, desc_b, scale_d, h] {
    emu_wgmma::on_run<128>(h, true, desc_a, desc_b, true);
    const int w = (emu::tid / 32) % 4;
    float A[16][16];
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k)
        A[r][k] = emu_wgmma::smem_elem<T>(emu_wgmma::element_addr(desc_a, 16 * w + r, k, true));
    emu_wgmma::accumulate<T, 128>(d, A, desc_b, true, scale_d);
  });
}

// Register A: lane (g, t) holds a0 (row g, k 2t..), a1 (row g + 8), a2 (row g, k 2t + 8..), a3.
template <typename T>
inline void emu_gather_a(float (&A)[16][16], const uint32_t (&a)[4]) {
  const int lane = emu::tid % 32;
  emu::warp_sync();
  for (int i = 0; i < 4; ++i) emu::lane_slot(lane)[i] = a[i];
  emu::warp_sync();
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const auto& y = emu::lane_slot(l);
    for (int k = 0; k < 2; ++k) {
      auto el = [&](uint64_t reg) { return half_bits_to_float<T>(uint16_t(reg >> (16 * k))); };
      A[g][2 * t + k] = el(y[0]);
      A[g + 8][2 * t + k] = el(y[1]);
      A[g][2 * t + 8 + k] = el(y[2]);
      A[g + 8][2 * t + 8 + k] = el(y[3]);
    }
  }
}

template <typename T, int N>
inline void emu_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, bool b_k_major,
                         int scale_d) {
  const uint64_t h = emu_wgmma::on_issue<N>(false, 0, desc_b, b_k_major);
  emu_wgmma::pending.open.push_back([&d, &a, desc_b, b_k_major, scale_d, h] {
    emu_wgmma::on_run<N>(h, false, 0, desc_b, b_k_major);
    float A[16][16];
    emu_gather_a<T>(A, a);
    emu_wgmma::accumulate<T, N>(d, A, desc_b, b_k_major, scale_d);
  });
}
template <typename T>
inline void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                               int scale_d) {
  emu_wgmma_rs<T, 64>(d, a, desc_b, true, scale_d);
}
template <typename T>
inline void wgmma_m64n64k16_rs_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                  int scale_d) {
  emu_wgmma_rs<T, 64>(d, a, desc_b, false, scale_d);
}
template <typename T>
inline void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                int scale_d) {
  emu_wgmma_rs<T, 128>(d, a, desc_b, true, scale_d);
}
template <typename T>
inline void wgmma_m64n128k16_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                   int scale_d) {
  emu_wgmma_rs<T, 128>(d, a, desc_b, false, scale_d);
}

}  // namespace folio::cuda
