// The tokenizer.json "model" of type BPE: vocabulary, merges ranked by their position in the
// file, and the merge loop that turns one pre-tokenized word into token ids.
//
// Two alphabets: a byte-level model (a ByteLevel pre-tokenizer is present) has its vocabulary
// translated from the GPT-2 byte alphabet to raw bytes at load time, so a word's initial symbols
// are its bytes; otherwise (SentencePiece style) they are its UTF-8 characters, with
// `byte_fallback` to <0xXX> tokens and `unk_token` (optionally fused) for unknown characters.
// The merge loop always applies the lowest-ranked adjacent pair first, leftmost on ties, exactly
// as HF `tokenizers` does. Thread-safe: the only mutable state is the internally locked cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/word_cache.h"

namespace folio {

class BpeModel {
 public:
  // `model` is the tokenizer.json "model" object; `byte_level` selects the byte alphabet.
  static Result<BpeModel> from_json(const nlohmann::json& model, bool byte_level);

  // Appends the ids of one word (bytes of valid UTF-8) to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  // Lookups in the vocabulary's own spelling (e.g. "Ġhello" for byte-level models).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string, or nullptr for an id outside the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // Open-addressing map from a pair of ids to its merge; read-only after load.
  class MergeMap {
   public:
    void reserve(size_t n);
    void insert(int32_t a, int32_t b, Merge m);
    const Merge* find(int32_t a, int32_t b) const;

   private:
    static uint64_t key(int32_t a, int32_t b) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    size_t mask_ = 0;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, Hash, std::equal_to<>>;

  Status load_vocab(const nlohmann::json& vocab);
  Status load_merges(const nlohmann::json& merges);
  std::optional<int32_t> lookup(std::string_view model_spelling) const;
  // Fill / merge the calling thread's symbol buffer (see bpe_model.cc).
  void initial_symbols(std::string_view word) const;
  void merge_symbols() const;

  std::vector<std::string> id_to_token_;
  Vocab vocab_;       // keys in the model alphabet (raw bytes when byte_level_)
  Vocab unmapped_;    // byte-level tokens outside the byte alphabet, by their own spelling
  std::array<int32_t, 256> byte_ids_{};  // byte_level_: single-byte tokens; else <0xXX> tokens
  MergeMap merges_;
  int32_t unk_id_ = -1;
  bool byte_level_ = false, byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace folio
