// Async scheduling (EngineCore::step_async) against synchronous steps, on an executor whose
// "model" reads its whole context back from its KV cache: each sampled token is a hash of the
// tokens stored in the sequence's slots (through the block table), of the random stream's step
// and key, and of the row's logit ops (penalties, bias, min_tokens masks) as a set. A wrong
// block table, slot, placeholder resolution (tokens or ops), copy, swap or RNG step changes the
// tokens, so the two kinds of step must produce identical outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <tuple>
#include <random>

#include "engine/engine_core.h"
#include "model/model_config.h"

namespace folio {
namespace {

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
    last_tokens_.clear();
    for (const DeviceSample& d : outstanding_.back()) last_tokens_.push_back(d.token_id);
    return Status();
  }
  Status collect_samples(std::vector<DeviceSample>& samples) override {
    if (outstanding_.empty()) return internal_error("collect with nothing launched");
    samples = std::move(outstanding_.front());
    outstanding_.pop_front();
    return Status();
  }
  void copy_blocks(std::span<const BlockCopy> c) override { move(c, slots_, slots_); }
  void swap_out(std::span<const BlockCopy> c) override { move(c, slots_, swap_slots_); }
  void swap_in(std::span<const BlockCopy> c) override { move(c, swap_slots_, slots_); }

  int placeholders_seen() const { return placeholders_seen_; }
  int placeholder_ops_seen() const { return placeholder_ops_seen_; }
  int empty_launches() const { return empty_launches_; }

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
  int placeholders_seen_ = 0, placeholder_ops_seen_ = 0, empty_launches_ = 0;
};

struct Case {
  KvCacheMode mode = KvCacheMode::kPaged;
  int num_blocks = 400;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  int num_requests = 40;
  bool with_sync_only = false;  // a beam search request among them
  int abort_at_step = -1;       // abort request "1" before this step
};

struct Finished {
  std::vector<std::vector<int32_t>> tokens;  // per sequence index
  std::vector<std::string> reasons;
  bool operator==(const Finished&) const = default;
};

struct RunOutcome {
  std::vector<Finished> outputs;
  EngineCounters counters;
  int64_t preemptions = 0;
  int placeholders = 0;
  int placeholder_ops = 0;
  int empty_launches = 0;  // launched steps that sampled nothing (prompt chunks only)
};

std::vector<GenerateRequest> make_requests(const Case& c) {
  std::mt19937 rng(7);
  std::vector<int32_t> shared(40);
  for (auto& t : shared) t = 3 + static_cast<int32_t>(rng() % (kVocab - 3));
  std::vector<GenerateRequest> out;
  for (int i = 0; i < c.num_requests; ++i) {
    GenerateRequest g;
    g.request_id = std::to_string(i);
    // Request 0's prompt takes two steps, the first sampling nothing: a launch without samples.
    const int len = i == 0 ? 100 : 5 + static_cast<int>(rng() % 40);
    if (i % 3 == 0)  // a shared prefix: prefix-cache hits
      g.prompt_token_ids.assign(shared.begin(), shared.begin() + std::min(len, 40));
    for (int k = static_cast<int>(g.prompt_token_ids.size()); k < len; ++k)
      g.prompt_token_ids.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
    g.params.max_tokens = 1 + static_cast<int>(rng() % 30);
    g.params.temperature = i % 2 ? 0.8f : 0.0f;
    if (i % 4 == 1) g.params.seed = 1000 + i;
    if (i % 5 == 2) g.params.stop_token_ids = {static_cast<int32_t>(3 + i % 50)};
    if (i % 6 == 3) g.params.ignore_eos = true;
    if (i % 7 == 4) g.params.logit_bias[kEos] = 3.0f;
    if (i % 4 == 2) g.params.repetition_penalty = 1.3f;
    if (i % 5 == 1) {
      g.params.frequency_penalty = 0.5f;
      g.params.presence_penalty = 0.25f;
    }
    if (i % 9 == 3) g.params.presence_penalty = -0.5f;
    if (i % 8 == 6) g.params.min_tokens = std::min(4, g.params.max_tokens);
    if (i == 5 || i == 11) g.params.n = 2 + i % 3;  // siblings forked at the prompt's end
    if (c.with_sync_only && i == 7) {  // beams: steps synchronous while it lives
      g.params.use_beam_search = true;
      g.params.n = 2;
      g.params.temperature = 0.0f;
    }
    out.push_back(std::move(g));
  }
  return out;
}

