// Test helper: drives an Executor directly with a trivial block allocator (each sequence gets
// fresh blocks in order), so model tests don't depend on the KV manager or the scheduler.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/executor.h"

namespace folio::testing {

class BatchRunner {
 public:
  explicit BatchRunner(Executor& ex) : ex_(ex), bs_(ex.kv_shape().block_size) {}

  // Adds a sequence; returns its index.
  int add(std::vector<int32_t> tokens) {
    seqs_.push_back({std::move(tokens), 0, {}});
    return static_cast<int>(seqs_.size()) - 1;
  }

  // One step computing all not-yet-computed tokens of the given sequences. Returns logits for
  // every computed token when all_rows, else for each sequence's last token: [rows, vocab].
  std::vector<float> step(const std::vector<int>& ids, bool all_rows = false) {
    ForwardBatch b;
    b.query_start.push_back(0);
    b.block_table_start.push_back(0);
    for (int id : ids) {
      Seq& s = seqs_[id];
      const int n = static_cast<int>(s.tokens.size());
      while (static_cast<int>(s.blocks.size()) * bs_ < n) s.blocks.push_back(next_block_++);
      for (int p = s.computed; p < n; ++p) {
        if (all_rows || p == n - 1) b.logits_rows.push_back(b.num_tokens());
        b.token_ids.push_back(s.tokens[p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(static_cast<int64_t>(s.blocks[p / bs_]) * bs_ + p % bs_);
      }
      s.computed = n;
      b.query_start.push_back(b.num_tokens());
      b.context_lens.push_back(n);
      b.block_table.insert(b.block_table.end(), s.blocks.begin(), s.blocks.end());
      b.block_table_start.push_back(static_cast<int32_t>(b.block_table.size()));
    }
    std::vector<float> logits;
    Status st = ex_.execute(b, logits);
    if (!st.ok()) logits.clear();
    return logits;
  }

  void append(int id, int32_t token) { seqs_[id].tokens.push_back(token); }
  const std::vector<int32_t>& tokens(int id) const { return seqs_[id].tokens; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    int computed;
    std::vector<int32_t> blocks;
  };
  Executor& ex_;
  int bs_;
  int32_t next_block_ = 0;
  std::vector<Seq> seqs_;
};

inline int32_t argmax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace folio::testing
