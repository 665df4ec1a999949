// FakeEngine: drives a Scheduler + KvCacheManager like the real engine, with a fake
// deterministic "model" whose next token is a function of the KV cache *contents* (prefix
// fingerprints stored in FakeKvMemory). Any scheduling or KV mistake (wrong table, missed copy,
// bad prefix hit, lost swap) changes the generated tokens, so comparing token streams between
// a roomy and a tiny cache tests preemption end to end on the host.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "kv/fake_kv_memory.h"
#include "kv/paged_kv_cache_manager.h"
#include "kv/token_kv_cache_manager.h"
#include "sched/scheduler.h"

namespace folio::testing {

inline std::unique_ptr<KvCacheManager> make_kv(bool token_mode, int num_blocks, int host_blocks,
                                               int block_size = 4, int sliding_window = 0) {
  if (token_mode) {
    TokenKvConfig c;
    c.max_total_tokens = num_blocks * block_size;
    c.num_host_slots = host_blocks * block_size;
    return std::make_unique<TokenKvCacheManager>(c);
  }
  PagedKvConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.num_host_blocks = host_blocks;
  c.sliding_window = sliding_window;
  return std::make_unique<PagedKvCacheManager>(c);
}

// A request of `len` prompt tokens first, first + 1, ... and at most `max_tokens` of output.
inline Request iota_request(GroupId id, int len, int max_tokens, TokenId first) {
  Request r;
  r.id = id;
  r.prompt.resize(static_cast<size_t>(len));
  std::iota(r.prompt.begin(), r.prompt.end(), first);
  r.params.max_tokens = max_tokens;
  return r;
}

class FakeEngine {
 public:
  using StreamKey = std::pair<GroupId, int>;  // (request, sibling index)

  FakeEngine(const SchedulerConfig& config, std::unique_ptr<KvCacheManager> kv)
      : kv_(std::move(kv)),
        // + 1: a window manager's reserved null block is not counted in its total.
        mem_(kv_->num_total_blocks() + 1, kv_->num_free_host_blocks(), kv_->block_size()),
        sched_(config, *kv_) {}

  Scheduler& sched() { return sched_; }
  KvCacheManager& kv() { return *kv_; }
  const std::map<StreamKey, std::vector<TokenId>>& streams() const { return streams_; }
  std::vector<FailedGroup> failed;
  std::vector<GroupId> preempted;
  // Per step: each scheduled sequence's group and its tokens that step, in row order.
  std::vector<std::vector<std::pair<GroupId, int>>> scheduled;
  // Tokens that make the engine stop a sequence (tests the engine-finish path).
  int stop_modulus = 0;
  // > 0: the model attends to the last `window` positions, so only those must read back.
  int window = 0;

  // One schedule -> run -> update round. Returns false when nothing was scheduled.
  bool step() {
    SchedulerOutput out = sched_.schedule();
    failed.insert(failed.end(), out.failed.begin(), out.failed.end());
    preempted.insert(preempted.end(), out.preempted.begin(), out.preempted.end());
    mem_.copy_blocks(out.swap_out, true, false);
    mem_.copy_blocks(out.swap_in, false, true);
    mem_.copy_blocks(out.copies, true, true);
    StepResult result;
    scheduled.emplace_back();
    for (const ScheduledSeq& e : out.seqs)
      scheduled.back().emplace_back(e.group_id, e.num_tokens());
    for (const ScheduledSeq& e : out.seqs) run_seq(e, &result);
    sched_.update_from_output(result);
    return !out.empty();
  }

 private:
  void run_seq(const ScheduledSeq& e, StepResult* result) {
    const SequenceGroup* g = sched_.group(e.group_id);
    ASSERT_NE(g, nullptr);
    const Sequence* s = g->find(e.seq_id);
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(e.start_pos, s->num_computed);
    ASSERT_EQ(std::vector<TokenId>(e.token_ids.begin(), e.token_ids.end()),
              std::vector<TokenId>(s->tokens.begin() + e.start_pos,
                                   s->tokens.begin() + e.start_pos + e.num_tokens()));
    auto fp = prefix_fingerprints(s->tokens);
    const int end = e.start_pos + e.num_tokens();
    // The context computed earlier that this step's first query reads must be intact, then this
    // step's tokens are written.
    ASSERT_EQ(mem_.first_invalid(e.block_table, fp, first_key(e.start_pos), e.start_pos),
              e.start_pos)
        << "seq " << e.seq_id << " reads corrupted KV";
    mem_.write(e.block_table, fp, e.start_pos, end);
    if (!e.samples()) return;
    // The "model": reads the last position's KV back (not the token list).
    ASSERT_EQ(mem_.first_invalid(e.block_table, fp, first_key(end - 1), end), end);
    uint64_t h = fp[static_cast<size_t>(end - 1)];
    for (size_t i = 0; i < e.sample_seq_ids.size(); ++i) {
      SeqId id = e.sample_seq_ids[i];
      if (!index_.count(id)) index_[id] = next_index_[e.group_id]++;  // siblings in order
      TokenId tok = static_cast<TokenId>(((h >> 7) + 7919 * i) % 1000);
      result->sampled.push_back({id, tok});
      streams_[{e.group_id, index_.at(id)}].push_back(tok);
      if (stop_modulus && tok % stop_modulus == 0)
        result->finished.push_back({id, SeqStatus::kFinishedStopped});
    }
  }
  // The first key position `query` attends to.
  int first_key(int query) const { return window > 0 ? std::max(0, query - window + 1) : 0; }

  std::unique_ptr<KvCacheManager> kv_;
  FakeKvMemory mem_;
  Scheduler sched_;
  std::map<SeqId, int> index_;  // seq id -> sibling index
  std::map<GroupId, int> next_index_;
  std::map<StreamKey, std::vector<TokenId>> streams_;
};

}  // namespace folio::testing
