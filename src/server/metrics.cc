#include "server/metrics.h"

#include <charconv>
#include <cmath>

namespace folio {

void LabeledCounter::add(const std::string& label_value, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[label_value] += v;
}

std::map<std::string, double> LabeledCounter::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::cumulative_counts() const {
  std::vector<uint64_t> out(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PrometheusWriter::family(std::string_view name, std::string_view help,
                              std::string_view type) {
  out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusWriter::sample(std::string_view name, std::string_view labels, double value) {
  out_.append(name);
  if (!labels.empty()) out_.append("{").append(labels).append("}");
  out_.append(" ").append(format_metric_value(value)).append("\n");
}

void PrometheusWriter::histogram(std::string_view name, std::string_view help,
                                 std::string_view labels, const Histogram& h) {
  family(name, help, "histogram");
  const std::string base(name);
  const std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
  auto counts = h.cumulative_counts();
  const auto& bounds = h.upper_bounds();
  for (size_t i = 0; i < counts.size(); ++i) {
    std::string le = i < bounds.size() ? format_metric_value(bounds[i]) : "+Inf";
    sample(base + "_bucket", prefix + "le=\"" + le + "\"", static_cast<double>(counts[i]));
  }
  // Sum and count come from the same atomics the buckets do; a concurrent observe may make
  // them disagree by one sample, which Prometheus tolerates.
  sample(base + "_sum", labels, h.sum());
  sample(base + "_count", labels, static_cast<double>(counts.back()));
}

}  // namespace folio
