// Runs rms_norm.cu, rope.cu and qkv_post.cu (rewritten for the host by scripts/emu-small-ops.sh)
// on the SIMT emulator: qkv_post against the chain it replaces (host split + bias, the emulated
// rms_norm and rope kernels, host cache write) bit for bit, caches compared whole; the chain and
// both rms_norm kernels against a double-precision reference. Exits non-zero on any miss.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"

namespace folio::cuda {
namespace {

int failures = 0;

#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      ++failures;                        \
      std::printf("FAIL: " __VA_ARGS__); \
      std::printf("\n");                 \
    }                                    \
  } while (0)

template <typename T>
float f(T v) {
  return static_cast<float>(v);
}
template <typename T>
T r(float v) {
  return T(v);  // round to nearest even, as __float2bfloat16 / __float2half
}

template <typename T>
std::vector<T> rand_vec(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = r<T>(d(rng));
  return v;
}

template <typename T>
double rel(const std::vector<T>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = f(got[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <typename T>
DType dtype_of() {
  return std::is_same_v<T, __half> ? DType::kFP16 : DType::kBF16;
}

template <typename T>
void rms_norm_case(RmsNormKernel k, bool add, int rows, int dim, std::mt19937& rng) {
  auto x = rand_vec<T>(static_cast<size_t>(rows) * dim, rng, -3, 3);
  auto res = rand_vec<T>(x.size(), rng, -3, 3);
  auto w = rand_vec<T>(dim, rng, 0.5f, 1.5f);
  std::vector<double> ref(x.size()), ref_res(x.size());
  for (int i = 0; i < rows; ++i) {
    double ss = 0;
    for (int j = 0; j < dim; ++j) {
      const size_t e = static_cast<size_t>(i) * dim + j;
      ref_res[e] = add ? f(r<T>(f(res[e]) + f(x[e]))) : f(x[e]);
      ss += ref_res[e] * ref_res[e];
    }
    const double inv = 1 / std::sqrt(ss / dim + 1e-5);
    for (int j = 0; j < dim; ++j) {
      const size_t e = static_cast<size_t>(i) * dim + j;
      ref[e] = ref_res[e] * inv * f(w[j]);
    }
  }
  std::vector<T> y(x.size());
  std::memset(y.data(), 0xFF, y.size() * sizeof(T));
  const Status st = rms_norm_with(k, dtype_of<T>(), add ? res.data() : nullptr, x.data(), w.data(),
                                  y.data(), rows, dim, 1e-5f, nullptr);
  CHECK(st.ok(), "rms_norm launch: %s", st.to_string().c_str());
  const double e = rel(y, ref);
  CHECK(e < 1e-2, "rms_norm kernel %d add %d rows %d dim %d: rel error %g", static_cast<int>(k),
        add, rows, dim, e);
  if (add) CHECK(rel(res, ref_res) < 1e-6, "add_rms_norm residual, dim %d", dim);
}

struct Shape {
  int T, nh, nkv, hd;
};

template <typename T>
void qkv_case(const Shape& s, bool bias, bool norm, int bs, QkvPostForm form, std::mt19937& rng) {
  const int qs = s.nh * s.hd, kvs = s.nkv * s.hd, width = qs + 2 * kvs, half = s.hd / 2;
  const float eps = 1e-6f;
  auto qkv = rand_vec<T>(static_cast<size_t>(s.T) * width, rng, -2, 2);
  auto b = rand_vec<T>(width, rng, -0.5f, 0.5f);
  auto qn = rand_vec<T>(s.hd, rng, 0.5f, 1.5f), kn = rand_vec<T>(s.hd, rng, 0.5f, 1.5f);
  std::vector<int32_t> pos(s.T);
  for (int t = 0; t < s.T; ++t) pos[t] = t == 0 ? 0 : static_cast<int32_t>(rng() % 20000);
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i)
    inv_freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / s.hd) / (i > half / 2 ? 8 : 1));
  const int blocks = (s.T + bs - 1) / bs + 2;
  std::vector<int64_t> perm(blocks), slots(s.T);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int t = 0; t < s.T; ++t)
    slots[t] = (s.T > 1 && t % 3 == 1) ? -1 : perm[t / bs] * bs + t % bs;
  const size_t cache = static_cast<size_t>(blocks) * bs * kvs;

  // The chain: split (+bias, rounded), emulated rms_norm (warp kernel) and rope, cache copy.
  std::vector<T> q(static_cast<size_t>(s.T) * qs), k(static_cast<size_t>(s.T) * kvs), v(k.size());
  std::vector<double> rq(q.size()), rk(k.size()), rv(v.size());  // double reference
  for (int t = 0; t < s.T; ++t)
    for (int i = 0; i < width; ++i) {
      const T x = r<T>(f(qkv[static_cast<size_t>(t) * width + i]) + (bias ? f(b[i]) : 0.f));
      const size_t e =
          i < qs ? static_cast<size_t>(t) * qs + i : static_cast<size_t>(t) * kvs + (i - qs) % kvs;
      (i < qs ? q : i < qs + kvs ? k : v)[e] = x;
      (i < qs ? rq : i < qs + kvs ? rk : rv)[e] = f(x);
    }
  const DType dt = dtype_of<T>();
  if (norm) {
    CHECK(rms_norm(dt, q.data(), qn.data(), q.data(), s.T * s.nh, s.hd, eps, nullptr).ok(), "norm");
    CHECK(rms_norm(dt, k.data(), kn.data(), k.data(), s.T * s.nkv, s.hd, eps, nullptr).ok(),
          "norm");
    for (auto* pr : {&rq, &rk})
      for (size_t row = 0; row < pr->size() / s.hd; ++row) {
        double* x = pr->data() + row * s.hd;
        double ss = 0;
        for (int j = 0; j < s.hd; ++j) ss += x[j] * x[j];
        const double inv = 1 / std::sqrt(ss / s.hd + eps);
        for (int j = 0; j < s.hd; ++j) x[j] *= inv * f((pr == &rq ? qn : kn)[j]);
      }
  }
  CHECK(rope(dt, q.data(), k.data(), pos.data(), inv_freq.data(), s.T, s.nh, s.nkv, s.hd, nullptr)
            .ok(),
        "rope");
  for (auto* pr : {&rq, &rk}) {
    const int heads = pr == &rq ? s.nh : s.nkv;
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < heads; ++h) {
        double* x = pr->data() + (static_cast<size_t>(t) * heads + h) * s.hd;
        for (int i = 0; i < half; ++i) {
          const double a = static_cast<double>(pos[t]) * inv_freq[i], c = std::cos(a),
                       sn = std::sin(a), x0 = x[i], x1 = x[i + half];
          x[i] = x0 * c - x1 * sn;
          x[i + half] = x1 * c + x0 * sn;
        }
      }
  }
  std::vector<T> kc(cache), vc(cache);
  std::memset(kc.data(), 0xFF, cache * sizeof(T));
  std::memset(vc.data(), 0xFF, cache * sizeof(T));
  for (int t = 0; t < s.T; ++t)
    if (slots[t] >= 0) {
      std::copy_n(k.begin() + static_cast<size_t>(t) * kvs, kvs, kc.begin() + slots[t] * kvs);
      std::copy_n(v.begin() + static_cast<size_t>(t) * kvs, kvs, vc.begin() + slots[t] * kvs);
    }

  std::vector<T> fq(q.size()), fkc(cache), fvc(cache);
  std::memset(fq.data(), 0xFF, fq.size() * sizeof(T));
  std::memset(fkc.data(), 0xFF, cache * sizeof(T));
  std::memset(fvc.data(), 0xFF, cache * sizeof(T));
  QkvPostParams p;
  p.dtype = dt;
  p.num_tokens = s.T;
  p.num_heads = s.nh;
  p.num_kv_heads = s.nkv;
  p.head_dim = s.hd;
  p.eps = eps;
  p.qkv = qkv.data();
  p.bias = bias ? b.data() : nullptr;
  p.q_norm = norm ? qn.data() : nullptr;
  p.k_norm = norm ? kn.data() : nullptr;
  p.positions = pos.data();
  p.inv_freq = inv_freq.data();
  p.slot_mapping = slots.data();
  p.q_out = fq.data();
  p.k_cache = fkc.data();
  p.v_cache = fvc.data();
  p.form = norm && form == QkvPostForm::kPairs ? QkvPostForm::kHeads : form;
  const Status st = qkv_post(p, nullptr);
  CHECK(st.ok(), "qkv_post: %s", st.to_string().c_str());
  const bool same = std::memcmp(fq.data(), q.data(), q.size() * sizeof(T)) == 0 &&
                    std::memcmp(fkc.data(), kc.data(), cache * sizeof(T)) == 0 &&
                    std::memcmp(fvc.data(), vc.data(), cache * sizeof(T)) == 0;
  const double eq = rel(q, rq), ek = rel(k, rk), ev = rel(v, rv);
  CHECK(same && eq < 1e-2 && ek < 1e-2 && ev < 1e-2,
        "%s T %d heads %d/%d hd %d bias %d norm %d block %d, form %d: bit-identical "
        "%d, chain vs double q %g k %g v %g",
        dt == DType::kBF16 ? "bf16" : "fp16", s.T, s.nh, s.nkv, s.hd, bias, norm, bs,
        static_cast<int>(p.form), same, eq, ek, ev);
}

