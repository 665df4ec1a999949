// Tokenizer: a Hugging Face tokenizer.json (BPE models: byte-level as in GPT-2 / Llama 3 / Qwen,
// or SentencePiece-style with byte fallback as in Llama 2 / Mistral) that encodes and decodes
// byte-exactly like HF `tokenizers`.
//
// encode: added tokens are cut out of the raw text first, the rest is normalized,
// pre-tokenized into words and each word BPE-merged; add_special_tokens applies the
// tokenizer.json post_processor (e.g. Llama 2's BOS). Input that is not valid UTF-8 is read
// lossily (each invalid subpart becomes U+FFFD) first, since HF only accepts valid strings.
// decode: ids outside the vocabulary are dropped, special added tokens too when asked, then the
// decoder chain runs. tokenizer_config.json supplies bos/eos token strings and add_bos/eos
// flags for callers (the engine, chat templates); encode itself follows tokenizer.json only.
//
// Thread contract: after load(), every method is const and safe to call from many threads at
// once (the word cache inside is internally locked). Move-only; IncrementalDetokenizer keeps a
// reference, so a Tokenizer in use by one must stay put.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace folio {

class Tokenizer {
 public:
  // Reads `model_dir`/tokenizer.json (required) and `model_dir`/tokenizer_config.json (optional).
  // Errors name the file and the problem (missing, not JSON, unsupported type, bad field).
  static Result<Tokenizer> load(const std::string& model_dir);
  // Same from already parsed JSON (`config` may be null); `source` names them in errors.
  static Result<Tokenizer> from_json(const nlohmann::json& tokenizer_json,
                                     const nlohmann::json& config, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Model vocabulary plus added tokens: one past the largest id.
  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string in the vocabulary's own spelling; "" for an unknown id.
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;

  const std::string& bos_token() const { return bos_token_; }  // "" when none
  const std::string& eos_token() const { return eos_token_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  // tokenizer_config.json's add_bos_token / add_eos_token, when present.
  std::optional<bool> add_bos_token() const { return add_bos_token_; }
  std::optional<bool> add_eos_token() const { return add_eos_token_; }

  // Pieces used by IncrementalDetokenizer.
  const Decoder& decoder() const { return decoder_; }
  // The string the decoder sees for `id` (nullptr: unknown id, dropped).
  const std::string* token_string(int32_t id) const;

 private:
  Tokenizer() = default;
  Status load_config(const nlohmann::json& config, const std::string& source);
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  void tokenize_normalized(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;

  AddedVocabulary added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  PostProcessor post_processor_;
  Decoder decoder_;
  int32_t vocab_size_ = 0;
  std::string bos_token_, eos_token_;
  std::optional<int32_t> bos_id_, eos_id_;
  std::optional<bool> add_bos_token_, add_eos_token_;
};

}  // namespace folio
