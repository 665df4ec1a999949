#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/embedding.h"

namespace folio::cuda {
namespace {

// One block per token; threads stride over N-element packs of the row.
template <typename T, int N>
__global__ void embedding_kernel(const T* table, const int32_t* ids, T* out, int hidden,
                                 int vocab, int id_offset) {
  const int t = blockIdx.x;
  const int id = ids[t] - id_offset;
  T* dst = out + static_cast<int64_t>(t) * hidden;
  const bool ok = id >= 0 && id < vocab;
  const T* src = table + static_cast<int64_t>(ok ? id : 0) * hidden;
  for (int i = threadIdx.x * N; i < hidden; i += blockDim.x * N) {
    Pack<T, N> p;
    if (ok) {
      p = *reinterpret_cast<const Pack<T, N>*>(src + i);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) p.v[j] = from_float<T>(0.f);
    }
    *reinterpret_cast<Pack<T, N>*>(dst + i) = p;
  }
}

}  // namespace

Status embedding(DType dtype, const void* table, const int32_t* token_ids, void* out,
                 int num_tokens, int hidden, int vocab, void* stream, int id_offset) {
  if (num_tokens == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    const bool vec = pack8_ok(hidden, {table, out});
    const int threads = 256;
    if (vec)
      embedding_kernel<T, 8><<<num_tokens, threads, 0, as_stream(stream)>>>(
          static_cast<const T*>(table), token_ids, static_cast<T*>(out), hidden, vocab, id_offset);
    else
      embedding_kernel<T, 1><<<num_tokens, threads, 0, as_stream(stream)>>>(
          static_cast<const T*>(table), token_ids, static_cast<T*>(out), hidden, vocab, id_offset);
    return launch_status("embedding_kernel");
  });
}

}  // namespace folio::cuda
