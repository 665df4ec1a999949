// `folio bench throughput` for real, through the binary, on the llama_gqa fixture (also with
// --n, parallel sampling); `bench latency` in process; the bandwidth floor against
// docs/performance.md's Llama-3-8B figures (and with an fp8 KV cache: half the KV bytes, the same
// weight bytes).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/engine_factory.h"
#include "model/safetensors.h"
#include "tools/bench_latency.h"
#include "tools/bench_workload.h"

namespace folio::tools {
namespace {

const std::string kModel = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";

// Per process: ctest may run these tests in parallel processes.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the folio binary (bounded by coreutils timeout); returns its exit code, stderr in `err`.
int run_folio(const std::string& args, std::string* err = nullptr) {
  const std::string err_path = temp_path("folio_stderr.txt");
  const std::string cmd = "timeout 120 " + std::string(FOLIO_BINARY) + " " + args + " >" +
                          temp_path("folio_stdout.txt") + " 2>" + err_path;
  const int rc = std::system(cmd.c_str());
  if (err) *err = slurp(err_path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// 12 requests of mixed lengths; returns the path and the token sums.
std::string write_workload(int64_t& in_sum, int64_t& out_sum) {
  const std::string path = temp_path("bench_small.jsonl");
  std::ofstream out(path);
  in_sum = out_sum = 0;
  for (int i = 0; i < 12; ++i) {
    const int in = 5 + (i * 7) % 40, o = 3 + (i * 5) % 17;
    out << "{\"input_len\": " << in << ", \"output_len\": " << o << "}\n";
    in_sum += in;
    out_sum += o;
  }
  return path;
}

void expect_consistent(const nlohmann::json& j, int64_t in_sum, int64_t out_sum) {
  for (const char* k : {"requests_per_second", "output_tokens_per_second", "total_tokens_per_second",
                        "elapsed_seconds", "kv_slot_utilization", "num_preemptions",
                        "peak_running_sequences", "gpu_name", "commit", "date", "command"})
    ASSERT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["num_requests"], 12);
  EXPECT_EQ(j["num_failed"], 0);
  EXPECT_EQ(j["prompt_tokens"].get<int64_t>(), in_sum);
  EXPECT_EQ(j["output_tokens"].get<int64_t>(), out_sum);  // EOS ignored: exactly max_tokens
  const double t = j["elapsed_seconds"].get<double>();
  ASSERT_GT(t, 0.0);
  EXPECT_NEAR(j["requests_per_second"].get<double>() * t, 12.0, 1e-6);
  EXPECT_NEAR(j["output_tokens_per_second"].get<double>() * t, double(out_sum), 1e-6);
  EXPECT_NEAR(j["total_tokens_per_second"].get<double>() * t, double(in_sum + out_sum), 1e-6);
  EXPECT_GT(j["kv_slot_utilization"].get<double>(), 0.0);
  EXPECT_LE(j["kv_slot_utilization"].get<double>(), 1.0);
  EXPECT_GE(j["peak_running_sequences"].get<int>(), 1);
  EXPECT_LE(j["peak_running_sequences"].get<int>(), 12);
  EXPECT_EQ(j["gpu_name"], "cpu");
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  EXPECT_EQ(j["date"].get<std::string>().size(), 20u);  // 2026-11-22T02:30:05Z
  EXPECT_NE(j["command"].get<std::string>().find("bench throughput"), std::string::npos);
}

TEST(BenchThroughput, RealRunOnTheFixtureModel) {
  int64_t in_sum, out_sum;
  const std::string wl = write_workload(in_sum, out_sum);
  const std::string json_path = temp_path("tp.json");
  std::string err;
  ASSERT_EQ(run_folio("bench throughput --model " + kModel + " --workload " + wl +
                      " --output-json " + json_path, &err), 0) << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  expect_consistent(j, in_sum, out_sum);
  EXPECT_GT(j["peak_running_sequences"].get<int>(), 1);  // a roomy cache runs them together
  EXPECT_EQ(j["kv_cache_dtype"], "auto");
  // Unset, the device's defaults (engine/batch_defaults.h): 2048 and 256 on the CPU.
  const int tokens = j["max_num_batched_tokens"], seqs = j["max_num_seqs"];
  EXPECT_TRUE(tokens == 2048 || tokens == 8192 || tokens == 16384) << tokens;
  EXPECT_TRUE(seqs == 256 || seqs == 1024) << seqs;
}

TEST(BenchThroughput, Fp8KvCacheRunsAndIsReported) {
  int64_t in_sum, out_sum;
  const std::string wl = write_workload(in_sum, out_sum);
  const std::string json_path = temp_path("tp_fp8.json");
  std::string err;
  ASSERT_EQ(run_folio("bench throughput --model " + kModel + " --workload " + wl +
                      " --kv-cache-dtype fp8 --max-num-seqs 6 --max-num-batched-tokens 96"
                      " --output-json " + json_path, &err), 0) << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  expect_consistent(j, in_sum, out_sum);
  EXPECT_EQ(j["kv_cache_dtype"], "fp8_e4m3");
  EXPECT_EQ(j["max_num_seqs"], 6);  // given: kept, not the device's defaults
  EXPECT_EQ(j["max_num_batched_tokens"], 96);
  EXPECT_LE(j["peak_running_sequences"].get<int>(), 6);
}

// bench latency's JSON names the step budget and seats it ran with (given here; unset, the
// device's defaults).
TEST(BenchLatency, JsonRecordsTheBatchLimits) {
  const std::string json_path = temp_path("lat.json");
  std::string err;
  ASSERT_EQ(run_folio("bench latency --model " + kModel + " --device cpu --batch-size 2 --input-len 8"
                      " --output-len 4 --num-iters-warmup 1 --num-iters 1 --max-num-seqs 3"
                      " --max-num-batched-tokens 64 --output-json " + json_path, &err), 0) << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  EXPECT_EQ(j["max_num_seqs"], 3);
  EXPECT_EQ(j["max_num_batched_tokens"], 64);
  EXPECT_EQ(j["batch_size"], 2);
}

TEST(BenchThroughput, SmallCachePreemptsAndStillFinishesEverything) {
  int64_t in_sum, out_sum;
  const std::string wl = write_workload(in_sum, out_sum);
  const std::string json_path = temp_path("tp_small.json");
  std::string err;
  // 20 blocks of 4 tokens (the longest request needs 16): with vLLM's admission running ones
  // get preempted.
  const std::string cmd = "bench throughput --model " + kModel + " --workload " + wl +
                          " --block-size 4 --num-kv-blocks 20 --kv-cache-mode paged";
  ASSERT_EQ(run_folio(cmd + " --schedule-conservativeness 0 --output-json " + json_path, &err), 0)
      << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  expect_consistent(j, in_sum, out_sum);
  EXPECT_GT(j["num_preemptions"].get<int>(), 0);
  EXPECT_EQ(j["kv_num_blocks"], 20);
  EXPECT_NE(err.find("total_num_cumulative_preemption="), std::string::npos) << err;
  EXPECT_EQ(j["schedule_conservativeness"], 0.0);
  // The default admission headroom holds requests back instead: everything, no preemption.
  ASSERT_EQ(run_folio(cmd + " --output-json " + json_path, &err), 0) << err;
  j = nlohmann::json::parse(slurp(json_path));
  expect_consistent(j, in_sum, out_sum);
  EXPECT_EQ(j["num_preemptions"].get<int>(), 0);
  EXPECT_EQ(j["schedule_conservativeness"], 0.3);
}

// Items with "max_tokens" stop early: at their output_len (ended by the benchmark), or sooner at
// a real EOS of the fixture model (vocabulary 512, temperature 1).
TEST(BenchThroughput, OutputsThatStopEarly) {
  const std::string wl = temp_path("bench_eos.jsonl");
  int64_t out_sum = 0;
  {
    std::ofstream out(wl);
    for (int i = 0; i < 12; ++i) {
      const int o = 3 + (i * 5) % 17;
      out << "{\"input_len\": " << 5 + (i * 7) % 40 << ", \"output_len\": " << o
          << ", \"max_tokens\": 200}\n";
      out_sum += o;
    }
  }
  const std::string json_path = temp_path("tp_eos.json");
  std::string err;
  ASSERT_EQ(run_folio("bench throughput --model " + kModel + " --workload " + wl +
                          " --output-json " + json_path,
                      &err),
            0)
      << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  EXPECT_EQ(j["num_failed"], 0);
  const int ended = j["num_ended_at_output_len"];
  EXPECT_GE(ended, 6);  // most reach their length: an EOS comes about once in 512 tokens
  EXPECT_LE(ended, 12);
  EXPECT_LE(j["output_tokens"].get<int64_t>(), out_sum);
  EXPECT_GT(j["output_tokens"].get<int64_t>(), out_sum / 2);
  EXPECT_LT(j["num_steps"].get<int64_t>(), 150);  // not 200 decode steps
}

// --n: parallel sampling (vLLM's flag). Each request samples n sequences that share its prompt;
// requests per second counts requests, output tokens every sequence's.
TEST(BenchThroughput, ParallelSamplingCountsEverySequence) {
  int64_t in_sum, out_sum;
  const std::string wl = write_workload(in_sum, out_sum);
  const std::string json_path = temp_path("tp_n3.json");
  std::string err;
  ASSERT_EQ(run_folio("bench throughput --model " + kModel + " --workload " + wl +
                          " --n 3 --output-json " + json_path,
                      &err),
            0)
      << err;
  auto j = nlohmann::json::parse(slurp(json_path));
  EXPECT_EQ(j["n"], 3);
  expect_consistent(j, in_sum, 3 * out_sum);  // 12 requests, every sequence's output tokens
  // Not with outputs that stop early, nor n < 1.
  const std::string early = temp_path("early.jsonl");
  std::ofstream(early) << "{\"input_len\": 8, \"output_len\": 4, \"max_tokens\": 20}\n";
  EXPECT_EQ(
      run_folio("bench throughput --model " + kModel + " --workload " + early + " --n 2", &err), 2);
  EXPECT_NE(err.find("n > 1"), std::string::npos) << err;
  EXPECT_NE(run_folio("bench throughput --model " + kModel + " --workload " + wl + " --n 0", &err),
            0);
  EXPECT_NE(err.find("--n"), std::string::npos) << err;
}

TEST(BenchThroughput, BadInputExitsTwoWithAClearMessage) {
  const std::string bad = temp_path("bad.jsonl");
  std::ofstream(bad) << "{\"input_len\": 4, \"output_len\": 4}\n{\"input_len\": 4}\n";
  std::string err;
  EXPECT_EQ(run_folio("bench throughput --model " + kModel + " --workload " + bad, &err), 2);
  EXPECT_NE(err.find(bad + ":2: missing field \"output_len\""), std::string::npos) << err;
  EXPECT_EQ(run_folio("bench throughput --input-len 4 --output-len 4", &err), 2);
  EXPECT_NE(err.find("--model"), std::string::npos) << err;
  EXPECT_EQ(run_folio("bench throughput --model " + kModel, &err), 2);
  EXPECT_NE(err.find("--workload"), std::string::npos) << err;
  // 4096 context: 4000 + 200 cannot fit.
  EXPECT_EQ(run_folio("bench throughput --model " + kModel +
                      " --input-len 4000 --output-len 200 --num-prompts 1", &err), 2);
  EXPECT_NE(err.find("over the context length"), std::string::npos) << err;
}

TEST(BenchLatency, MeasuresPrefillAndDecode) {
  LoadOptions o;
  o.model_dir = kModel;
  auto engine = load_engine(o, EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  LatencyConfig c;
  c.batch_size = 3;
  c.input_len = 24;
  c.output_len = 6;
  c.num_iters = 3;
  c.num_iters_warmup = 1;
  auto iters = run_latency(**engine, c);
  ASSERT_TRUE(iters.ok()) << iters.status().to_string();
  ASSERT_EQ(iters->size(), 3u);
  for (const auto& it : *iters) {
    EXPECT_GT(it.ttft_s, 0.0);
    EXPECT_GT(it.total_s, it.ttft_s);
    EXPECT_NEAR(it.tpot_wall_s * 5, it.total_s - it.ttft_s, 1e-12);
    // One prefill step (72 tokens fit the budget), then 5 steps of the 3 requests decoding.
    EXPECT_EQ(it.full_batch_steps, 5);
    EXPECT_GT(it.tpot_s, 0.0);
    EXPECT_LE(it.tpot_s * 5, it.total_s - it.ttft_s);  // the steps lie inside that window
  }
  EXPECT_FALSE((*engine)->has_unfinished());
  EXPECT_EQ((*engine)->counters().generated_tokens, 4 * 3 * 6);  // warm-up included
  BandwidthFloor f = decode_bandwidth_floor((*engine)->model_config(), 3, 27.0, 1.0);
  auto j = latency_json(c, *iters, f, 1.0);
  EXPECT_EQ(j["kv_cache_dtype"], "auto");
  EXPECT_NEAR(j["floor_ratio"].get<double>(),
              j["floor_tpot_ms"].get<double>() / j["mean_tpot_ms"].get<double>(), 1e-9);
  c.batch_size = 1;
  c.input_len = 4091;  // + 6 output tokens > the 4096 context: refused before running
  EXPECT_FALSE(run_latency(**engine, c).ok());
}

// Prompts over the step budget prefill one chunk at a time, so the requests start decoding
// steps apart: only the steps in which all of them decode count toward TPOT, and with fewer
// output tokens than the stagger none do and TPOT is the wall-clock form.
TEST(BenchLatency, StaggeredPrefillCountsOnlyFullBatchSteps) {
  LoadOptions o;
  o.model_dir = kModel;
  EngineConfig config;
  config.sched.max_num_batched_tokens = 32;
  auto engine = load_engine(o, config);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  LatencyConfig c;
  c.batch_size = 4;
  c.input_len = 30;  // 120 prompt tokens: at least 4 prefill steps, first tokens staggered
  c.output_len = 8;
  c.num_iters = 1;
  c.num_iters_warmup = 0;
  auto iters = run_latency(**engine, c);
  ASSERT_TRUE(iters.ok()) << iters.status().to_string();
  const LatencyIteration& it = iters->at(0);
  // The last request's first token comes 3+ steps after the first's, which then finishes 3+
  // steps before it: at most 7 - 3 steps run all four.
  EXPECT_GT(it.full_batch_steps, 0);
  EXPECT_LE(it.full_batch_steps, c.output_len - 1 - 3);
  EXPECT_GT(it.tpot_s, 0.0);
  EXPECT_NE(it.tpot_s, it.tpot_wall_s);
  auto j = latency_json(c, *iters, decode_bandwidth_floor((*engine)->model_config(), 4, 34, 1),
                        1.0);
  EXPECT_EQ(j["full_batch_decode_steps"].get<double>(), it.full_batch_steps);
  EXPECT_NEAR(j["mean_tpot_wall_ms"].get<double>(), it.tpot_wall_s * 1000.0, 1e-9);

  c.output_len = 2;  // the first request is done before the last one's first token
  iters = run_latency(**engine, c);
  ASSERT_TRUE(iters.ok()) << iters.status().to_string();
  EXPECT_EQ(iters->at(0).full_batch_steps, 0);
  EXPECT_EQ(iters->at(0).tpot_s, iters->at(0).tpot_wall_s);
}

// Parameters read per decode step = every checkpoint tensor but the embedding table.
TEST(BenchLatency, DecodeWeightsMatchTheCheckpoint) {
  auto model = ModelConfig::load(kModel);
  ASSERT_TRUE(model.ok());
  auto ck = SafetensorsFile::open(kModel + "/model.safetensors");
  ASSERT_TRUE(ck.ok());
  int64_t params = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (name.find("embed_tokens") != std::string::npos) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
  }
  EXPECT_EQ(decode_weight_params(*model), params);
}

TEST(BenchLatency, Llama3_8bFloorMatchesPerformanceDoc) {
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 4096},
                        {"intermediate_size", 14336}, {"num_hidden_layers", 32},
                        {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                        {"vocab_size", 128256}, {"max_position_embeddings", 8192},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
                        {"torch_dtype", "bfloat16"}, {"tie_word_embeddings", false}};
  auto m = ModelConfig::from_json(cfg, "llama-3-8b");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_NEAR(decode_weight_params(*m) / 1e9, 7.50, 0.005);  // "7.50e9 weights read per step"
  EXPECT_EQ(kv_bytes_per_token(*m), 128 * 1024);              // "128 KiB per token"
  // "batch 1: 4.48 ms/token on H100 (3.35 TB/s)"; "the floor at 3.0 TB/s is 5.0 ms".
  EXPECT_NEAR(decode_bandwidth_floor(*m, 1, 0.0, 3350).floor_s * 1e3, 4.48, 0.01);
  EXPECT_NEAR(decode_bandwidth_floor(*m, 1, 384.0, 3000).floor_s * 1e3, 5.0, 0.05);
  // fp8 KV: one byte per K/V element, the weights still bf16.
  EXPECT_EQ(kv_bytes_per_token(*m, KvCacheDtype::kFp8E4m3), 64 * 1024);
  const BandwidthFloor bf16 = decode_bandwidth_floor(*m, 64, 1024.0, 3000);
  const BandwidthFloor fp8 = decode_bandwidth_floor(*m, 64, 1024.0, 3000, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(fp8.weight_bytes, bf16.weight_bytes);
  EXPECT_EQ(fp8.kv_bytes, bf16.kv_bytes / 2);
  EXPECT_EQ(fp8.kv_dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(latency_json(LatencyConfig{}, {}, fp8, 3000)["kv_cache_dtype"], "fp8_e4m3");
}

// A sliding window caps the keys a layer reads: Mistral-7B-v0.1's 4096 halves the KV bytes of an
// 8192-token context, and leaves a 2048-token one whole; Qwen2 sliding half its layers reads 3/4.
TEST(BenchLatency, TheFloorCountsAWindowsKeysOnly) {
  nlohmann::json cfg = {{"architectures", {"MistralForCausalLM"}},
                        {"hidden_size", 4096},
                        {"intermediate_size", 14336},
                        {"num_hidden_layers", 32},
                        {"num_attention_heads", 32},
                        {"num_key_value_heads", 8},
                        {"vocab_size", 32000},
                        {"max_position_embeddings", 32768},
                        {"sliding_window", 4096},
                        {"torch_dtype", "bfloat16"}};
  auto windowed = ModelConfig::from_json(cfg, "mistral");
  cfg["sliding_window"] = nullptr;
  auto full = ModelConfig::from_json(cfg, "mistral");
  ASSERT_TRUE(windowed.ok() && full.ok());
  EXPECT_EQ(decode_bandwidth_floor(*windowed, 8, 8192.0, 3000).kv_bytes,
            decode_bandwidth_floor(*full, 8, 8192.0, 3000).kv_bytes / 2);
  EXPECT_EQ(decode_bandwidth_floor(*windowed, 8, 2048.0, 3000).kv_bytes,
            decode_bandwidth_floor(*full, 8, 2048.0, 3000).kv_bytes);
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  cfg["sliding_window"] = 4096;
  cfg["use_sliding_window"] = true;
  cfg["max_window_layers"] = 16;
  auto half = ModelConfig::from_json(cfg, "qwen2");
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  EXPECT_DOUBLE_EQ(decode_bandwidth_floor(*half, 8, 8192.0, 3000).kv_bytes,
                   decode_bandwidth_floor(*full, 8, 8192.0, 3000).kv_bytes * 3 / 4);
}

}  // namespace
}  // namespace folio::tools
