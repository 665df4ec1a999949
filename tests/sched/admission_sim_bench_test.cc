// AdmissionSimBench: the admission headroom against vLLM's admission (conservativeness 0) on the
// host, as a model to set beside GPU runs: outputs that stop early (as at an EOS; the workloads of
// bench/workloads that `folio bench throughput` plays on a GPU by ending each request at its
// output_len) and certain outputs of uneven length. The scheduler and a paged KV manager run for
// real (they reproduce the preemption counts measured on the GPU: B2AsMeasured); the "model" ends
// each request at its workload length, the same in every run. Steps are costed by a roofline of
// Llama-3-8B on an H200 (a model, not a measurement):
//   step = max(15.0 GB of weights / 4.2 TB/s, tokens x 15 GFLOP / 700 TFLOP/s)
//          + decode contexts x 128 KiB / 4.2 TB/s + 0.3 ms of small kernels.
//   FOLIO_SCHED_BENCH=1 build/tests/sched/folio_sched_tests --gtest_filter='AdmissionSimBench.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/paged_kv_cache_manager.h"
#include "sched/scheduler.h"

namespace folio {
namespace {

struct Load {
  std::vector<int> prompt, output;  // per request: prompt length, tokens until it stops
  int max_tokens = 0;               // the budget an uncertain (kEos) request is sent with
};

// A workload of bench/workloads (bench/make_eos_workload.py): the same load that `folio bench
// throughput --workload` runs on a GPU, so the model and the measurement can be compared.
Load read_load(const std::string& name) {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/bench/workloads/" + name);
  EXPECT_TRUE(in.good()) << name;
  Load l;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    l.prompt.push_back(j.at("input_len").get<int>());
    l.output.push_back(j.at("output_len").get<int>());
    l.max_tokens = std::max(l.max_tokens, j.value("max_tokens", l.output.back()));
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

SimResult simulate(const Load& load, Mode mode, double conservativeness, int kv_blocks,
                   int seats = 1024, bool reactive = true) {
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
  c.reactive_headroom = reactive;
  Scheduler sched(c, kv);
  std::unordered_map<GroupId, int> stop_at;  // request -> output length
  for (size_t i = 0; i < load.prompt.size(); ++i) {
    Request r;
    r.id = static_cast<GroupId>(i + 1);
    for (int k = 0; k < load.prompt[i]; ++k)  // no two prompts share a prefix block
      r.prompt.push_back(static_cast<TokenId>((i * 7919 + static_cast<size_t>(k)) % 100000));
    r.params.max_tokens = mode == Mode::kEos ? load.max_tokens : load.output[i];
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
    // Certain (ignore_eos) at 0 and 0.3; capped (max_tokens = 1024 without ignore_eos: counted
    // by the ratio) at 1 and 0.3 with SGLang's ratio and at 0.3 with the reactive one.
    struct Arm {
      Mode mode;
      double cons;
      bool reactive;
    };
    for (const Arm& a : {Arm{Mode::kCertain, 0.0, true}, Arm{Mode::kCertain, 0.3, true},
                         Arm{Mode::kCapped, 1.0, false}, Arm{Mode::kCapped, 0.3, false},
                         Arm{Mode::kCapped, 0.3, true}}) {
      const SimResult r = simulate(load, a.mode, a.cons, blocks, seats, a.reactive);
      ASSERT_TRUE(r.all_finished);
      std::printf(
          "B2 %d blocks %d seats %s cons %.1f%s: %lld steps, %lld preemptions, %.1f rows/step, "
          "model %.1f s, %.0f out tok/s; schedule() %.1f us per step on this host\n",
          blocks, seats, a.mode == Mode::kCertain ? "certain" : "capped", a.cons,
          a.cons == 0.0 || a.mode == Mode::kCertain ? ""
          : a.reactive                              ? " reactive"
                                                    : " sglang",
          static_cast<long long>(r.steps), static_cast<long long>(r.preemptions),
          double(r.decode_rows) / double(r.steps), r.modelled_s, 1024000.0 / r.modelled_s,
          1e6 * r.schedule_s / double(r.steps));
    }
  }
}

TEST(AdmissionSimBench, OutputsThatStopEarly) {
  if (!std::getenv("FOLIO_SCHED_BENCH")) GTEST_SKIP() << "set FOLIO_SCHED_BENCH=1 to run it";
  std::printf("%-44s %-13s %8s %9s %12s %10s %10s %12s\n", "load", "cons. ratio", "steps",
              "preempt", "tokens", "rows/step", "model s", "out tok/s");
  for (const char* file :
       {"eos_mean100_2000.jsonl", "eos_mean400_2000.jsonl", "sharegpt_like_1000_eos2048.jsonl"}) {
    const Load load = read_load(file);
    int64_t out_tokens = 0;
    for (int o : load.output) out_tokens += o;
    // 65k and 262k tokens of KV; and the H200's whole pool for Llama-3-8B at 0.9 (B1, B2).
    for (int blocks : {4096, 16384, 58903}) {
      // vLLM's admission (0); SGLang's ratio at 0.3 and 1; the reactive ratio (the default)
      // at 0.3 and 1. Certain and capped outputs at 0.3 (for them the ratios differ little).
      for (Mode mode : {Mode::kEos, Mode::kCertain, Mode::kCapped}) {
        for (auto [cons, reactive] :
             {std::pair{0.0, false}, std::pair{0.3, false}, std::pair{1.0, false},
              std::pair{0.3, true}, std::pair{1.0, true}}) {
          if (mode != Mode::kEos && (cons == 1.0 || (cons == 0.3 && !reactive))) continue;
          const SimResult r = simulate(load, mode, cons, blocks, 1024, reactive);
          ASSERT_TRUE(r.all_finished);
          char what[96];
          std::snprintf(what, sizeof what, "%s, %d blocks, %s", file, blocks,
                        mode == Mode::kEos       ? "EOS"
                        : mode == Mode::kCertain ? "certain"
                                                 : "capped");
          std::printf("%-44s %-3.1f %-9s %8lld %9lld %12lld %10.1f %10.2f %12.0f\n", what, cons,
                      cons == 0.0 ? ""
                      : reactive  ? "reactive"
                                  : "sglang",
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
