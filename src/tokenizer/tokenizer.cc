#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>

#include "base/file_util.h"
#include "tokenizer/utf8.h"

namespace folio {
namespace {

// tokenizer_config.json spells a special token as a string, an AddedToken object with
// "content", or null.
std::string token_string_field(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

std::optional<bool> bool_field(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key) || !config[key].is_boolean()) return std::nullopt;
  return config[key].get<bool>();
}

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::string& model_dir) {
  const std::string path = join_path(model_dir, "tokenizer.json");
  if (!file_exists(path)) return not_found(path + ": no such file (is this a model directory?)");
  FOLIO_ASSIGN_OR_RETURN(nlohmann::json tj, read_json_file(path));
  nlohmann::json config;
  const std::string config_path = join_path(model_dir, "tokenizer_config.json");
  if (file_exists(config_path)) {
    FOLIO_ASSIGN_OR_RETURN(config, read_json_file(config_path));
  }
  return from_json(tj, config, path);
}

Result<Tokenizer> Tokenizer::from_json(const nlohmann::json& tj, const nlohmann::json& config,
                                       const std::string& source) {
  auto fail = [&](const Status& st, const char* part) {
    return Status(st.code(), source + ": " + part + ": " + st.message());
  };
  // nlohmann throws on type mismatches in nested fields; no exception leaves this function.
  try {
    if (!tj.is_object()) return invalid_argument(source + ": top level is not a JSON object");
    if (!tj.contains("model")) return invalid_argument(source + ": no \"model\" field");
    Tokenizer t;
    auto added = AddedVocabulary::from_json(tj.value("added_tokens", nlohmann::json()));
    if (!added.ok()) return fail(added.status(), "added_tokens");
    t.added_ = std::move(added).value();
    auto norm = Normalizer::from_json(tj.value("normalizer", nlohmann::json()));
    if (!norm.ok()) return fail(norm.status(), "normalizer");
    t.normalizer_ = std::move(norm).value();
    auto pre = PreTokenizer::from_json(tj.value("pre_tokenizer", nlohmann::json()));
    if (!pre.ok()) return fail(pre.status(), "pre_tokenizer");
    t.pre_tokenizer_ = std::move(pre).value();
    auto model = BpeModel::from_json(tj["model"], t.pre_tokenizer_.byte_level());
    if (!model.ok()) return fail(model.status(), "model");
    t.model_ = std::move(model).value();
    auto post = PostProcessor::from_json(tj.value("post_processor", nlohmann::json()));
    if (!post.ok()) return fail(post.status(), "post_processor");
    t.post_processor_ = std::move(post).value();
    auto dec = Decoder::from_json(tj.value("decoder", nlohmann::json()));
    if (!dec.ok()) return fail(dec.status(), "decoder");
    t.decoder_ = std::move(dec).value();
    t.vocab_size_ = t.model_.vocab_size();
    for (const AddedToken& a : t.added_.tokens()) t.vocab_size_ = std::max(t.vocab_size_, a.id + 1);
    FOLIO_RETURN_IF_ERROR(t.load_config(config, source));
    return t;
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(source + ": unexpected field type: " + e.what());
  }
}

Status Tokenizer::load_config(const nlohmann::json& config, const std::string& source) {
  if (config.is_null()) return Status();
  if (!config.is_object()) {
    return invalid_argument(source + ": tokenizer_config.json is not a JSON object");
  }
  bos_token_ = token_string_field(config, "bos_token");
  eos_token_ = token_string_field(config, "eos_token");
  if (!bos_token_.empty()) bos_id_ = token_to_id(bos_token_);
  if (!eos_token_.empty()) eos_id_ = token_to_id(eos_token_);
  add_bos_token_ = bool_field(config, "add_bos_token");
  add_eos_token_ = bool_field(config, "add_eos_token");
  return Status();
}

void Tokenizer::tokenize_normalized(std::string_view text, bool at_start,
                                    std::vector<int32_t>& ids) const {
  std::vector<std::string_view> words;
  words.reserve(text.size() / 4 + 1);
  std::deque<std::string> arena;
  pre_tokenizer_.split(text, at_start, words, arena);
  for (std::string_view w : words) model_.tokenize(w, ids);
}

void Tokenizer::encode_segment(std::string_view text, bool at_start,
                               std::vector<int32_t>& ids) const {
  if (normalizer_.empty()) {
    tokenize_normalized(text, at_start, ids);
    return;
  }
  std::string normalized = normalizer_.apply(text);
  if (!added_.has_normalized_tokens()) {
    tokenize_normalized(normalized, at_start, ids);
    return;
  }
  std::vector<Segment> segments;
  added_.split(normalized, /*normalized=*/true, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) ids.push_back(s.id);
    else tokenize_normalized(s.text, at_start && s.offset == 0, ids);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  added_.split(text, /*normalized=*/false, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) ids.push_back(s.id);
    else encode_segment(s.text, s.offset == 0, ids);
  }
  if (add_special_tokens) return post_processor_.apply(std::move(ids));
  return ids;
}

const std::string* Tokenizer::token_string(int32_t id) const {
  if (const AddedToken* a = added_.find_by_id(id)) return &a->content;
  return model_.id_to_token(id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    if (const std::string* s = token_string(id)) tokens.push_back(*s);
  }
  return decoder_.decode(std::move(tokens));
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.find_by_content(token)) return id;
  return model_.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* s = token_string(id);
  return s ? *s : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* a = added_.find_by_id(id);
  return a != nullptr && a->special;
}

}  // namespace folio
