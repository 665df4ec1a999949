#include "tools/bench_serve.h"

#include <chrono>
#include <deque>
#include <memory>

#include <nlohmann/json.hpp>

#include "tools/bench_arrivals.h"
#include "tools/bench_http_client.h"
#include "tools/bench_prefix_cache.h"
#include "tools/bench_sse.h"

namespace folio::tools {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What one in-flight request has seen of its stream.
struct StreamState {
  SseParser parser;
  std::vector<std::string> events;
  Clock::time_point sent;
  Clock::time_point last_chunk;
  int num_chunks = 0;
  int usage_tokens = -1;
  std::string error;
};

class LoadGenerator {
 public:
  LoadGenerator(const ServeBenchConfig& c, const BaseUrl& url, net::io_context& ioc,
                Endpoints endpoints)
      : c_(c), url_(url), ioc_(ioc), endpoints_(std::move(endpoints)), timer_(ioc) {
    const int n = static_cast<int>(c.workload.size());
    arrivals_ = poisson_arrival_times(n, c.request_rate, c.seed);
    auto prompts = make_random_prompts(c.workload, c.vocab_size, c.seed);
    for (int i = 0; i < n; ++i)
      bodies_.push_back(completion_request_body(prompts[i], c.workload[i], c.model));
    records_.resize(n);
  }

  void start() {
    t0_ = Clock::now();
    last_done_ = t0_;
    schedule_arrival();
  }

  // Marks what never finished (the run limit hit) and hands the records over.
  ServeBenchResult finish() {
    for (size_t i = 0; i < records_.size(); ++i)
      if (!finished_[i]) {
        records_[i].success = false;
        records_[i].error = "did not finish within the run limit of " +
                            std::to_string(c_.max_duration_s) + " s";
      }
    return {std::move(records_), seconds(last_done_ - t0_), std::nullopt};
  }

 private:
  void schedule_arrival() {
    if (next_ >= arrivals_.size()) return;
    timer_.expires_at(t0_ + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(arrivals_[next_])));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      pending_.push_back(next_++);  // this timer was for it
      const double now = seconds(Clock::now() - t0_);
      while (next_ < arrivals_.size() && arrivals_[next_] <= now) pending_.push_back(next_++);
      launch_ready();
      schedule_arrival();
    });
  }

  void launch_ready() {
    while (!pending_.empty() && (c_.max_concurrency <= 0 || in_flight_ < c_.max_concurrency)) {
      const size_t i = pending_.front();
      pending_.pop_front();
      launch(i);
    }
  }

  void launch(size_t i) {
    ++in_flight_;
    auto st = std::make_shared<StreamState>();
    st->sent = Clock::now();
    records_[i].send_time_s = seconds(st->sent - t0_);
    records_[i].prompt_len = c_.workload[i].input_len;
    StreamingRequest post;
    post.target = url_.base_path + c_.endpoint;
    post.host_header = url_.host + ":" + url_.port;
    post.body = bodies_[i];
    if (!c_.api_key.empty()) post.headers.emplace_back("Authorization", "Bearer " + c_.api_key);
    post.timeout = std::chrono::milliseconds(static_cast<int64_t>(c_.request_timeout_s * 1000));
    StreamCallbacks cb;
    cb.on_body = [this, i, st](std::string_view bytes) { return on_body(i, *st, bytes); };
    cb.on_done = [this, i, st](Status s) { on_done(i, *st, std::move(s)); };
    start_streaming_request(ioc_, endpoints_, std::move(post), std::move(cb));
  }

  // False once an output that stops early has its output_len tokens: the client leaves.
  bool on_body(size_t i, StreamState& st, std::string_view bytes) {
    const Clock::time_point ts = Clock::now();  // every event in this piece arrived now
    st.events.clear();
    if (Status s = st.parser.feed(bytes, st.events); !s.ok() && st.error.empty())
      st.error = s.message();
    RequestRecord& r = records_[i];
    for (const std::string& data : st.events) {
      CompletionEvent ev = parse_completion_event(data);
      if (ev.error && st.error.empty()) st.error = *ev.error;
      if (ev.completion_tokens) st.usage_tokens = *ev.completion_tokens;
      if (!ev.has_choice) continue;
      if (st.num_chunks == 0)
        r.ttft_s = seconds(ts - st.sent);
      else
        r.itl_s.push_back(seconds(ts - st.last_chunk));
      st.last_chunk = ts;
      ++st.num_chunks;
    }
    // Tokens so far: the usage on every chunk (asked for), else the chunks (a server without
    // continuous usage: each chunk carries at least one token).
    const WorkloadItem& item = c_.workload[i];
    const int seen = st.usage_tokens >= 0 ? st.usage_tokens : st.num_chunks;
    return !(item.max_tokens > 0 && st.error.empty() && seen >= item.output_len);
  }

  void on_done(size_t i, StreamState& st, Status s) {
    const Clock::time_point now = Clock::now();
    RequestRecord& r = records_[i];
    r.e2e_s = seconds(now - st.sent);
    r.output_tokens = st.usage_tokens >= 0 ? st.usage_tokens : st.num_chunks;
    if (!s.ok()) r.error = s.message();
    else if (!st.error.empty()) r.error = st.error;
    else if (st.num_chunks == 0) r.error = "the stream carried no completion chunk";
    r.success = r.error.empty();
    finished_[i] = true;
    last_done_ = now;
    --in_flight_;
    launch_ready();
  }

  const ServeBenchConfig& c_;
  const BaseUrl url_;
  net::io_context& ioc_;
  Endpoints endpoints_;
  net::steady_timer timer_;
  std::vector<double> arrivals_;
  std::vector<std::string> bodies_;
  std::vector<RequestRecord> records_;
  std::vector<bool> finished_ = std::vector<bool>(c_.workload.size(), false);
  std::deque<size_t> pending_;  // arrived, waiting for a concurrency slot
  size_t next_ = 0;             // next arrival to schedule
  int in_flight_ = 0;
  Clock::time_point t0_, last_done_;
};

}  // namespace

