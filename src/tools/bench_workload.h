// Benchmark workloads: a list of (input_len, output_len) requests, read from a JSONL file of
// {"input_len": N, "output_len": M} lines (bench/workloads/sharegpt_like_1000.jsonl), optionally
// with "max_tokens": K >= M (an output that stops early, as at an EOS: see WorkloadItem), or made
// of one fixed shape, and the random prompts that fill them (token ids drawn from a seeded RNG, so
// a run is repeatable and prompts share no prefix beyond chance), optionally with
// "prefix_group": G, "prefix_len": P (requests of one group share their first P tokens, as
// SGLang's generated-shared-prefix dataset: a system prompt or few-shot examples).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace folio::tools {

struct WorkloadItem {
  int input_len = 0;   // prompt tokens, >= 1
  int output_len = 0;  // generated tokens, >= 1
  // 0: the request is sent with max_tokens = output_len and EOS ignored (its length is certain).
  // Else (>= output_len): sent with this max_tokens, EOS not ignored, and ended by the benchmark
  // after output_len tokens as if it had sampled EOS there, so the scheduler does not know its
  // length in advance (dummy weights never stop on their own): `bench throughput` aborts it,
  // `bench serve` closes its stream.
  int max_tokens = 0;
  // -1: the whole prompt is the request's own. Else the first prefix_len (1..input_len) tokens
  // come from group prefix_group's token stream, so every request of the group starts with the
  // same ids (a shorter prefix_len is a prefix of a longer one); the rest are its own.
  int prefix_group = -1;
  int prefix_len = 0;
};

// One JSONL line. Errors name the field and the problem ("input_len must be an integer >= 1").
Result<WorkloadItem> parse_workload_line(std::string_view line);

// Every non-blank line of `path`; errors carry "path:line: ". `num_prompts` > 0 keeps the first
// that many (an error if the file has fewer); 0 keeps all.
Result<std::vector<WorkloadItem>> load_workload(const std::string& path, int num_prompts);

std::vector<WorkloadItem> fixed_workload(int input_len, int output_len, int num_prompts);

int64_t total_input_tokens(const std::vector<WorkloadItem>& items);
int64_t total_output_tokens(const std::vector<WorkloadItem>& items);

// One prompt per item, ids uniform in [0, vocab_size), from a splitmix64 stream seeded by
// `seed` (the same ids on every platform, unlike std::uniform_int_distribution). An item's
// shared prefix comes from its group's own stream (seeded by `seed` and the group), and only its
// own tokens from the main one, so a workload without groups gets the ids it always got.
std::vector<std::vector<int32_t>> make_random_prompts(const std::vector<WorkloadItem>& items,
                                                      int vocab_size, uint64_t seed);

}  // namespace folio::tools
