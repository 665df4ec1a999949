// A random paged-attention problem (block tables over shuffled physical blocks, caches and q
// filled with random dtype-rounded values), its CPU reference output, and device copies.
// With kv kFp8E4m3 the device caches hold random finite e4m3 codes and the reference's fp32
// caches hold exactly the values those codes decode to (base/fp8.h).
#pragma once

#include <algorithm>
#include <numeric>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/attention_params.h"
#include "backend/cuda/decode_attention.h"
#include "backend/kv_cache_dtype.h"
#include "cuda_test_util.h"
#include "fp8_test_util.h"

namespace folio::cuda::testing {

struct SeqSpec {
  int context_len;  // tokens in KV after the step
  int q_len;        // new tokens this step (1 for decode)
};

struct AttentionProblem {
  DType dt;
  int num_heads, num_kv_heads, head_dim, block_size;
  KvCacheDtype kv_dtype;
  std::vector<int32_t> query_start{0}, context_lens, block_table_start{0}, block_table;
  std::vector<float> q, k_cache, v_cache, ref;
  std::vector<uint8_t> k_codes, v_codes;  // fp8: the device caches' bytes
  DevTensor dq, dk, dv, dout;             // dk, dv: 16-bit caches only
  DevBytes dk8, dv8;                      // fp8 caches only
  DeviceBuffer d_query_start, d_context_lens, d_bts, d_bt;
  int sliding_window = 0;  // set_sliding_window: the reference and params() take it

  AttentionProblem(DType dtype, int heads, int kv_heads, int hd, int bs,
                   const std::vector<SeqSpec>& seqs, std::mt19937& rng,
                   KvCacheDtype kv = KvCacheDtype::kAuto)
      : dt(dtype),
        num_heads(heads),
        num_kv_heads(kv_heads),
        head_dim(hd),
        block_size(bs),
        kv_dtype(kv) {
    int total_blocks = 0;
    for (const auto& s : seqs) total_blocks += (s.context_len + bs - 1) / bs;
    const int num_blocks = total_blocks + 3;  // a few never-referenced blocks
    std::vector<int32_t> phys(num_blocks);
    std::iota(phys.begin(), phys.end(), 0);
    std::shuffle(phys.begin(), phys.end(), rng);
    int next = 0;
    for (const auto& s : seqs) {
      query_start.push_back(query_start.back() + s.q_len);
      context_lens.push_back(s.context_len);
      for (int b = 0; b < (s.context_len + bs - 1) / bs; ++b) block_table.push_back(phys[next++]);
      block_table_start.push_back(static_cast<int32_t>(block_table.size()));
    }
    const size_t slot_elems = static_cast<size_t>(kv_heads) * hd;
    // Keys with a spread of magnitudes so the softmax is not flat.
    const size_t cache_elems = slot_elems * num_blocks * bs;
    if (fp8()) {
      k_codes = random_e4m3(cache_elems, rng, -2, 2);
      v_codes = random_e4m3(cache_elems, rng, -1, 1);
      k_cache = decode_e4m3(k_codes);
      v_cache = decode_e4m3(v_codes);
    } else {
      k_cache = rounded(dt, random_vec(cache_elems, rng, -2, 2));
      v_cache = rounded(dt, random_vec(k_cache.size(), rng));
    }
    q = rounded(dt, random_vec(static_cast<size_t>(query_start.back()) * heads * hd, rng, -2, 2));
    ref.resize(q.size());
    cpu::paged_attention(cpu_args(), q.data(), k_cache.data(), v_cache.data(), ref.data());
    dq = DevTensor::upload(dt, q);
    upload_caches();
    dout = DevTensor::poisoned(dt, q.size());
    d_query_start = upload_raw(query_start);
    d_context_lens = upload_raw(context_lens);
    d_bts = upload_raw(block_table_start);
    d_bt = upload_raw(block_table);
  }

