// Prefill attention v3tmapp: v3tma's TMA-filled 3-stage K/V ring and persistent blocks
// (prefill_attention_v3tma.cu) with FlashAttention-3's ping-pong of the two consumer warpgroups
// (v3pwpp's turns, prefill_attention_v3pp.cuh), in v3tmap's kernel shell (a producer warpgroup
// that hands its registers to the consumers by setmaxnreg).
//
// Why: in v3tma the two warpgroups are not coordinated, and ncu shows the tensor pipe active 45%
// of the time with the consumers waiting on their own wgmma chains and barriers, not on memory.
// Ping-pong orders them: one warpgroup's softmax runs while the other's GEMMs hold the tensor
// cores (diagram in prefill_attention_v3pwpp.cu):
//   tensor cores: [PV0(t-1) S0(t)] [PV1(t-1) S1(t)] [PV0(t) S0(t+1)] [PV1(t) S1(t+1)] ...
// On v3pw's cp.async ring the producer warp starved it (v3pwpp, 123 TFLOP/s at 8 x 1024); on
// v3tma's ring at 288 threads the same consumers ran at 258 / 409 TFLOP/s (8 x 1024 / 1 x 8192)
// against v3tma's 305 / 497 because ptxas serialised their wgmmas for lack of registers (C7512):
// a turn keeps S (64 floats), O (64) and the previous tile's P (32 packed) live across the
// GEMMs. Here, as in v3tmap, the block is 384 threads: launched at 168 registers each, the
// producer warpgroup drops to 24 (setmaxnreg.dec) and the consumers take 240 (128 x 24 +
// 256 x 240 = 64512 of the 65536). Only the producer's first warp issues copies.
//
// Per item, each consumer warpgroup loads its Q rows, then takes n_tiles + 1 turns (turn t:
// P(t-1)·V(t-1) and S(t) issued between bar.sync on its own turn barrier and bar.arrive on the
// other's, then the wait, the releases and the softmax of S(t)), then stores O. Differences from
// v3pwpp, all three needed:
//   - ring positions g0 + t: tile t of an item is fill g0 + t of the block's ring, g0 counting
//     the fills of the block's earlier items (v3tma_ring::for_each_item gives it);
//   - no proxy fence after the full-barrier wait: TMA writes through the async proxy that wgmma
//     reads through;
//   - every tile of the item that a warpgroup skips (above its rows) is released in its turn,
//     since the producer goes on to the next item, but only tiles t < n_tiles: the extra last
//     turn t = n_tiles has no tile, and releasing position g0 + n_tiles there (the next item's
//     tile 0, released again by that item; after the block's last item, a fill that never
//     comes) was the first version's bug: it hung in its first GPU test (session 5). The
//     condition is in v3pp::consume.
//
// Named barriers: 0 the block's one __syncthreads (after the mbarrier init); 1 and 2 the turns
// of warpgroups 0 and 1 (256 threads: 128 sync, 128 arrive); 3 and 4 each warpgroup's Q load
// (128 threads; v3tma and v3tmap use 1 and 2 for it, taken here by the turns, whose counts of
// 256 would not match). Per item both turn barriers see as many syncs as arrives, so each item
// starts with them balanced (why the next item's pre-arrive cannot complete a sync of this one:
// prefill_attention_v3pp.cuh).
//
// Deadlock-free: the producer's fill of ring position g needs g - 3 released by both warpgroups;
// a warpgroup at turn t has the other past turn t - 2, so K(t) (needs t - 3) and V(t - 1) (needs
// t - 4) are filled or about to be; earlier items were fully released before their stores.
//
// Shared memory as v3tma (225 KB + 96 bytes of mbarriers: Q 32 KB, 3 stages of K and V at 32 KB
// each, 1 KB of alignment), 1 block of 12 warps per SM. Runs where v3tma's ring fits (head_dim
// 128, power-of-two block sizes 8..128); the rest as v3. FOLIO_PREFILL_KERNEL=v3tmapp selects it
// (not the default). Measured on the H100 (session 6): correct (the GPU prefill tests; memcheck,
// racecheck, synccheck clean) but no faster: 67.9 / 304.2 / 466.6 TFLOP/s at 64 x 128 / 8 x 1024
// / 1 x 8192 against v3tma's 70.6 / 313.1 / 482.1 in the same run (NOTES.md).
#include "backend/cuda/prefill_attention_kernels.h"
#include "backend/cuda/prefill_attention_v3_launch.cuh"
#include "backend/cuda/prefill_attention_v3pp.cuh"
#include "backend/cuda/prefill_attention_v3tma.cuh"
#include "backend/cuda/prefill_attention_v3tma_launch.cuh"
#include "backend/cuda/prefill_attention_v3tma_wg.cuh"

namespace folio::cuda::prefill_detail {
namespace v3tmapp {
namespace {

using v3k::Args;
using v3pw_ring::Barriers;
using v3pw_ring::Blk;

constexpr int kThreads = v3tma_ring::kWgThreads;  // prefill_attention_v3tma_wg.cuh

// Q loads on named barriers 3 and 4, clear of the turns' 1 and 2 (and of 0, __syncthreads').
constexpr int kQBarrier = v3pp::kTurnBarrier + 2;
static_assert(kQBarrier + 1 < 16, "named barrier ids");

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_v3tmapp_kernel(Args<T> a, const __grid_constant__ v3tma_ring::Maps maps, int num_seqs) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma, TMA and setmaxnreg need sm_90a (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  v3tma_ring::run_with_producer_warpgroup<kQBarrier>(
      a, maps, num_seqs, smem_raw, [](const Blk<T>& b, Barriers& bar, int g) {
        // TMA fills: no proxy fence; the producer moves on to the next item's tiles.
        v3pp::consume</*kFence=*/false>(b, bar, g, /*more_items=*/true);
      });
#endif
}

}  // namespace
}  // namespace v3tmapp

Status launch_v3tmapp(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  if (!v3tma_ring::tma_ring_fits(p)) return launch_v3(p, plan, V3Variant::kPlain, stream);
  return v3k::with_row_tiles(p, plan, [&]<typename T>(const v3k::Args<T>& a) {
    return v3tma_ring::launch_tma_kernel<T>(v3tmapp::prefill_v3tmapp_kernel<T>, a, p, plan,
                                            v3tmapp::kThreads, stream, "prefill_v3tmapp_kernel");
  });
}

}  // namespace folio::cuda::prefill_detail
