// Metric primitives (counter, labeled counter, histogram) and the Prometheus text exposition
// format (version 0.0.4). Updates are lock-free atomics (labeled counters take a short lock),
// so any I/O thread may record while another renders.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

class Counter {
 public:
  void add(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// One counter per value of a single label (e.g. finished_reason).
class LabeledCounter {
 public:
  void add(const std::string& label_value, double v = 1.0);
  std::map<std::string, double> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, double> values_;
};

// Fixed upper bounds (ascending, +Inf implied). Samples land in the first bucket >= them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  std::vector<uint64_t> cumulative_counts() const;  // one per bound, then +Inf
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;  // per bucket, the last is +Inf
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

// Builds the text format. Labels are given pre-rendered without braces: `model_name="m"`.
class PrometheusWriter {
 public:
  void family(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, std::string_view labels, double value);
  void histogram(std::string_view name, std::string_view help, std::string_view labels,
                 const Histogram& h);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// Shortest round-trip decimal; "+Inf", "-Inf", "NaN" as Prometheus spells them.
std::string format_metric_value(double v);
// Escapes a label value (backslash, quote, newline).
std::string escape_label_value(std::string_view v);

}  // namespace folio
