// Decode kernel "tc" (see decode_attention.h): decode v2's grid, split and merge, with the scores
// S^T = K·q^T and the product P·V on tensor cores (mma.m16n8k16, fp32 accumulation), head_dim 128.
// v2 spends most of its instructions per token (a lane group's shuffle reduction per q head, the
// online softmax per token, unpacking), which bounds it below the memory rate where bandwidth is
// high (the H200) or the bytes are few (an fp8 cache). Here a warp takes 16 tokens at a time and
// pays 16 mma, 6 shuffles of slot ids and one softmax step for the GQA group's 8 q heads.
//
// The operands come straight from global memory into registers, in the mma fragment layouts, by
// permuting the summed dimensions (any order works if both operands share it):
//   S^T[16 tokens, 8 q heads] = K[tokens, 128 dims] · Q[heads, 128 dims]^T: lane (g = lane / 4,
//     t = lane % 4) provides the A rows g and g + 8 as tokens pi(g) and pi(g) + 2, where
//     pi(g) = 4 (g / 2) + g % 2, each as 32 of the 128 dims chosen so that the lane's loads are
//     whole 16-byte chunks (kdim below), and Q's B fragment (column g: head g) the same 32 dims.
//     (Until session 29 q was the A operand, S = Q·K^T, with A's rows 8-15 zero: 24 mma per
//     chunk and 16 zeroing moves; NOTES.md.)
//   Then lane (g, t) holds the scores of tokens pi(g), pi(g) + 2 for heads 2t, 2t + 1: two 8 x 8
//   blocks of P (rows: tokens, columns: heads) which, transposed across the warp (movmatrix),
//   are exactly the B fragment of O^T[128 dims, 8 heads] = V^T[dims, 16 tokens] · P^T[16 tokens,
//   heads] when the token order of that product's k is 4t, 4t + 1 | 4t + 2, 4t + 3. Its A
//   fragment is V^T: lane (g, t) loads V rows 4t .. 4t + 3 at 16 dims (vdim below) and
//   interleaves row pairs (prmt).
// The online softmax runs per q head on the S^T fragment (the 8 lanes of a t hold heads 2t and
// 2t + 1); O^T's fragment holds the same two heads, so their rescale factors are the lane's own.
// A 16-bit cache multiplies in its dtype (P rounded to it, as the prefill kernels do); an fp8
// cache converts e4m3 pairs to f16x2 exactly (one cvt per pair) and multiplies in fp16 (q
// converted to fp16, P in fp16).
//
// Each of the kWarps warps walks every kWarps-th 16-token chunk of the block's partition, the
// next chunk's K/V loads in flight (registers) while it computes the current one; the slot ids
// come one chunk further ahead (lane L < 16 looks up token L of a chunk, shuffles distribute).
// The register forms issue their first chunk before pdl_wait (V2Args::early); this step's token
// is then masked from the regular loads and re-read from L2 once written. With
// PagedAttentionParams::qkv_post the blocks do qkv_post's work first (decode_attention_tc_qkv.cuh).
// The ring forms (kRing > 0) stage chunks in shared memory instead, by cp.async or by bulk row
// copies read back as the register pieces or, over a 16-bit cache, as ldmatrix fragments
// (decode_attention_tc_stages.cuh; RowsLayout's natural dim order).
// Layouts per cache element type: decode_attention_tc_layout.cuh; a chunk's arithmetic:
// decode_attention_tc_accumulate.cuh; shared memory and blocks per SM:
// decode_attention_tc_smem.cuh.
#pragma once

#include <type_traits>

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/decode_attention_tc_accumulate.cuh"
#include "backend/cuda/decode_attention_tc_layout.cuh"
#include "backend/cuda/decode_attention_tc_qkv.cuh"
#include "backend/cuda/decode_attention_tc_result.cuh"
#include "backend/cuda/decode_attention_tc_smem.cuh"
#include "backend/cuda/decode_attention_tc_stages.cuh"
#include "backend/cuda/decode_tc_ring.h"
#include "backend/cuda/kernel_trace.cuh"
#include "backend/cuda/mma_16816.cuh"

