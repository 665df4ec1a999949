// TwinRunner: drives two executors (the CUDA one and the CPU reference, or two CUDA ones with
// different switches) with identical batches, block tables and block operations (copy-on-write,
// swap out and in), and returns how far each step's logits differ.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "backend/executor.h"
#include "cuda_test_util.h"

namespace folio::testing {

// Drives two executors with identical batches and block operations.
class TwinRunner {
 public:
  TwinRunner(Executor& a, Executor& b, int block_size, int num_blocks, uint32_t seed)
      : a_(a), b_(b), bs_(block_size), rng_(seed) {
    for (int i = 0; i < num_blocks; ++i) free_.push_back(i);
    std::shuffle(free_.begin(), free_.end(), rng_);  // block tables are not contiguous
  }

  int add(int prompt_len, int vocab) {
    Seq s;
    for (int i = 0; i < prompt_len; ++i) s.tokens.push_back(static_cast<int32_t>(rng_() % vocab));
    seqs_.push_back(std::move(s));
    return static_cast<int>(seqs_.size()) - 1;
  }
  void append_token(int id, int vocab) {
    seqs_[id].tokens.push_back(static_cast<int32_t>(rng_() % vocab));
  }
  int pending(int id) const {
    return static_cast<int>(seqs_[id].tokens.size()) - seqs_[id].computed;
  }
  int computed(int id) const { return seqs_[id].computed; }

  // One step: (sequence, new tokens) pairs; logits for each sequence's last new token, and for
  // every new token of `all_rows_seq`. Returns the relative error between the two executors.
  double step(const std::vector<std::pair<int, int>>& work, int all_rows_seq = -1) {
    ForwardBatch b;
    b.query_start.push_back(0);
    b.block_table_start.push_back(0);
    for (auto [id, n] : work) {
      Seq& s = seqs_[id];
      const int end = s.computed + n;
      while (static_cast<int>(s.blocks.size()) * bs_ < end) s.blocks.push_back(take());
      for (int p = s.computed; p < end; ++p) {
        if (p == end - 1 || id == all_rows_seq) b.logits_rows.push_back(b.num_tokens());
        b.token_ids.push_back(s.tokens[p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(static_cast<int64_t>(s.blocks[p / bs_]) * bs_ + p % bs_);
      }
      s.computed = end;
      b.query_start.push_back(b.num_tokens());
      b.context_lens.push_back(end);
      b.block_table.insert(b.block_table.end(), s.blocks.begin(), s.blocks.end());
      b.block_table_start.push_back(static_cast<int32_t>(b.block_table.size()));
    }
    std::vector<float> la, lb;
    Status sa = a_.execute(b, la), sb = b_.execute(b, lb);
    EXPECT_TRUE(sa.ok()) << sa.to_string();
    EXPECT_TRUE(sb.ok()) << sb.to_string();
    EXPECT_EQ(la.size(), b.logits_rows.size() * static_cast<size_t>(a_.vocab_size()));
    return cuda::testing::rel_error(la, lb);
  }

  // Copy-on-write: the sequence's blocks are copied to fresh ones; the old ones go back to the
  // front of the free list so the next step overwrites them.
  void cow(int id) {
    Seq& s = seqs_[id];
    std::vector<BlockCopy> copies;
    for (int32_t& blk : s.blocks) {  // all fresh blocks first: copy pairs must not chain
      copies.push_back({blk, take()});
      blk = copies.back().dst;
    }
    for (const BlockCopy& c : copies) free_.insert(free_.begin(), c.src);
    a_.copy_blocks(copies);
    b_.copy_blocks(copies);
  }

  // Swap out to host blocks [0, n), free the device blocks, swap back into other blocks.
  void swap_round_trip(int id) {
    Seq& s = seqs_[id];
    std::vector<BlockCopy> out, in;
    for (size_t i = 0; i < s.blocks.size(); ++i)
      out.push_back({s.blocks[i], static_cast<int32_t>(i)});
    a_.swap_out(out);
    b_.swap_out(out);
    std::vector<int32_t> old = s.blocks;
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      s.blocks[i] = take_back();
      in.push_back({static_cast<int32_t>(i), s.blocks[i]});
    }
    for (int32_t blk : old) free_.insert(free_.begin(), blk);
    a_.swap_in(in);
    b_.swap_in(in);
  }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    int computed = 0;
    std::vector<int32_t> blocks;
  };
  int32_t take() {
    const int32_t b = free_.front();
    free_.erase(free_.begin());
    return b;
  }
  int32_t take_back() {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  Executor& a_;
  Executor& b_;
  int bs_;
  std::mt19937 rng_;
  std::vector<int32_t> free_;
  std::vector<Seq> seqs_;
};

}  // namespace folio::testing
