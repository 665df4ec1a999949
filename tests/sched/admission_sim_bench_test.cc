// AdmissionSimBench: the admission headroom against vLLM's admission (conservativeness 0) on the
// host, for loads the GPU benchmarks cannot send: outputs that stop early (EOS; `folio bench`
// sets ignore_eos, and dummy weights would not stop anyway) and certain outputs of uneven length.
// The scheduler and a paged KV manager run for real (they reproduce the preemption counts measured
// on the GPU: B2AsMeasured); the "model" ends each request at a drawn length, the same in every
// run. Steps are costed by a roofline of Llama-3-8B on an H200 (a model, not a measurement):
//   step = max(15.0 GB of weights / 4.2 TB/s, tokens x 15 GFLOP / 700 TFLOP/s)
//          + decode contexts x 128 KiB / 4.2 TB/s + 0.3 ms of small kernels.
//   FOLIO_SCHED_BENCH=1 build/tests/sched/folio_sched_tests --gtest_filter='AdmissionSimBench.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <vector>

#include "kv/paged_kv_cache_manager.h"
#include "sched/scheduler.h"

namespace folio {
namespace {

struct Load {
  std::vector<int> prompt, output;  // per request: prompt length, tokens until it stops
};

// Prompts 32-512 tokens; outputs geometric with mean `mean_out`, capped at `max_tokens`.
Load draw(int n, double mean_out, int max_tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> prompt(32, 512);
  std::geometric_distribution<int> out(1.0 / mean_out);
  Load l;
  for (int i = 0; i < n; ++i) {
    l.prompt.push_back(prompt(rng));
    l.output.push_back(std::clamp(1 + out(rng), 1, max_tokens));
  }
  return l;
}

struct SimResult {
  int64_t steps = 0, preemptions = 0, computed_tokens = 0, decode_rows = 0;
  double modelled_s = 0;
  double schedule_s = 0;  // host time in Scheduler::schedule(), measured
  bool all_finished = false;
};

// kEos: max_tokens large, the request stops early; kCertain: ignore_eos, max_tokens = its
// length; kCapped: max_tokens = its length without ignore_eos (counted by the ratio, as SGLang
// counts every request).
enum class Mode { kEos, kCertain, kCapped };

SimResult simulate(const Load& load, int max_tokens, Mode mode, double conservativeness,
                   int kv_blocks, int seats = 1024) {
  const bool ignore_eos = mode == Mode::kCertain;
  PagedKvConfig kc;
  kc.num_blocks = kv_blocks;
  kc.block_size = 16;
  PagedKvCacheManager kv(kc);
  SchedulerConfig c;
  c.max_num_batched_tokens = 16384;
  c.max_num_seqs = seats;
  c.max_model_len = 4096;
  c.schedule_conservativeness = conservativeness;
  Scheduler sched(c, kv);
  std::unordered_map<GroupId, int> stop_at;  // request -> output length
  for (size_t i = 0; i < load.prompt.size(); ++i) {
    Request r;
    r.id = static_cast<GroupId>(i + 1);
    for (int k = 0; k < load.prompt[i]; ++k)  // no two prompts share a prefix block
      r.prompt.push_back(static_cast<TokenId>((i * 7919 + static_cast<size_t>(k)) % 100000));
    r.params.max_tokens = mode == Mode::kEos ? max_tokens : load.output[i];
    r.params.ignore_eos = ignore_eos;
    EXPECT_TRUE(sched.add_request(std::move(r)).ok());
    stop_at[static_cast<GroupId>(i + 1)] = load.output[i];
  }
  SimResult res;
  for (int guard = 0; guard < 1000000 && sched.has_unfinished(); ++guard) {
    const auto t0 = std::chrono::steady_clock::now();
    SchedulerOutput out = sched.schedule();
    res.schedule_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (out.empty()) continue;
    StepResult step;
    int64_t tokens = 0, contexts = 0;
    for (const ScheduledSeq& e : out.seqs) {
      tokens += e.num_tokens();
      if (e.num_tokens() == 1) {
        ++res.decode_rows;
        contexts += e.start_pos + 1;
      }
      for (SeqId id : e.sample_seq_ids) {
        step.sampled.push_back({id, 7});
        const SequenceGroup* g = sched.group(e.group_id);
        const int generated = g->find(id)->num_tokens() - g->prompt_len + 1;
        if (mode == Mode::kEos && generated >= stop_at.at(e.group_id))
          step.finished.push_back({id, SeqStatus::kFinishedStopped});
      }
    }
    sched.update_from_output(step);
    ++res.steps;
    res.computed_tokens += tokens;
    res.modelled_s += std::max(15.0e9 / 4.2e12, double(tokens) * 15e9 / 700e12) +
                      double(contexts) * 131072.0 / 4.2e12 + 0.3e-3;
  }
  res.all_finished = !sched.has_unfinished();
  res.preemptions = sched.stats().num_preemptions;
  return res;
}

// B2's shape (1000 x 1024 in / 1024 out, certain) where it was measured on an H200 (session 43):
// 58,903 blocks at 1024 seats (8,892 output tok/s at 0, 9,901 at 1) and the H100's 29,418 at 256
// (9,478 / 9,456): how far the model is from the GPU.
TEST(AdmissionSimBench, B2AsMeasured) {
  if (!std::getenv("FOLIO_SCHED_BENCH")) GTEST_SKIP() << "set FOLIO_SCHED_BENCH=1 to run it";
  Load load;
  load.prompt.assign(1000, 1024);
  load.output.assign(1000, 1024);
  for (auto [blocks, seats] :
       {std::pair{58903, 1024}, std::pair{29418, 256}, std::pair{29418, 1024}}) {
    for (auto [mode, cons] : {std::pair{Mode::kCertain, 0.0}, std::pair{Mode::kCertain, 1.0},
                              std::pair{Mode::kCapped, 1.0}}) {
      const SimResult r = simulate(load, 1024, mode, cons, blocks, seats);
      ASSERT_TRUE(r.all_finished);
      std::printf(
          "B2 %d blocks %d seats %s cons %.1f: %lld steps, %lld preemptions, %.1f rows/step, "
          "model %.1f s, %.0f out tok/s; schedule() %.1f us per step on this host\n",
          blocks, seats, mode == Mode::kCertain ? "certain" : "capped", cons,
          static_cast<long long>(r.steps), static_cast<long long>(r.preemptions),
          double(r.decode_rows) / double(r.steps), r.modelled_s, 1024000.0 / r.modelled_s,
          1e6 * r.schedule_s / double(r.steps));
    }
  }
}

TEST(AdmissionSimBench, OutputsThatStopEarly) {
  if (!std::getenv("FOLIO_SCHED_BENCH")) GTEST_SKIP() << "set FOLIO_SCHED_BENCH=1 to run it";
  const int n = 2000, max_tokens = 2048;
  std::printf("%-34s %-6s %8s %9s %12s %10s %10s %12s\n", "load", "cons.", "steps", "preempt",
              "tokens", "rows/step", "model s", "out tok/s");
  for (double mean_out : {100.0, 400.0}) {
    const Load load = draw(n, mean_out, max_tokens, 43);
    int64_t out_tokens = 0;
    for (int o : load.output) out_tokens += o;
    for (int blocks : {4096, 16384}) {  // 65k and 262k tokens of KV
      for (Mode mode : {Mode::kEos, Mode::kCertain, Mode::kCapped}) {
        for (double cons : {0.0, 0.3, 1.0}) {
          const SimResult r = simulate(load, max_tokens, mode, cons, blocks);
          ASSERT_TRUE(r.all_finished);
          char what[64];
          std::snprintf(what, sizeof what, "mean out %d, %d blocks, %s", int(mean_out), blocks,
                        mode == Mode::kEos       ? "EOS"
                        : mode == Mode::kCertain ? "certain"
                                                 : "capped");
          std::printf("%-34s %-6.1f %8lld %9lld %12lld %10.1f %10.2f %12.0f\n", what, cons,
                      static_cast<long long>(r.steps), static_cast<long long>(r.preemptions),
                      static_cast<long long>(r.computed_tokens),
                      double(r.decode_rows) / double(r.steps), r.modelled_s,
                      double(out_tokens) / r.modelled_s);
        }
      }
    }
  }
}

}  // namespace
}  // namespace folio
