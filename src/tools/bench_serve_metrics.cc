#include "tools/bench_serve_metrics.h"

#include "tools/bench_stats.h"

namespace folio::tools {

double request_tpot(const RequestRecord& r) {
  if (r.output_tokens < 2) return -1.0;
  return (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

nlohmann::json serve_metrics_json(const std::vector<RequestRecord>& records, double duration_s) {
  std::vector<double> ttft, tpot, itl, e2el;
  int completed = 0, failed = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& r : records) {
    if (!r.success) {
      ++failed;
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ++completed;
    input_tokens += r.prompt_len;
    output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.e2e_s);
    if (double t = request_tpot(r); t >= 0) tpot.push_back(t);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  const double d = duration_s > 0 ? duration_s : 0.0;
  auto per_s = [d](double x) { return d > 0 ? x / d : 0.0; };
  nlohmann::json out = {
      {"completed", completed},
      {"failed", failed},
      {"total_input_tokens", input_tokens},
      {"total_output_tokens", output_tokens},
      {"duration", d},
      {"request_throughput", per_s(completed)},
      {"output_throughput", per_s(static_cast<double>(output_tokens))},
      {"total_token_throughput", per_s(static_cast<double>(input_tokens + output_tokens))},
      {"errors", errors}};
  add_summary_json(out, "ttft_ms", summarize(ttft), 1000.0);
  add_summary_json(out, "tpot_ms", summarize(tpot), 1000.0);
  add_summary_json(out, "itl_ms", summarize(itl), 1000.0);
  add_summary_json(out, "e2el_ms", summarize(e2el), 1000.0);
  return out;
}

}  // namespace folio::tools