std::string completion_request_body(const std::vector<int32_t>& prompt, const WorkloadItem& item,
                                    const std::string& model) {
  const bool stops_early = item.max_tokens > 0;
  nlohmann::json j = {{"prompt", prompt},
                      {"max_tokens", stops_early ? item.max_tokens : item.output_len},
                      {"ignore_eos", !stops_early},
                      {"temperature", 0.0},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}};
  if (stops_early) j["stream_options"]["continuous_usage_stats"] = true;
  if (!model.empty()) j["model"] = model;
  return j.dump();
}

Result<ServeBenchResult> run_serve_benchmark(const ServeBenchConfig& config) {
  FOLIO_ASSIGN_OR_RETURN(BaseUrl url, parse_base_url(config.base_url));
  if (config.workload.empty()) return invalid_argument("the workload has no requests");
  net::io_context ioc;
  FOLIO_ASSIGN_OR_RETURN(Endpoints endpoints, resolve(ioc, url));
  // The server's prefix-cache counters before and after, outside the timed window; a server
  // without them (or without /metrics) leaves the figures out.
  std::vector<std::pair<std::string, std::string>> headers;
  if (!config.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + config.api_key);
  auto counters = [&]() -> std::optional<PrefixCacheCounters> {
    auto text = fetch_metrics_text(url, endpoints, headers, std::chrono::seconds(10));
    return text.ok() ? parse_prefix_cache_counters(*text) : std::nullopt;
  };
  const std::optional<PrefixCacheCounters> before = counters();
  LoadGenerator gen(config, url, ioc, endpoints);
  gen.start();
  ioc.run_for(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.max_duration_s)));
  ServeBenchResult result = gen.finish();
  if (before) {
    if (const std::optional<PrefixCacheCounters> after = counters())
      result.prefix_cache = PrefixCacheCounters{after->queries - before->queries,
                                                after->hits - before->hits};
  }
  return result;
}

}  // namespace folio::tools
