// Randomized state-machine test of both KV managers against FakeKvMemory: after every
// operation the invariants hold and every resident sequence reads its whole context back with
// the right fingerprints (so prefix hits, copy-on-write and swaps moved the right data). With a
// sliding window (paged mode), blocks below each sequence's window are freed before it grows
// and only the window has to read back: a block freed too early, or reallocated while a table
// still reads it, shows as a wrong fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "kv/fake_kv_memory.h"
#include "kv/paged_kv_cache_manager.h"
#include "kv/token_kv_cache_manager.h"

namespace folio {
namespace {

using testing::FakeKvMemory;
using testing::prefix_fingerprints;

struct SimSeq {
  std::vector<TokenId> tokens;
  bool swapped = false;
};

class KvSim {
 public:
  KvSim(std::unique_ptr<KvCacheManager> m, int num_blocks, int host_blocks, uint32_t seed,
        int window = 0)
      : m_(std::move(m)),
        mem_(num_blocks, host_blocks, m_->block_size()),
        rng_(seed),
        window_(window) {}

  void run(int steps) {
    for (int i = 0; i < steps; ++i) {
      int op = pick(0, 9);
      if (op <= 2 || seqs_.empty()) {
        add();
      } else if (op <= 5) {
        extend(any());
      } else if (op == 6) {
        fork(any());
      } else if (op == 7) {
        free(any());
      } else {
        toggle_swap(any());
      }
      ASSERT_TRUE(m_->check_invariants().ok()) << m_->check_invariants().to_string();
      verify_all();
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (!seqs_.empty()) free(seqs_.begin()->first);
    EXPECT_EQ(m_->num_used_blocks(), 0);
    EXPECT_EQ(m_->num_free_host_blocks(), host_total_);
    EXPECT_TRUE(m_->check_invariants().ok());
    EXPECT_GT(m_->stats().prefix_hit_tokens, 0);
  }
  int host_total_ = 0;

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  SeqId any() {
    auto it = seqs_.begin();
    std::advance(it, pick(0, static_cast<int>(seqs_.size()) - 1));
    return it->first;
  }
  // Writes fingerprints for [from, n) after applying pending copy-on-write copies.
  void compute(SeqId id, int from) {
    auto copies = m_->take_pending_copies();
    mem_.copy_blocks(copies, true, true);
    auto& t = seqs_[id].tokens;
    auto fp = prefix_fingerprints(t);
    mem_.write(m_->block_table(id), fp, from, static_cast<int>(t.size()));
    m_->mark_computed(id, t, static_cast<int>(t.size()));
  }
  void add() {
    SeqId id = next_id_++;
    std::vector<TokenId> t;
    int base = pick(0, 3);  // a few shared system prompts
    for (int i = 0, n = pick(0, 20); i < n; ++i) t.push_back(base * 1000 + i);
    for (int i = 0, n = pick(1, 12); i < n; ++i) t.push_back(pick(0, 3));
    int hit = m_->get_computed_prefix(id, t, base == 3 ? "salt" : "");
    ASSERT_LT(hit, static_cast<int>(t.size()));
    auto fp = prefix_fingerprints(t);
    ASSERT_EQ(mem_.num_valid(m_->block_table(id), fp, hit), hit) << "prefix hit served bad KV";
    m_->free_out_of_window(id, hit);
    if (!m_->append_slots(id, static_cast<int>(t.size()))) {
      m_->free(id);
      return;
    }
    seqs_[id].tokens = t;
    compute(id, hit);
  }
  void extend(SeqId id) {
    SimSeq& s = seqs_[id];
    if (s.swapped) return;
    int from = static_cast<int>(s.tokens.size());
    m_->free_out_of_window(id, from);
    for (int i = 0, n = pick(1, 5); i < n; ++i) s.tokens.push_back(pick(0, 3));
    int need = m_->num_blocks_needed(id, static_cast<int>(s.tokens.size()));
    bool ok = m_->append_slots(id, static_cast<int>(s.tokens.size()));
    ASSERT_EQ(ok, need <= m_->num_free_blocks() || ok);
    if (!ok) {
      s.tokens.resize(static_cast<size_t>(from));
      return;
    }
    compute(id, from);
  }
  void fork(SeqId id) {
    SeqId child = next_id_++;
    m_->fork(id, child);
    seqs_[child] = seqs_[id];
  }
  void free(SeqId id) {
    m_->free(id);
    seqs_.erase(id);
  }
  void toggle_swap(SeqId id) {
    std::vector<SeqId> one{id};
    std::vector<KvCopy> copies;
    SimSeq& s = seqs_[id];
    if (s.swapped) {
      m_->free_out_of_window(id, static_cast<int>(s.tokens.size()));  // on the host
      if (m_->swap_in(one, &copies)) s.swapped = false;
      mem_.copy_blocks(copies, false, true);
    } else {
      if (m_->swap_out(one, &copies)) s.swapped = true;
      mem_.copy_blocks(copies, true, false);
    }
  }
  void verify_all() {
    for (auto& [id, s] : seqs_) {
      if (s.swapped) continue;
      auto fp = prefix_fingerprints(s.tokens);
      int n = static_cast<int>(s.tokens.size());
      // What the next query (position n) reads: all of it, or (n - window, n).
      int begin = window_ > 0 ? std::max(0, n - window_ + 1) : 0;
      ASSERT_EQ(mem_.first_invalid(m_->block_table(id), fp, begin, n), n)
          << "seq " << id << " lost KV";
    }
  }

  std::unique_ptr<KvCacheManager> m_;
  FakeKvMemory mem_;
  std::mt19937 rng_;
  std::map<SeqId, SimSeq> seqs_;
  SeqId next_id_ = 1;
  int window_;
};

TEST(KvRandom, PagedManagerKeepsDataAndInvariants) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    PagedKvConfig c;
    c.num_blocks = 24;
    c.block_size = 4;
    c.num_host_blocks = 16;
    KvSim sim(std::make_unique<PagedKvCacheManager>(c), 24, 16, seed);
    sim.host_total_ = 16;
    sim.run(1500);
    if (HasFatalFailure()) return;
  }
}

TEST(KvRandom, PagedManagerWithAWindowKeepsTheWindowAndInvariants) {
  for (int window : {1, 2, 5, 9}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      PagedKvConfig c;
      c.num_blocks = 24;
      c.block_size = 4;
      c.num_host_blocks = 16;
      c.sliding_window = window;
      KvSim sim(std::make_unique<PagedKvCacheManager>(c), 24, 16, seed, window);
      sim.host_total_ = 16;
      sim.run(1500);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(KvRandom, TokenManagerKeepsDataAndInvariants) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    TokenKvConfig c;
    c.max_total_tokens = 96;
    c.num_host_slots = 64;
    KvSim sim(std::make_unique<TokenKvCacheManager>(c), 96, 64, seed);
    sim.host_total_ = 64;
    sim.run(1500);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace folio
