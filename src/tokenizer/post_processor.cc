#include "tokenizer/post_processor.h"

#include <string>

namespace folio {

Status PostProcessor::add(const nlohmann::json& j) {
  if (j.is_null()) return Status();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return invalid_argument("post_processor must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return Status();
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) {
      return invalid_argument("Sequence post_processor without a \"processors\" array");
    }
    for (const auto& p : j["processors"]) FOLIO_RETURN_IF_ERROR(add(p));
    return Status();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // "cls": ["[CLS]", 101], "sep": ["[SEP]", 102]
    auto id_of = [&](const char* k) -> int64_t {
      if (!j.contains(k) || !j[k].is_array() || j[k].size() != 2 || !j[k][1].is_number_integer()) {
        return -1;
      }
      return j[k][1].get<int64_t>();
    };
    int64_t cls = id_of("cls"), sep = id_of("sep");
    if (cls < 0 || sep < 0) return invalid_argument(type + " post_processor needs cls and sep");
    prefix_.insert(prefix_.begin(), static_cast<int32_t>(cls));
    suffix_.push_back(static_cast<int32_t>(sep));
    return Status();
  }
  if (type != "TemplateProcessing") {
    return unimplemented("post_processor type \"" + type + "\" is not supported");
  }
  if (!j.contains("single") || !j["single"].is_array()) {
    return invalid_argument("TemplateProcessing without a \"single\" template");
  }
  const nlohmann::json specials = j.value("special_tokens", nlohmann::json::object());
  bool seen_sequence = false;
  std::vector<int32_t> before, after;
  for (const auto& piece : j["single"]) {
    if (piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id") ||
        !piece["SpecialToken"]["id"].is_string()) {
      return invalid_argument("TemplateProcessing piece is neither Sequence nor SpecialToken: " +
                              piece.dump());
    }
    std::string name = piece["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array()) {
      return invalid_argument("TemplateProcessing special token \"" + name +
                              "\" is missing from special_tokens");
    }
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer()) return invalid_argument("special token ids must be integers");
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  // Later processors wrap the output of earlier ones.
  prefix_.insert(prefix_.begin(), before.begin(), before.end());
  suffix_.insert(suffix_.end(), after.begin(), after.end());
  return Status();
}

Result<PostProcessor> PostProcessor::from_json(const nlohmann::json& j) {
  PostProcessor p;
  FOLIO_RETURN_IF_ERROR(p.add(j));
  return p;
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  if (prefix_.empty() && suffix_.empty()) return ids;
  std::vector<int32_t> out;
  out.reserve(prefix_.size() + ids.size() + suffix_.size());
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace folio