namespace folio::cuda::detail {
namespace {

// grid (num_kv_heads * num_chunks, num_seqs, max_partitions), kThreads threads; num_chunks =
// ceil(group / 8). head_dim 128.
// kRing 0: the register form; > 0: the ring form with kRing stages (tc::ring_smem_bytes of
// dynamic shared memory), filled per kFill (decode_tc_ring.h: kTcFillCpAsync, kTcFillBulkRows,
// kTcFillBulkFrags: a 16-bit cache only).
template <typename T, typename C, int kRing, int kFill>
__global__ void __launch_bounds__(kThreads, tc::blocks_per_sm<T, C, kRing, kFill>())
    decode_tc_kernel(V2Args<T> a) {
  using namespace tc;
  constexpr bool kFrags = kRing > 0 && kFill == kTcFillBulkFrags;
  static_assert(!kFrags || sizeof(C) == 2, "fragments by ldmatrix need a 16-bit cache");
  using L = std::conditional_t<kFrags, RowsLayout<T>, Cache<T, C>>;
  using Mma = typename L::Mma;
  // Measuring builds (kernel_trace.cuh), words per block: 0 entry, 1 SM, 2-5 each warp's loop
  // end, 6 warp 0's first chunk done, 7 end, 8 warp 0's first slot known, 9 warp 0's q ready,
  // 10 the partials' barrier passed (register forms over a 16-bit cache: 6, 8 and 9).
  FOLIO_TRACE(if (threadIdx.x == 0) {
    ktrace::stamp(0, ktrace::now());
    ktrace::stamp(1, ktrace::smid());
  })
  // The register form starts before pdl_wait (below); the ring form waits first.
  if (kRing > 0 || !a.early) {
    pdl_wait();  // pdl.cuh: inputs come from the previous kernel
    pdl_launch_dependents();
  }
  extern __shared__ __align__(16) uint4 tc_dyn_smem[];
  float* smem;
  if constexpr (kRing == 0) {
    __shared__ __align__(16) float partials[kSmemBytes / 4];
    smem = partials;
  } else {
    smem = reinterpret_cast<float*>(tc_dyn_smem);
  }
  float* red = smem;
  float* wm = red + kWarps * kHeads * kD;
  float* wl = wm + kWarps * kHeads;

  // The step's metadata (context lengths, block tables) and the cache's older tokens come from
  // the host's upload and from earlier steps, never from the kernels this one may overlap under
  // programmatic launch: the register form reads them, and issues its first chunk's K/V loads,
  // before pdl_wait. Only q and this step's own token (position ctx - 1, written by qkv_post or,
  // fused, by this kernel) must follow it.
  const bool fused = a.qkv_post.qkv != nullptr;  // decode_attention_tc_qkv.cuh
  DecodeBlockSpan sp;
  if (!decode_block_span(a, kHeads, sp)) return;  // no work: nothing read or written after
  const int kvh = sp.kvh, s = sp.s, part = sp.part, nparts = sp.nparts, start = sp.start, n = sp.n;
  const int gcount = sp.gcount, h0 = sp.h0, row = sp.row;
  const int32_t* table = sp.table;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  const C* k_cache = reinterpret_cast<const C*>(a.k_cache);  // offsets below count elements
  const C* v_cache = reinterpret_cast<const C*>(a.v_cache);
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * kD;
  const int64_t head_off = static_cast<int64_t>(kvh) * kD;
  const int nch = (n + kChunk - 1) / kChunk;
  const int pg = 4 * (g / 2) + g % 2;  // pi(g)

  auto slot_at = [&](int pos) {
    const int page = pos / a.block_size;
    return table[page] * a.block_size + (pos - page * a.block_size);
  };
  // This step's token (local index `fresh`, in the last partition; -1 elsewhere or when neither
  // the early reads nor the fusion are on): never read with the other tokens of its chunk but
  // afterwards, from L2 (refetch below), once it is written.
  const int fresh = (a.early || fused) && start + n == a.context_lens[s] ? n - 1 : -1;
  // The fragment form copies `fresh` with the rest (after_wait wrote it, or the previous kernel
  // did before pdl_wait) rather than patching a fragment: nothing is skipped or refetched.
  const int skipped = kFrags ? -1 : fresh;
  const int fresh_chunk = skipped >= 0 ? skipped / kChunk : -1, fresh_row = fresh % kChunk;
  const int fresh_slot = fresh >= 0 ? slot_at(start + fresh) : -1;
  // Lane L < 16: the slot of token L of chunk c, -1 past the partition's end (and for `fresh`).
  // Lane L >= 16, with c_ahead >= 0: the slot of token L - 16 of chunk c_ahead, the chunk the
  // register forms prefetch into L2 a step later (V2Args::l2_ahead); else -1.
  auto slot_of = [&](int c, int c_ahead = -1) {
    const int tok = lane < kChunk ? c * kChunk + lane : c_ahead * kChunk + (lane - kChunk);
    if (tok < 0 || tok >= n || tok == skipped) return -1;
    return slot_at(start + tok);
  };
  // Lanes >= 16: their token's K and V rows into L2 (slot from slot_of's c_ahead; the token of
  // this step, which may not be written yet, is never among them). L2 is where the writes land,
  // so an early prefetch cannot return stale data later.
  auto prefetch_ahead = [&](int slot_lane) {
    if (lane < kChunk || slot_lane < 0) return;
    constexpr uint32_t kRowBytes = kD * sizeof(C);
    l2_prefetch(k_cache + slot_lane * slot_stride + head_off, kRowBytes, a.l2_lines);
    l2_prefetch(v_cache + slot_lane * slot_stride + head_off, kRowBytes, a.l2_lines);
  };
  // Warp steps; 0: no prefetch. Only partitions of at least kL2MinTokens prefetch: a shorter one
  // is over before the stream settles (b1 x 8192's 256-token partitions lost 5-7%, NOTES.md).
  constexpr int kL2MinTokens = 1024;
  const int ahead = n >= kL2MinTokens ? a.l2_ahead : 0;
  auto issue = [&](ChunkRegs<T, C>& r, int slot_lane) {
    issue_chunk(r, k_cache, v_cache, slot_stride, head_off, slot_lane, pg, g, t);
  };

  // Q's B fragments (column g: head g), the summed dims permuted as K's.
  uint32_t qb0[8], qb1[8];
  __shared__ float rope_cs[kD];  // fused: cos, sin of the token's position (tc::rope_table)
  auto load_q_fused = [&] {      // dims kdim(j, t) < 64 for j < 4, their partners at j + 4
    const T* src = tc::qkv_row(a, row);
    const int head = h0 + min(g, gcount - 1);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float lo[4], hi[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // b0's dims kdim, + 1; b1's kdim_hi, + 1
        const int d = (e < 2 ? L::kdim(j, t) : L::kdim_hi(j, t)) + e % 2;
        tc::roped_q_pair(a, src, head, d, rope_cs, lo[e], hi[e]);
        if (g >= gcount) lo[e] = hi[e] = 0.f;
      }
      qb0[j] = pack2<Mma>(lo[0], lo[1]);
      qb1[j] = pack2<Mma>(lo[2], lo[3]);
      qb0[j + 4] = pack2<Mma>(hi[0], hi[1]);
      qb1[j + 4] = pack2<Mma>(hi[2], hi[3]);
    }
  };
  auto load_q = [&] {
    if (fused) return load_q_fused();
    const T* q = a.q + (static_cast<int64_t>(row) * a.num_heads + h0 + min(g, gcount - 1)) * kD;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float f[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // b0's dims kdim, + 1; b1's kdim_hi, + 1
        const int d = (e < 2 ? L::kdim(j, t) : L::kdim_hi(j, t)) + e % 2;
        f[e] = g < gcount ? to_float(q[d]) : 0.f;
      }
      qb0[j] = pack2<Mma>(f[0], f[1]);
      qb1[j] = pack2<Mma>(f[2], f[3]);
    }
  };

