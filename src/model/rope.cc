#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

namespace folio {

namespace {

// Rounds to the nearest bfloat16 (ties to even), returned as double.
double round_to_bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

// YaRN (arxiv 2309.00071), as transformers' _compute_yarn_parameters: dimension i keeps its
// frequency below the band [low, high] (fast rotations extrapolate), is divided by `factor`
// above it (slow rotations interpolate), and blends linearly across it. The band's ends are the
// dimensions that turn beta_fast and beta_slow times over the original context.
std::vector<double> yarn_inv_freq(const RopeConfig& rope, int head_dim, std::vector<double> inv) {
  const double dim = head_dim;
  auto correction_dim = [&](double rotations) {
    return dim *
           std::log(rope.original_max_position_embeddings / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(rope.theta));
  };
  double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  for (size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inv[i] = inv[i] / rope.factor * ramp + inv[i] * (1.0 - ramp);
  }
  return inv;
}

}  // namespace

std::vector<double> rope_inv_freq(const RopeConfig& rope, int head_dim) {
  std::vector<double> inv = exact_rope_inv_freq(rope, head_dim);
  if (rope.inv_freq_precision == "bfloat16")
    for (double& f : inv) f = round_to_bf16(f);
  else if (rope.inv_freq_precision == "float32")
    for (double& f : inv) f = static_cast<float>(f);
  return inv;
}

std::vector<double> exact_rope_inv_freq(const RopeConfig& rope, int head_dim) {
  const int half = head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(rope.theta, (2.0 * i) / head_dim);
  if (rope.type == "linear")
    for (double& f : inv) f /= rope.factor;
  if (rope.type == "yarn") return yarn_inv_freq(rope, head_dim, std::move(inv));
  if (rope.type != "llama3") return inv;
  // Llama 3.1 scaling: long wavelengths are divided by `factor`, short ones kept, and the band
  // between is interpolated smoothly.
  const double old_ctx = rope.original_max_position_embeddings;
  const double low_wavelen = old_ctx / rope.low_freq_factor;
  const double high_wavelen = old_ctx / rope.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f = f / rope.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_ctx / wavelen - rope.low_freq_factor) /
                            (rope.high_freq_factor - rope.low_freq_factor);
      f = (1.0 - smooth) * f / rope.factor + smooth * f;
    }
  }
  return inv;
}

}  // namespace folio
