// SharedPrefixSimBench: what the scheduler and the prefix cache do with requests that share a
// system prompt (bench/workloads/shared_prefix_*.jsonl, SGLang's generated-shared-prefix load), on
// the host. The scheduler and a paged KV manager with prefix caching run for real; the "model"
// only counts. Reported per run: steps, tokens run against the least the load needs (each group's
// prefix once, every request's own tokens, its decode tokens), prompt tokens answered by the
// prefix cache, and the KV bytes decode attention reads as it reads them now (every row its whole
// context) against reading each shared block once per step (what a shared-prefix, "cascade",
// decode would read). Steps are costed by the roofline of AdmissionSimBench (Llama-3-8B on an
// H200, a model, not a measurement).
//   FOLIO_SCHED_BENCH=1 build/tests/sched/folio_sched_tests --gtest_filter='SharedPrefixSimBench.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "kv/paged_kv_cache_manager.h"
#include "sched/scheduler.h"

namespace folio {
namespace {

struct Item {
  int input_len = 0, output_len = 0, group = -1, prefix_len = 0;
};

std::vector<Item> read_items(const std::string& name) {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/bench/workloads/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<Item> items;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    items.push_back({j.at("input_len").get<int>(), j.at("output_len").get<int>(),
                     j.value("prefix_group", -1), j.value("prefix_len", 0)});
  }
  return items;
}

struct SimResult {
  int64_t steps = 0, run_tokens = 0, least_tokens = 0, hit_tokens = 0, prompt_tokens = 0;
  double decode_bytes = 0, shared_once_bytes = 0, modelled_s = 0;
  bool all_finished = false;
};

constexpr double kKvBytesPerToken = 131072.0;  // Llama-3-8B, 16-bit cache

SimResult simulate(const std::vector<Item>& items, bool prefix_caching, int kv_blocks) {
  PagedKvConfig kc;
  kc.num_blocks = kv_blocks;
  kc.block_size = 16;
  kc.enable_prefix_caching = prefix_caching;
  PagedKvCacheManager kv(kc);
  SchedulerConfig c;
  c.max_num_batched_tokens = 16384;
  c.max_num_seqs = 1024;
  c.max_model_len = 4096;
  Scheduler sched(c, kv);
  SimResult res;
  std::unordered_set<int> groups;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    Request r;
    r.id = static_cast<GroupId>(i + 1);
    for (int k = 0; k < it.input_len; ++k)  // the group's ids first, then the request's own
      r.prompt.push_back(k < it.prefix_len ? 1000000 + it.group * 10000 + k
                                           : static_cast<TokenId>((i * 7919 + k) % 900000));
    r.params.max_tokens = it.output_len;
    r.params.ignore_eos = true;
    EXPECT_TRUE(sched.add_request(std::move(r)).ok());
    res.prompt_tokens += it.input_len;
    // The least run: the prefix once per group, the own tokens, output_len - 1 decode inputs.
    res.least_tokens += it.input_len - it.prefix_len + it.output_len - 1;
    if (it.group >= 0 && groups.insert(it.group).second) res.least_tokens += it.prefix_len;
  }
  for (int guard = 0; guard < 1000000 && sched.has_unfinished(); ++guard) {
    SchedulerOutput out = sched.schedule();
    if (out.empty()) continue;
    StepResult step;
    int64_t tokens = 0;
    double bytes = 0;
    std::unordered_set<int32_t> blocks_read;  // distinct physical blocks the decode rows read
    for (const ScheduledSeq& e : out.seqs) {
      tokens += e.num_tokens();
      if (e.num_tokens() == 1) {
        bytes += double(e.start_pos + 1) * kKvBytesPerToken;
        for (int32_t b : e.block_table) blocks_read.insert(b);
      }
      for (SeqId id : e.sample_seq_ids) step.sampled.push_back({id, 7});
    }
    sched.update_from_output(step);
    ++res.steps;
    res.run_tokens += tokens;
    res.decode_bytes += bytes;
    const double once = double(blocks_read.size()) * 16 * kKvBytesPerToken;
    res.shared_once_bytes += std::min(once, bytes);
    res.modelled_s +=
        std::max(15.0e9 / 4.2e12, double(tokens) * 15e9 / 700e12) + bytes / 4.2e12 + 0.3e-3;
  }
  res.all_finished = !sched.has_unfinished();
  res.hit_tokens = sched.stats().num_prefix_hit_tokens;
  EXPECT_EQ(res.run_tokens, sched.stats().num_scheduled_tokens);
  return res;
}

void print(const char* name, const SimResult& r) {
  std::printf(
      "%-34s steps %5lld  run %8lld tokens (least %8lld, +%5.1f%%)  hits %8lld of %8lld  "
      "decode KV read %6.1f TB, shared blocks once %6.1f TB  modelled %6.2f s\n",
      name, static_cast<long long>(r.steps), static_cast<long long>(r.run_tokens),
      static_cast<long long>(r.least_tokens),
      100.0 * (double(r.run_tokens) / double(r.least_tokens) - 1.0),
      static_cast<long long>(r.hit_tokens), static_cast<long long>(r.prompt_tokens),
      r.decode_bytes / 1e12, r.shared_once_bytes / 1e12, r.modelled_s);
}

// The H200's pool at 0.9 of its memory (55,324 blocks) and the H100's (29,418).
TEST(SharedPrefixSimBench, SharedSystemPrompts) {
  if (!std::getenv("FOLIO_SCHED_BENCH")) GTEST_SKIP() << "set FOLIO_SCHED_BENCH=1 to run it";
  for (const char* load : {"shared_prefix_64x16.jsonl", "shared_prefix_1x1024.jsonl"}) {
    const auto items = read_items(load);
    for (int blocks : {55324, 29418}) {
      for (bool caching : {true, false}) {
        const SimResult r = simulate(items, caching, blocks);
        EXPECT_TRUE(r.all_finished);
        char name[96];
        std::snprintf(name, sizeof name, "%s %d %s", load, blocks, caching ? "cache" : "no-cache");
        print(name, r);
      }
    }
  }
}

}  // namespace
}  // namespace folio