  bool fp8() const { return kv_dtype == KvCacheDtype::kFp8E4m3; }

  // Every query row attends to the last `w` keys up to its position (0: all); recomputes ref.
  void set_sliding_window(int w) {
    sliding_window = w;
    cpu::paged_attention(cpu_args(), q.data(), k_cache.data(), v_cache.data(), ref.data());
  }
  float scale() const { return 1.f / std::sqrt(static_cast<float>(head_dim)); }

  void upload_caches() {
    if (fp8()) {
      dk8 = DevBytes::upload(k_codes);
      dv8 = DevBytes::upload(v_codes);
    } else {
      dk = DevTensor::upload(dt, k_cache);
      dv = DevTensor::upload(dt, v_cache);
    }
  }

  // Fills the slots past each sequence's end in its last block with NaN, in the host caches and
  // on the device: no key past the end may reach the output, not even as 0 * NaN. (A pool's free
  // slots hold whatever an earlier request left there.)
  void poison_slots_past_end() {
    const size_t slot_elems = static_cast<size_t>(num_kv_heads) * head_dim;
    for (size_t s = 0; s < context_lens.size(); ++s) {
      const int blocks = block_table_start[s + 1] - block_table_start[s];
      for (int j = context_lens[s]; j < blocks * block_size; ++j) {
        const size_t slot =
            static_cast<size_t>(block_table[block_table_start[s] + j / block_size]) * block_size +
            j % block_size;
        std::fill_n(k_cache.begin() + slot * slot_elems, slot_elems, NAN);
        std::fill_n(v_cache.begin() + slot * slot_elems, slot_elems, NAN);
        if (fp8()) {  // 0x7F: the e4m3 NaN
          std::fill_n(k_codes.begin() + slot * slot_elems, slot_elems, uint8_t{0x7F});
          std::fill_n(v_codes.begin() + slot * slot_elems, slot_elems, uint8_t{0x7F});
        }
      }
    }
    upload_caches();
  }

  cpu::PagedAttentionArgs cpu_args() const {
    cpu::PagedAttentionArgs a;
    a.num_seqs = static_cast<int>(context_lens.size());
    a.num_heads = num_heads;
    a.num_kv_heads = num_kv_heads;
    a.head_dim = head_dim;
    a.block_size = block_size;
    a.scale = scale();
    a.query_start = query_start.data();
    a.context_lens = context_lens.data();
    a.block_table_start = block_table_start.data();
    a.block_table = block_table.data();
    a.sliding_window = sliding_window;
    return a;
  }

  PagedAttentionParams params() const {
    PagedAttentionParams p;
    p.dtype = dt;
    p.kv_dtype = kv_dtype;
    p.num_seqs = static_cast<int>(context_lens.size());
    p.num_heads = num_heads;
    p.num_kv_heads = num_kv_heads;
    p.head_dim = head_dim;
    p.block_size = block_size;
    p.scale = scale();
    p.q = dq.data();
    p.k_cache = fp8() ? dk8.data() : dk.data();
    p.v_cache = fp8() ? dv8.data() : dv.data();
    p.out = dout.data();
    p.query_start = d_query_start.as<int32_t>();
    p.context_lens = d_context_lens.as<int32_t>();
    p.block_table_start = d_bts.as<int32_t>();
    p.block_table = d_bt.as<int32_t>();
    p.sliding_window = sliding_window;
    return p;
  }

  double error() const { return rel_error(dout.download(), ref); }
};

inline double attention_tol(DType dt) { return dt == DType::kBF16 ? 1e-2 : 3e-3; }

// A decode kernel's name in test names and traces (kDefault: the planner's choice).
inline const char* decode_kernel_name(DecodeKernel k) {
  return k == DecodeKernel::kV1   ? "v1"
         : k == DecodeKernel::kTc ? "tc"
         : k == DecodeKernel::kV2 ? "v2"
                                  : "planner";
}

}  // namespace folio::cuda::testing