  // Heads 2t and 2t + 1: the running softmax and O^T (decode_attention_tc_accumulate.cuh).
  TcAccumulator<L> acc;
  auto compute = [&](const auto& cur, int c) {
    acc.add(cur, qb0, qb1, c * kChunk + pg, n, a.scale_log2);
  };

  // One chunk: the loads of chunk c + kWarps go into `nxt` (past the end: none, zeros) while
  // chunk c, in `cur`, is scored and accumulated.
  int slot_next = slot_of(warp + kWarps, ahead > 0 ? warp + ahead * kWarps : -1);
  // The lanes that hold `fresh`'s K/V pieces in r (its chunk's registers) read them from L2
  // (ld.global.cg: the token's lines were never loaded here through L1, and .cg would not return
  // a stale copy if they had been), once it is written.
  auto refetch = [&](ChunkRegs<T, C>& r) {
    auto cg = [&](const C* base, int elem) {
      return __ldcg(
          reinterpret_cast<const uint4*>(base + fresh_slot * slot_stride + head_off + elem));
    };
#pragma unroll
    for (int x = 0; x < 2; ++x)
      if (pg + 2 * x == fresh_row)
#pragma unroll
        for (int q = 0; q < L::kKLoads; ++q) r.k[x][q] = cg(k_cache, L::k_load_elem(q, t));
#pragma unroll
    for (int x = 0; x < 4; ++x)
      if (4 * t + x == fresh_row)
#pragma unroll
        for (int c = 0; c < L::kVLoads; ++c) r.v[x][c] = cg(v_cache, L::v_load_elem(c, g));
  };
  // At step c, slot_next holds chunk c + kWarps (lanes < 16, loaded into registers now) and,
  // with `ahead`, chunk c + ahead kWarps (lanes >= 16, prefetched into L2 now).
  auto step = [&](const ChunkRegs<T, C>& cur, ChunkRegs<T, C>& nxt, int c) {
    issue(nxt, slot_next);
    if (c + kWarps == fresh_chunk) refetch(nxt);  // warp-uniform
    if (ahead > 0) prefetch_ahead(slot_next);
    slot_next = slot_of(c + 2 * kWarps, ahead > 0 ? c + (ahead + 1) * kWarps : -1);
    compute(cur, c);
  };
  // Once the previous kernels are done: fused, the last partition's block writes the new K/V
  // (then syncs, so that its warps may read them) and every block ropes its q; else q is read.
  const int64_t fresh_new_slot = fused && fresh >= 0 ? a.qkv_post.slot_mapping[row] : -1;
  if (fused) {  // block-uniform; the host's upload only: before pdl_wait in the register forms
    tc::rope_table(a, row, rope_cs);
    __syncthreads();
  }
  auto after_wait = [&] {
    if (fused && fresh >= 0) {  // block-uniform
      tc::write_new_kv<T, C>(a, row, kvh, rope_cs, fresh_new_slot);
      if constexpr (kFrags) fence_proxy_async_global();  // before the bulk copies read it
      __syncthreads();
    }
    load_q();
  };
  // The register forms: the warp's first chunk is loaded before pdl_wait (`fresh` aside).
  auto first_chunk_then_wait = [&](ChunkRegs<T, C>& r) {
    const int first_slot = slot_of(warp);
    FOLIO_TRACE(if (warp == 0) ktrace::stamp(8, ktrace::after(first_slot));)
    issue(r, first_slot);
    pdl_wait();  // pdl.cuh: q and this step's K/V come from the previous kernels
    pdl_launch_dependents();
    after_wait();
    FOLIO_TRACE(if (warp == 0) ktrace::stamp(9, ktrace::after(static_cast<int>(qb0[0])));)
    if (warp == fresh_chunk) refetch(r);
  };
  // Measured on the H100 (NOTES.md): a 16-bit cache gains from the two buffers taking turns
  // (no register copies; 240 registers, 2 blocks per SM); an fp8 cache from 3 blocks per SM,
  // which only the copying loop fits (166 registers: 3 x 128 x 166 <= 65536).
  if constexpr (kRing > 0 && kFill != kTcFillCpAsync) {
    constexpr int kStage = bulk_stage_bytes<C, kFill>();
    using Chunk = std::conditional_t<kFrags, ChunkFrags, ChunkRegs<T, C>>;
    uint8_t* stages = reinterpret_cast<uint8_t*>(tc_dyn_smem) + warp * kRing * kStage;
    uint64_t* bars = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(tc_dyn_smem) +
                                                 kWarps * kRing * kStage) +
                     warp * kRing;
    if (lane == 0) {
      for (int d = 0; d < kRing; ++d) mbarrier_init(bars + d, 1);
      fence_mbarrier_init();
    }
    __syncwarp();
    auto bulk_issue = [&](int stage, int slot_lane) {
      issue_chunk_rows<C, kFrags>(stages + stage * kStage, bars + stage, k_cache, v_cache,
                                  slot_stride, head_off, slot_lane, lane);
    };
    // Rows past the end were not copied: whatever they hold (older rows, or anything before the
    // first fill) would meet P's zeros in P·V, so their V parts become zeros (a NaN times 0 is
    // NaN); their scores are masked.
    auto bulk_read = [&](int stage, int c, Chunk& r) {
      if constexpr (kFrags)
        read_chunk_frags(r, stages + stage * kStage, lane);
      else
        read_chunk_rows(r, stages + stage * kStage, pg, g, t);
      if ((c + 1) * kChunk > n) zero_v_past_end(r, c * kChunk + 4 * t, n);  // warp-uniform
    };
    after_wait();
    // Every stage in flight before the loop. Iteration i takes chunk i (of this warp: the
    // (i / kRing)-th fill of stage i % kRing, awaited with that parity) into registers, refills
    // its stage with chunk i + kRing at once, then computes: kRing chunks stay in flight through
    // the arithmetic, as in the read probe (the cp.async ring below keeps kRing - 1).
#pragma unroll
    for (int i = 0; i < kRing; ++i) bulk_issue(i, slot_of(warp + i * kWarps));
    int slot_ahead = slot_of(warp + kRing * kWarps);
#pragma unroll 1
    for (int c = warp, i = 0; c < nch; c += kWarps, ++i) {  // warp-uniform
      const int stage = i % kRing;
      mbarrier_wait_parity(bars + stage, (i / kRing) & 1);
      Chunk cur;
      bulk_read(stage, c, cur);
      __syncwarp();  // every lane has read the stage before it is refilled
      bulk_issue(stage, slot_ahead);
      slot_ahead = slot_of(c + (kRing + 1) * kWarps);
      if constexpr (!kFrags)
        if (c == fresh_chunk) refetch(cur);  // warp-uniform
      compute(cur, c);
    }
    __syncthreads();  // every copy has landed (those past the end copy nothing): the partials
  } else if constexpr (kRing > 0) {
    constexpr int kPer = kLoadsPerLane<T, C>;
    uint4* ring = tc_dyn_smem + warp * (kRing * kPer * 32) + lane;  // [stage][load][lane]
    auto ring_issue = [&](int stage, int slot_lane) {
      issue_chunk_async<T, C>(ring + stage * kPer * 32, k_cache, v_cache, slot_stride, head_off,
                              slot_lane, pg, g, t);
      cp_async_commit();
    };
    auto ring_read = [&](int stage, ChunkRegs<T, C>& r) {
      read_chunk_async(r, ring + stage * kPer * 32);
    };
    after_wait();
    // Chunks warp + i kWarps, i < kRing - 1, in flight before the loop; iteration i issues
    // chunk i + kRing - 1 into the stage iteration i - 1 read (past the end: zeros, no reads).
#pragma unroll
    for (int i = 0; i < kRing - 1; ++i) ring_issue(i, slot_of(warp + i * kWarps));
    int slot_ahead = slot_of(warp + (kRing - 1) * kWarps);
#pragma unroll 1
    for (int c = warp, i = 0; c < nch; c += kWarps, ++i) {  // warp-uniform
      ring_issue((i + kRing - 1) % kRing, slot_ahead);
      slot_ahead = slot_of(c + kRing * kWarps);
      cp_async_wait<kRing - 1>();  // chunk c has landed
      ChunkRegs<T, C> cur;
      ring_read(i % kRing, cur);
      if (c == fresh_chunk) refetch(cur);  // warp-uniform
      compute(cur, c);
    }
    cp_async_wait<0>();  // the zero fills past the end, before the partials reuse the ring
    __syncthreads();
  } else if constexpr (sizeof(C) == 1) {
    ChunkRegs<T, C> cur;
    first_chunk_then_wait(cur);
#pragma unroll 1
    for (int c = warp; c < nch; c += kWarps) {  // warp-uniform
      ChunkRegs<T, C> nxt;
      step(cur, nxt, c);
      cur = nxt;
    }
  } else {
    ChunkRegs<T, C> ra, rb;
    first_chunk_then_wait(ra);
#pragma unroll 1
    for (int c = warp; c < nch; c += 2 * kWarps) {  // warp-uniform
      step(ra, rb, c);
      FOLIO_TRACE(if (c == 0) ktrace::stamp(6, ktrace::after(acc.o[0][0] + acc.o[7][3]));)
      if (c + kWarps >= nch) break;
      step(rb, ra, c + kWarps);
    }
    FOLIO_TRACE(ktrace::stamp(2 + warp, ktrace::after(acc.o[0][0] + acc.o[7][3]));)
  }

