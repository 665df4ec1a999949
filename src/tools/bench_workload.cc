#include "tools/bench_workload.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/bench_rng.h"

namespace folio::tools {
namespace {

// Reads a required integer field >= 1 (and below 2^31: a length, not a byte count).
Status read_length(const nlohmann::json& j, const char* name, int& out) {
  auto it = j.find(name);
  if (it == j.end()) return invalid_argument(std::string("missing field \"") + name + "\"");
  if (!it->is_number_integer())
    return invalid_argument(std::string("\"") + name + "\" must be an integer, got " + it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < 1 || v > (int64_t{1} << 30))
    return invalid_argument(std::string("\"") + name + "\" must be in [1, 2^30], got " +
                            std::to_string(v));
  out = static_cast<int>(v);
  return Status();
}

}  // namespace

Result<WorkloadItem> parse_workload_line(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("not valid JSON");
  if (!j.is_object()) return invalid_argument("expected a JSON object {\"input_len\", \"output_len\"}");
  WorkloadItem item;
  FOLIO_RETURN_IF_ERROR(read_length(j, "input_len", item.input_len));
  FOLIO_RETURN_IF_ERROR(read_length(j, "output_len", item.output_len));
  if (j.contains("max_tokens")) {
    FOLIO_RETURN_IF_ERROR(read_length(j, "max_tokens", item.max_tokens));
    if (item.max_tokens < item.output_len)
      return invalid_argument("\"max_tokens\" (" + std::to_string(item.max_tokens) +
                              ") must be at least \"output_len\" (" +
                              std::to_string(item.output_len) + ")");
  }
  const bool has_group = j.contains("prefix_group"), has_len = j.contains("prefix_len");
  if (has_group != has_len)
    return invalid_argument("\"prefix_group\" and \"prefix_len\" go together");
  if (has_group) {
    const nlohmann::json& g = j["prefix_group"];
    if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > (int64_t{1} << 30))
      return invalid_argument("\"prefix_group\" must be an integer in [0, 2^30], got " + g.dump());
    item.prefix_group = static_cast<int>(g.get<int64_t>());
    FOLIO_RETURN_IF_ERROR(read_length(j, "prefix_len", item.prefix_len));
    if (item.prefix_len > item.input_len)
      return invalid_argument("\"prefix_len\" (" + std::to_string(item.prefix_len) +
                              ") must be at most \"input_len\" (" + std::to_string(item.input_len) +
                              ")");
  }
  return item;
}

Result<std::vector<WorkloadItem>> load_workload(const std::string& path, int num_prompts) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open workload " + path);
  std::vector<WorkloadItem> items;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto item = parse_workload_line(line);
    if (!item.ok())
      return invalid_argument(path + ":" + std::to_string(line_no) + ": " + item.status().message());
    items.push_back(*item);
    if (num_prompts > 0 && static_cast<int>(items.size()) == num_prompts) break;
  }
  if (items.empty()) return invalid_argument(path + ": no requests in the workload");
  if (num_prompts > 0 && static_cast<int>(items.size()) < num_prompts)
    return invalid_argument(path + " has only " + std::to_string(items.size()) +
                            " requests, --num-prompts asks for " + std::to_string(num_prompts));
  return items;
}

std::vector<WorkloadItem> fixed_workload(int input_len, int output_len, int num_prompts) {
  return std::vector<WorkloadItem>(static_cast<size_t>(std::max(0, num_prompts)),
                                   WorkloadItem{input_len, output_len});
}

int64_t total_input_tokens(const std::vector<WorkloadItem>& items) {
  int64_t n = 0;
  for (const auto& i : items) n += i.input_len;
  return n;
}

int64_t total_output_tokens(const std::vector<WorkloadItem>& items) {
  int64_t n = 0;
  for (const auto& i : items) n += i.output_len;
  return n;
}

std::vector<std::vector<int32_t>> make_random_prompts(const std::vector<WorkloadItem>& items,
                                                      int vocab_size, uint64_t seed) {
  SplitMix64 rng(seed);
  const uint64_t vocab = static_cast<uint64_t>(std::max(1, vocab_size));
  // Each group's prefix, as long as its longest prefix_len, drawn once from the group's stream.
  std::map<int, std::vector<int32_t>> group_prefix;
  for (const auto& item : items) {
    if (item.prefix_group < 0) continue;
    std::vector<int32_t>& ids = group_prefix[item.prefix_group];
    if (static_cast<int>(ids.size()) >= item.prefix_len) continue;
    // The group's stream starts at a hash of (seed, group): streams of neighbouring groups
    // do not overlap, as they would if their starting states were one increment apart.
    SplitMix64 group_rng(SplitMix64((seed ^ 0x5eed9a7e11ull) * 0x100000001b3ull +
                                    static_cast<uint64_t>(item.prefix_group))
                             .next());
    ids.resize(static_cast<size_t>(item.prefix_len));
    for (auto& id : ids) id = static_cast<int32_t>(group_rng.next() % vocab);
  }
  std::vector<std::vector<int32_t>> prompts;
  prompts.reserve(items.size());
  for (const auto& item : items) {
    std::vector<int32_t> ids(static_cast<size_t>(item.input_len));
    size_t own_from = 0;
    if (item.prefix_group >= 0) {
      const std::vector<int32_t>& prefix = group_prefix[item.prefix_group];
      own_from = static_cast<size_t>(item.prefix_len);
      std::copy_n(prefix.begin(), own_from, ids.begin());
    }
    for (size_t i = own_from; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>(rng.next() % vocab);
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

}  // namespace folio::tools
