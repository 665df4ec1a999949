// Shared by qkv_post_test.cc and qkv_post_fp8_test.cc: one case's random inputs (host and
// device), the fused op's parameters over them, and the unfused chain of GPU ops qkv_post
// replaces (split + bias, [q/k RMSNorm], rope, reshape_and_cache into a 16-bit or fp8 cache).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/split_qkv.h"
#include "small_ops_test_util.h"

namespace folio::cuda::testing {

struct QkvPostInputs {
  // Inputs of shape s: qkv uniform in [-range, range], bias in [-0.5, 0.5], the q/k norm
  // weights in [0.5, 1.5] (all rounded to dt), positions, inverse frequencies, slots over
  // blocks of block_size (some -1).
  QkvPostInputs(DType dt, const QkvShape& s, int block_size, std::mt19937& rng, float range = 2.f)
      : dt(dt), s(s), qs(s.nh * s.hd), kvs(s.nkv * s.hd) {
    const int width = qs + 2 * kvs;
    qkv = rounded(dt, random_vec(static_cast<size_t>(s.T) * width, rng, -range, range));
    bias = rounded(dt, random_vec(width, rng, -0.5f, 0.5f));
    qn = rounded(dt, random_vec(s.hd, rng, 0.5f, 1.5f));
    kn = rounded(dt, random_vec(s.hd, rng, 0.5f, 1.5f));
    pos = make_positions(s.T, rng);
    inv_freq = make_inv_freq(s.hd);
    slots = make_slots(s.T, block_size, rng, &num_slots);
    d_qkv = DevTensor::upload(dt, qkv);
    d_bias = DevTensor::upload(dt, bias);
    d_qn = DevTensor::upload(dt, qn);
    d_kn = DevTensor::upload(dt, kn);
    d_pos = upload_raw(pos);
    d_freq = upload_raw(inv_freq);
    d_slots = upload_raw(slots);
    cache_elems = static_cast<size_t>(num_slots) * kvs;
  }

  // The fused op's parameters without outputs (q_out, k_cache, v_cache are the caller's).
  QkvPostParams params(bool with_bias, bool with_norm, float eps) const {
    QkvPostParams p;
    p.dtype = dt;
    p.num_tokens = s.T;
    p.num_heads = s.nh;
    p.num_kv_heads = s.nkv;
    p.head_dim = s.hd;
    p.eps = eps;
    p.qkv = d_qkv.data();
    p.bias = with_bias ? d_bias.data() : nullptr;
    p.q_norm = with_norm ? d_qn.data() : nullptr;
    p.k_norm = with_norm ? d_kn.data() : nullptr;
    p.positions = d_pos.as<int32_t>();
    p.inv_freq = d_freq.as<float>();
    p.slot_mapping = d_slots.as<int64_t>();
    return p;
  }

  // The unfused chain, as the executor runs it without qkv_post: q [T, qs] into q_out (16-bit),
  // K/V into the caches kc / vc of kv_dtype.
  Status run_chain(bool with_bias, bool with_norm, float eps, DevTensor& q_out, void* kc,
                   void* vc, KvCacheDtype kv_dtype = KvCacheDtype::kAuto) const {
    auto k = DevTensor::poisoned(dt, static_cast<size_t>(s.T) * kvs);
    auto v = DevTensor::poisoned(dt, static_cast<size_t>(s.T) * kvs);
    const void* b = with_bias ? d_bias.data() : nullptr;
    FOLIO_RETURN_IF_ERROR(
        split_qkv(dt, d_qkv.data(), b, q_out.data(), k.data(), v.data(), s.T, qs, kvs, nullptr));
    if (with_norm) {
      FOLIO_RETURN_IF_ERROR(
          rms_norm(dt, q_out.data(), d_qn.data(), q_out.data(), s.T * s.nh, s.hd, eps, nullptr));
      FOLIO_RETURN_IF_ERROR(
          rms_norm(dt, k.data(), d_kn.data(), k.data(), s.T * s.nkv, s.hd, eps, nullptr));
    }
    FOLIO_RETURN_IF_ERROR(rope(dt, q_out.data(), k.data(), d_pos.as<int32_t>(),
                               d_freq.as<float>(), s.T, s.nh, s.nkv, s.hd, nullptr));
    return reshape_and_cache(dt, k.data(), v.data(), d_slots.as<int64_t>(), s.T, kvs, kc, vc,
                             nullptr, kv_dtype);
  }

  std::string where(bool with_bias, bool with_norm, int block_size) const {
    return "T " + std::to_string(s.T) + " heads " + std::to_string(s.nh) + "/" +
           std::to_string(s.nkv) + " hd " + std::to_string(s.hd) + " bias " +
           std::to_string(with_bias) + " norm " + std::to_string(with_norm) + " block " +
           std::to_string(block_size);
  }

  DType dt;
  QkvShape s;
  int qs, kvs;
  std::vector<float> qkv, bias, qn, kn, inv_freq;
  std::vector<int32_t> pos;
  std::vector<int64_t> slots;
  int64_t num_slots = 0;
  size_t cache_elems = 0;
  DevTensor d_qkv, d_bias, d_qn, d_kn;
  DeviceBuffer d_pos, d_freq, d_slots;
};

}  // namespace folio::cuda::testing
