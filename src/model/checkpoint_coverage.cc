#include "model/checkpoint_coverage.h"

#include <set>
#include <string>
#include <vector>

#include "model/weight_layout.h"

namespace folio {
namespace {

// Tensors transformers' Llama-family models skip on load without a word.
bool ignorable(const ModelConfig& config, const std::string& name) {
  return name.ends_with(".rotary_emb.inv_freq") ||
         (config.tie_word_embeddings && name == "lm_head.weight");
}

}  // namespace

Status check_every_tensor_is_read(const ModelConfig& config, const Checkpoint& ck) {
  std::set<std::string> read;
  for (const WeightPart& p : build_weight_layout(config, nullptr).parts) read.insert(p.name);
  std::vector<std::string> left;
  for (const std::string& name : ck.tensor_names())
    if (!read.count(name) && !ignorable(config, name)) left.push_back(name);
  if (left.empty()) return Status();
  std::string names;
  for (size_t i = 0; i < left.size() && i < 3; ++i) names += (i ? ", " : "") + left[i];
  if (left.size() > 3) names += ", ...";
  return unimplemented(ck.dir() + ": " + std::to_string(left.size()) +
                       " checkpoint tensor(s) that folio's " + config.architecture_name +
                       " does not read (" + names +
                       "): the checkpoint's model has parts its config.json does not describe "
                       "to folio, and running without them would change its outputs");
}

}  // namespace folio