template <typename T>
void run_all(std::mt19937& rng) {
  for (RmsNormKernel k : {RmsNormKernel::kWarpPerRow, RmsNormKernel::kBlockPerRow})
    for (int dim : {4096, 16384, 4100, 40000, 128, 36})
      for (int rows : {1, 3}) {
        rms_norm_case<T>(k, false, rows, dim, rng);
        rms_norm_case<T>(k, true, rows, dim, rng);
      }
  int n = 0;
  for (int hd : {16, 64, 80, 128, 256, 36})
    for (int tokens : {1, 3})
      for (Shape h : {Shape{0, 4, 2, 0}, Shape{0, 3, 3, 0}, Shape{0, 7, 1, 0}})
        for (int flags = 0; flags < 4; ++flags, ++n)
          qkv_case<T>({tokens, h.nh, h.nkv, hd}, flags & 1, flags & 2, n % 2 ? 16 : 1,
                      std::array{QkvPostForm::kHeads, QkvPostForm::kPairs, QkvPostForm::kAuto}[n % 3],
                      rng);
}

}  // namespace
}  // namespace folio::cuda

int main() {
  std::mt19937 rng(11);
  folio::cuda::run_all<__nv_bfloat16>(rng);
  folio::cuda::run_all<__half>(rng);
  if (folio::cuda::failures) {
    std::printf("%d failures\n", folio::cuda::failures);
    return 1;
  }
  std::printf("small ops emulation: all passed\n");
  return 0;
}
