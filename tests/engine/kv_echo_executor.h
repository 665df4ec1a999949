// Test helper: an Executor whose "model" reads its whole context back from its own KV cache
// (each token's K/V is its id, in its slot), for engine tests without a model. Each sampled
// token is a hash of the tokens in the sequence's slots (through the block table), of the
// random stream's step and key (sampled rows), and of the row's logit ops as a set per phase;
// host rows (beams) get logits that are a function of the context. It runs synchronous steps
// (execute_sampled) and, when `async`, launched ones (launch_sampled / collect_samples),
// resolving placeholders with the host references, so a wrong block table, slot, copy, swap,
// placeholder or RNG step changes the tokens. It counts what it saw for the tests' checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/executor.h"

namespace folio::testing {

constexpr int kVocab = 97;
constexpr int32_t kEos = 2;

class KvEchoExecutor final : public Executor {
 public:
  KvEchoExecutor(int block_size, int num_blocks, int num_swap_blocks, bool async)
      : async_(async) {
    kv_.num_layers = 1;
    kv_.num_kv_heads = 1;
    kv_.head_dim = 8;
    kv_.block_size = block_size;
    kv_.num_blocks = num_blocks;
    kv_.num_swap_blocks = num_swap_blocks;
    slots_.assign(static_cast<size_t>(num_blocks) * block_size, -1);
    swap_slots_.assign(static_cast<size_t>(num_swap_blocks) * block_size, -1);
  }
  std::string device_name() const override { return "kv-echo"; }
  int vocab_size() const override { return kVocab; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  Status execute(const ForwardBatch&, std::vector<float>&) override {
    return unimplemented("kv-echo: device sampling only");
  }
  bool samples_on_device() const override { return true; }
  Status execute_sampled(const ForwardBatch& b, const DeviceSamplingBatch& s,
                         std::vector<float>& host_logits,
                         std::vector<DeviceSample>& samples) override {
    std::vector<int32_t> ids = b.token_ids;
    if (!resolve_placeholders(ids, {}))
      return internal_error("a synchronous step got a placeholder");
    samples = run(b, ids, s);
    compute_for(b.num_tokens());
    // Host rows (beams): logits that are a function of the row's context hash.
    host_logits.assign(s.host_rows.size() * kVocab, 0.0f);
    for (size_t k = 0; k < s.host_rows.size(); ++k) {
      const uint64_t h = context_hash(b, b.logits_rows[static_cast<size_t>(s.host_rows[k])]);
      for (int v = 0; v < kVocab; ++v)
        host_logits[k * kVocab + v] =
            static_cast<float>((h ^ (uint64_t(v) * 0x9E3779B97F4A7C15ull)) % 1000) / 100.0f;
    }
    return Status();
  }
  bool launches_async() const override { return async_; }
  Status launch_sampled(const ForwardBatch& b, const DeviceSamplingBatch& s) override {
    if (!s.host_rows.empty()) return internal_error("a launched step asked for host rows");
    if (outstanding_.size() >= 2) return internal_error("a third step launched uncollected");
    empty_launches_ += s.rows.empty();
    std::vector<int32_t> ids = b.token_ids;
    placeholders_seen_ += static_cast<int>(std::count_if(ids.begin(), ids.end(),
                                                         [](int32_t id) { return id < 0; }));
    DeviceSamplingBatch resolved = s;
    placeholder_ops_seen_ += static_cast<int>(std::count_if(
        s.ops.begin(), s.ops.end(), [](const LogitOp& op) { return op.token < 0; }));
    if (!resolve_placeholders(ids, last_tokens_) ||
        !resolve_placeholder_ops(resolved, last_tokens_))
      return internal_error("a placeholder names no sample of the step before");
    outstanding_.push_back(run(b, ids, resolved));
    outstanding_tokens_.push_back(b.num_tokens());
    last_tokens_.clear();
    for (const DeviceSample& d : outstanding_.back()) last_tokens_.push_back(d.token_id);
    return Status();
  }
  Status collect_samples(std::vector<DeviceSample>& samples) override {
    if (outstanding_.empty()) return internal_error("collect with nothing launched");
    samples = std::move(outstanding_.front());
    outstanding_.pop_front();
    compute_for(outstanding_tokens_.front());  // the step "finishes" when it is waited for
    outstanding_tokens_.pop_front();
    return Status();
  }
  void copy_blocks(std::span<const BlockCopy> c) override { move(c, slots_, slots_); }
  void swap_out(std::span<const BlockCopy> c) override { move(c, slots_, swap_slots_); }
  void swap_in(std::span<const BlockCopy> c) override { move(c, swap_slots_, slots_); }

  int placeholders_seen() const { return placeholders_seen_; }
  int placeholder_ops_seen() const { return placeholder_ops_seen_; }
  int empty_launches() const { return empty_launches_; }
  // Device time to simulate: a step of T tokens takes T * us microseconds, spent in
  // execute_sampled, or in the collect_samples that waits for a launched step.
  void set_time_per_token_us(int us) { time_per_token_us_ = us; }

 private:
  void move(std::span<const BlockCopy> copies, const std::vector<int32_t>& from,
            std::vector<int32_t>& to) {
    const int bs = kv_.block_size;
    for (const BlockCopy& c : copies)
      for (int i = 0; i < bs; ++i) to[c.dst * bs + i] = from[c.src * bs + i];
  }
  // The context of the sequence holding flattened token `token`, read back from the slots.
  uint64_t context_hash(const ForwardBatch& b, int token) const {
    const int bs = kv_.block_size;
    int seq = 0;
    while (b.query_start[seq + 1] <= token) ++seq;
    uint64_t h = 1469598103934665603ull;
    const int32_t* table = b.block_table.data() + b.block_table_start[seq];
    for (int p = 0; p < b.context_lens[seq]; ++p) {
      const int32_t v = slots_[static_cast<size_t>(table[p / bs]) * bs + p % bs];
      EXPECT_GE(v, 0) << "a context slot was never written";
      h = (h ^ static_cast<uint64_t>(v + 7)) * 1099511628211ull;
    }
    return h;
  }
  // Writes every token's K/V (its id) into its slot, then samples each row from the context.
  std::vector<DeviceSample> run(const ForwardBatch& b, const std::vector<int32_t>& ids,
                                const DeviceSamplingBatch& s) {
    for (size_t t = 0; t < ids.size(); ++t)
      if (b.slot_mapping[t] >= 0) slots_[static_cast<size_t>(b.slot_mapping[t])] = ids[t];
    std::vector<DeviceSample> out(s.rows.size());
    for (size_t j = 0; j < s.rows.size(); ++j) {
      const DeviceSampleRow& r = s.rows[j];
      uint64_t h = context_hash(b, b.logits_rows[static_cast<size_t>(r.logits_row)]);
      if (r.temperature >= 1e-5f)  // sampled rows also depend on the random stream
        h = (h ^ (uint64_t{r.rng_step} << 32 | r.rng_key_lo)) * 1099511628211ull;
      h = (h ^ ops_hash(s, r)) * 1099511628211ull;
      out[j].token_id = static_cast<int32_t>(h % kVocab);
      out[j].logprob = -static_cast<float>(h % 13);
      out[j].rank = 1;
    }
    return out;
  }

  // The row's ops per phase as a set (their order within a phase does not matter on a device).
  static uint64_t ops_hash(const DeviceSamplingBatch& s, const DeviceSampleRow& r) {
    uint64_t h = 0;
    int begin = r.op_begin;
    for (int p = 0; p < 4; ++p) {
      std::vector<std::tuple<int32_t, int, float, float>> phase;
      for (int j = begin; j < r.phase_end[p]; ++j) {
        const LogitOp& op = s.ops[static_cast<size_t>(j)];
        EXPECT_GE(op.token, 0) << "an unresolved placeholder op";
        if (op.kind != LogitOpKind::kNone)
          phase.emplace_back(op.token, static_cast<int>(op.kind), op.a, op.b);
      }
      std::sort(phase.begin(), phase.end());
      for (const auto& [t, k, a, b] : phase) {
        uint32_t ab[2];
        std::memcpy(&ab[0], &a, 4);
        std::memcpy(&ab[1], &b, 4);
        h = (h ^ (uint64_t(uint32_t(t)) << 8 | uint64_t(k) << 4 | uint64_t(p))) * 1099511628211ull;
        h = (h ^ (uint64_t{ab[0]} << 32 | ab[1])) * 1099511628211ull;
      }
      begin = r.phase_end[p];
    }
    return h;
  }

  bool async_;
  KvCacheShape kv_;
  std::vector<int32_t> slots_, swap_slots_;
  std::deque<std::vector<DeviceSample>> outstanding_;
  std::vector<int32_t> last_tokens_;
  void compute_for(int tokens) const {
    if (time_per_token_us_ > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(int64_t{tokens} * time_per_token_us_));
  }

  int placeholders_seen_ = 0, placeholder_ops_seen_ = 0, empty_launches_ = 0;
  int time_per_token_us_ = 0;
  std::deque<int> outstanding_tokens_;
};

}  // namespace folio::testing
