// The tokenizer.json "post_processor", applied when encode() is asked to add special tokens.
// Supported: TemplateProcessing (the "single" template: special tokens around sequence A),
// BertProcessing / RobertaProcessing ([cls] A [sep]), ByteLevel (offsets only: no change to ids),
// Sequence. Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace folio {

class PostProcessor {
 public:
  static Result<PostProcessor> from_json(const nlohmann::json& j);

  // Returns the ids of one sequence with the template's special tokens added.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;
  // The ids a template puts before / after the sequence (e.g. BOS), for callers that want them.
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  Status add(const nlohmann::json& j);

  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace folio