RunOutcome run(const Case& c, bool async) {
  EngineConfig config;
  config.kv_mode = c.mode;
  config.block_size = c.mode == KvCacheMode::kToken ? 1 : 4;
  config.sched.max_model_len = 128;
  config.sched.max_num_batched_tokens = 64;  // prompts chunk over steps
  config.sched.max_num_seqs = 12;
  config.sched.preemption_mode = c.preemption;
  config.async_scheduling = async;
  ModelConfig model;
  model.vocab_size = kVocab;
  model.max_position_embeddings = 128;
  model.generation.eos_token_ids = {kEos};
  const int swap = c.preemption == PreemptionMode::kSwap ? c.num_blocks * 2 : 0;
  auto exec = std::make_unique<KvEchoExecutor>(config.block_size, c.num_blocks, swap, true);
  KvEchoExecutor* echo = exec.get();
  auto engine = EngineCore::create(config, model, std::move(exec), nullptr);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  RunOutcome out;
  if (!engine.ok()) return out;
  const auto reqs = make_requests(c);
  out.outputs.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* into = &out.outputs[i];
    Status st = (*engine)->add_request(reqs[i], [into](RequestOutput&& o) {
      for (auto& d : o.deltas) {
        if (into->tokens.size() <= static_cast<size_t>(d.index)) {
          into->tokens.resize(d.index + 1);
          into->reasons.resize(d.index + 1);
        }
        auto& t = into->tokens[d.index];
        t.insert(t.end(), d.token_ids.begin(), d.token_ids.end());
        if (d.finish_reason) into->reasons[d.index] = *d.finish_reason;
      }
    }, /*final_only=*/false);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  for (int guard = 0; (*engine)->has_unfinished() && guard < 100000; ++guard) {
    if (guard == c.abort_at_step) (*engine)->abort("1");
    Status st = (*engine)->step();
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) break;
  }
  EXPECT_FALSE((*engine)->has_unfinished());
  EXPECT_EQ((*engine)->kv().num_used_blocks(), 0) << "blocks leaked";
  EXPECT_TRUE((*engine)->kv().check_invariants().ok());
  out.counters = (*engine)->counters();
  out.preemptions = (*engine)->scheduler().stats().num_preemptions;
  out.placeholders = echo->placeholders_seen();
  out.placeholder_ops = echo->placeholder_ops_seen();
  out.empty_launches = echo->empty_launches();
  return out;
}

void expect_same_outputs(const Case& c) {
  const RunOutcome sync = run(c, false), async = run(c, true);
  EXPECT_EQ(sync.counters.async_steps, 0);
  EXPECT_GT(async.counters.async_steps, 0);
  EXPECT_GT(async.placeholders, 0) << "no decode input came from the step before";
  EXPECT_GT(async.placeholder_ops, 0) << "no penalty named a token in flight";
  if (!c.with_sync_only) {  // there the first steps are synchronous (a beam request lives)
    EXPECT_GT(async.empty_launches, 0) << "no launch without samples";
  }
  ASSERT_EQ(sync.outputs.size(), async.outputs.size());
  int stopped = 0;
  for (size_t i = 0; i < sync.outputs.size(); ++i) {
    EXPECT_EQ(sync.outputs[i], async.outputs[i]) << "request " << i;
    for (const auto& r : sync.outputs[i].reasons) {
      EXPECT_TRUE(r == "stop" || r == "length") << "request " << i << ": '" << r << "'";
      stopped += r == "stop";
    }
  }
  EXPECT_GT(stopped, 0) << "no request stopped early: the late stop is not exercised";
  EXPECT_EQ(sync.counters.generated_tokens, async.counters.generated_tokens);
}

TEST(AsyncScheduling, PagedMatchesSynchronousSteps) { expect_same_outputs({}); }

TEST(AsyncScheduling, TokenModeMatchesSynchronousSteps) {
  Case c;
  c.mode = KvCacheMode::kToken;
  c.num_blocks = 4096;
  expect_same_outputs(c);
}

TEST(AsyncScheduling, RecomputePreemptionMatches) {
  Case c;
  c.num_blocks = 40;  // 160 slots for 12 running sequences of up to ~75 tokens
  const RunOutcome sync = run(c, false);
  EXPECT_GT(sync.preemptions, 0) << "the case must preempt";
  expect_same_outputs(c);
}

TEST(AsyncScheduling, SwapPreemptionMatches) {
  Case c;
  c.num_blocks = 40;
  c.preemption = PreemptionMode::kSwap;
  EXPECT_GT(run(c, true).preemptions, 0);
  expect_same_outputs(c);
}

// An abort between steps, while the request's token is in flight: the others are untouched (in
// this executor a request's tokens do not depend on its batch) and nothing leaks.
TEST(AsyncScheduling, AbortWhileATokenIsInFlight) {
  Case c;
  c.abort_at_step = 6;
  const RunOutcome sync = run(Case{}, false), async = run(c, true);
  ASSERT_EQ(sync.outputs.size(), async.outputs.size());
  for (size_t i = 0; i < sync.outputs.size(); ++i) {
    if (i != 1) {
      EXPECT_EQ(sync.outputs[i], async.outputs[i]) << "request " << i;
      continue;
    }
    ASSERT_EQ(async.outputs[1].reasons.size(), 1u);
    EXPECT_EQ(async.outputs[1].reasons[0], "abort");
    const auto& got = async.outputs[1].tokens[0];
    const auto& full = sync.outputs[1].tokens[0];
    ASSERT_GT(got.size(), 0u) << "abort the request after its first tokens";
    ASSERT_LT(got.size(), full.size()) << "abort the request before its end";
    EXPECT_TRUE(std::equal(got.begin(), got.end(), full.begin()));
  }
}

TEST(AsyncScheduling, SyncOnlyRequestsMakeStepsSynchronousWhileTheyLive) {
  Case c;
  c.with_sync_only = true;
  expect_same_outputs(c);
  const RunOutcome async = run(c, true);
  EXPECT_LT(async.counters.async_steps, async.counters.model_steps);
}

}  // namespace
}  // namespace folio