#pragma unroll
  for (int off = 4; off < 32; off *= 2) {
    acc.l_a += __shfl_xor_sync(0xffffffffu, acc.l_a, off);
    acc.l_b += __shfl_xor_sync(0xffffffffu, acc.l_b, off);
  }
  if (g == 0) {
    wm[warp * kHeads + 2 * t] = acc.m_a;
    wm[warp * kHeads + 2 * t + 1] = acc.m_b;
    wl[warp * kHeads + 2 * t] = acc.l_a;
    wl[warp * kHeads + 2 * t + 1] = acc.l_b;
  }
  // O's fragments as they stand: [warp][m-tile i][lane] float4, conflict-free. The per-dim layout
  // [warp][head][dim] took 8-way bank conflicts on these stores: from the last warp's loop end
  // to the block's end took 1.28 us, now 0.80-0.86 (H100, NOTES.md "K1, session 21").
  float4* red4 = reinterpret_cast<float4*>(red);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    red4[(warp * 8 + i) * 32 + lane] =
        make_float4(acc.o[i][0], acc.o[i][1], acc.o[i][2], acc.o[i][3]);
  __syncthreads();
  FOLIO_TRACE(if (threadIdx.x == 0) ktrace::stamp(10, ktrace::now());)
  tc::store_result<T, L>(a, red4, wm, wl, gcount, h0, row, s, part, nparts);
  FOLIO_TRACE(if (threadIdx.x == 0) ktrace::stamp(7, ktrace::now());)
}

}  // namespace
}  // namespace folio::cuda::detail
