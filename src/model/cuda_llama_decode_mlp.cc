// Batch-1 alternatives to the MLP's launch chain of CudaLlamaExecutor::Impl::layer (both opt-in,
// both bit-identical to it): decode_mlp's one persistent launch for o_proj .. down, and the
// gate_up -> down SkinnyFlow pair.
#include "backend/cuda/decode_mlp.h"
#include "backend/cuda/skinny_gemm.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {

// FOLIO_DECODE_MLP=1 at batch-1 decode: o_proj .. down of layer l in one decode_mlp launch,
// where its shapes and the skinny routing allow (done = false: the caller launches them).
Status CudaLlamaExecutor::Impl::run_decode_mlp(int l, bool& done) {
  const CudaLayerWeights& w = weights.layers[l];
  cuda::DecodeMlpParams mp;
  mp.dtype = dt;
  mp.hidden = config.hidden_size;
  mp.inter = config.intermediate_size;
  mp.attn_width = config.q_size();
  mp.attn = attn.data();
  mp.w_o = w.o_proj;
  mp.post_norm = w.post_norm;
  mp.eps = static_cast<float>(config.rms_norm_eps);
  mp.w_gate_up = w.gate_up;
  mp.w_down = w.down;
  mp.x = x.data();
  mp.act = act.data();
  mp.sync = mlp_sync.as<unsigned>() + static_cast<size_t>(l) * cuda::kDecodeMlpSyncWords;
  done = cuda::decode_mlp_supported(mp) &&
         gemm->routes_to_skinny(1, mp.hidden, mp.attn_width, mp.attn, mp.w_o, mp.x);
  if (!done) return Status();
  FOLIO_RETURN_IF_ERROR(cuda::decode_mlp(mp, info, stream));
  mark("decode_mlp");
  return Status();
}

// Batch 1 where skinny_flow_enabled chose it: gate_up (+ silu, the problem `up`) then down as a
// SkinnyFlow pair (skinny_gemm.h): down's warps wait per segment of act, not for gate_up's grid.
Status CudaLlamaExecutor::Impl::run_skinny_flow(const cuda::SkinnyProblem& up,
                                                const CudaLayerWeights& w, bool residual) {
  auto* counters = skinny_flow_counters.as<unsigned long long>();
  FOLIO_RETURN_IF_ERROR(cuda::skinny_gemm_silu(dt, up, cuda::SkinnyFlow{counters, true}, stream));
  mark(up.norm_weight ? "norm_gate_up_silu" : "gate_up_silu");
  const int H = config.hidden_size, I = config.intermediate_size;
  const cuda::SkinnyProblem down{act.data(), w.down, x.data(), 1, H, I, residual};
  if (Status st = cuda::skinny_gemm_flow(dt, down, cuda::SkinnyFlow{counters, false}, stream);
      !st.ok()) {
    skinny_flow = false;  // the counters lost their pairing: never use them again
    return st;
  }
  mark("down_gemm");
  return Status();  // the caller all-reduces (TP) and norms
}

}  // namespace folio
