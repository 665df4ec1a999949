#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace folio {
namespace {

// One symbol of the word being merged: a doubly linked list over an array. `len` is the number
// of bytes of the word it covers; 0 marks a symbol merged into its left neighbour.
struct Symbol {
  int32_t id;
  int32_t prev, next;
  int32_t len;
};

struct Candidate {
  int32_t rank, pos, new_id;
  // std::priority_queue is a max-heap: invert so the lowest rank, then leftmost, comes first.
  bool operator<(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

// Scratch space reused by every word merged on this thread.
struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap_storage;
};
thread_local Scratch scratch;

}  // namespace

void BpeModel::MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, ~uint64_t{0});
  values_.assign(cap, Merge{0, 0});
  mask_ = cap - 1;
}

void BpeModel::MergeMap::insert(int32_t a, int32_t b, Merge m) {
  uint64_t k = key(a, b);
  size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;
  while (keys_[i] != ~uint64_t{0} && keys_[i] != k) i = (i + 1) & mask_;
  keys_[i] = k;
  values_[i] = m;  // a duplicated merge line keeps the later rank, as HF's HashMap collect does
}

const BpeModel::Merge* BpeModel::MergeMap::find(int32_t a, int32_t b) const {
  if (keys_.empty()) return nullptr;
  uint64_t k = key(a, b);
  size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;
  while (true) {
    if (keys_[i] == k) return &values_[i];
    if (keys_[i] == ~uint64_t{0}) return nullptr;
    i = (i + 1) & mask_;
  }
}

Status BpeModel::load_vocab(const nlohmann::json& vocab) {
  if (!vocab.is_object()) return invalid_argument("model.vocab must be an object");
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > (1 << 30)) {
      return invalid_argument("model.vocab[\"" + it.key() + "\"] is not a valid id");
    }
    max_id = std::max(max_id, it.value().get<int32_t>());
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    int32_t id = it.value().get<int32_t>();
    id_to_token_[id] = it.key();
    if (byte_level_) {
      std::optional<std::string> raw = byte_level_to_bytes(it.key());
      if (raw) vocab_.emplace(std::move(*raw), id);
      else unmapped_.emplace(it.key(), id);
    } else {
      vocab_.emplace(it.key(), id);
    }
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    std::string key = byte_level_ ? std::string(1, static_cast<char>(b)) : std::string(name);
    if (auto id = lookup(key)) byte_ids_[b] = *id;
  }
  return Status();
}

Status BpeModel::load_merges(const nlohmann::json& merges) {
  if (!merges.is_array()) return invalid_argument("model.merges must be an array");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      // "a b": HF splits on the single space; a token never contains one in this form.
      const std::string& line = m.get_ref<const std::string&>();
      size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
        return invalid_argument("model.merges[" + std::to_string(rank) + "] \"" + line +
                                "\" is not two tokens separated by a space");
      }
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return invalid_argument("model.merges[" + std::to_string(rank) + "] has a bad format");
    }
    auto ia = token_to_id(a), ib = token_to_id(b), inew = token_to_id(a + b);
    if (!ia || !ib || !inew) {
      return invalid_argument("model.merges[" + std::to_string(rank) + "] (\"" + a + "\", \"" +
                              b + "\") uses a token missing from the vocabulary");
    }
    merges_.insert(*ia, *ib, Merge{rank, *inew});
    ++rank;
  }
  return Status();
}

Result<BpeModel> BpeModel::from_json(const nlohmann::json& model, bool byte_level) {
  if (!model.is_object()) return invalid_argument("\"model\" must be an object");
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") return unimplemented("model type \"" + type + "\" is not supported (BPE only)");
  auto str_or_empty = [&](const char* key) {
    return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : "";
  };
  if (!str_or_empty("continuing_subword_prefix").empty() ||
      !str_or_empty("end_of_word_suffix").empty()) {
    return unimplemented("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0.0) {
    return unimplemented("BPE dropout is not supported");
  }
  BpeModel m;
  m.byte_level_ = byte_level;
  auto flag = [&](const char* key) {
    return model.contains(key) && model[key].is_boolean() && model[key].get<bool>();
  };
  m.byte_fallback_ = flag("byte_fallback");
  m.fuse_unk_ = flag("fuse_unk");
  m.ignore_merges_ = flag("ignore_merges");
  if (!model.contains("vocab")) return invalid_argument("model has no \"vocab\"");
  FOLIO_RETURN_IF_ERROR(m.load_vocab(model["vocab"]));
  if (!model.contains("merges")) return invalid_argument("model has no \"merges\"");
  FOLIO_RETURN_IF_ERROR(m.load_merges(model["merges"]));
  std::string unk = str_or_empty("unk_token");
  if (!unk.empty()) {
    auto id = m.token_to_id(unk);
    if (!id) return invalid_argument("model.unk_token \"" + unk + "\" is not in the vocabulary");
    m.unk_id_ = *id;
  }
  m.cache_ = std::make_unique<WordCache>();
  return m;
}

std::optional<int32_t> BpeModel::lookup(std::string_view model_spelling) const {
  auto it = vocab_.find(model_spelling);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  if (!byte_level_) return lookup(token);
  if (auto raw = byte_level_to_bytes(token)) {
    if (auto id = lookup(*raw)) return id;
  }
  auto it = unmapped_.find(token);
  if (it == unmapped_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || id_to_token_[id].empty()) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view word) const {
  std::vector<Symbol>& syms = scratch.symbols;
  syms.clear();
  auto push = [&](int32_t id, int32_t len) {
    int32_t n = static_cast<int32_t>(syms.size());
    syms.push_back(Symbol{id, n - 1, n + 1, len});
  };
  auto push_unk = [&](int32_t len) {
    if (unk_id_ < 0) return;  // no unk token: the character is dropped
    if (fuse_unk_ && !syms.empty() && syms.back().id == unk_id_) {
      syms.back().len += len;
    } else {
      push(unk_id_, len);
    }
  };
  if (byte_level_) {
    for (char c : word) {
      int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) push(id, 1);
      else push_unk(1);
    }
  } else {
    size_t pos = 0;
    while (pos < word.size()) {
      size_t len = std::max<size_t>(1, utf8_valid_char_len(word, pos));
      std::string_view ch = word.substr(pos, len);
      if (auto id = lookup(ch)) {
        push(*id, static_cast<int32_t>(len));
      } else if (byte_fallback_ &&
                 std::all_of(ch.begin(), ch.end(),
                             [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; })) {
        for (char c : ch) push(byte_ids_[static_cast<uint8_t>(c)], 1);
      } else {
        push_unk(static_cast<int32_t>(len));
      }
      pos += len;
    }
  }
  if (!syms.empty()) syms.back().next = -1;
}

void BpeModel::merge_symbols() const {
  std::vector<Symbol>& syms = scratch.symbols;
  if (syms.size() < 2) return;
  scratch.heap_storage.clear();
  std::priority_queue<Candidate> heap(std::less<Candidate>(), std::move(scratch.heap_storage));
  auto consider = [&](int32_t pos) {
    int32_t nxt = syms[pos].next;
    if (nxt < 0) return;
    if (const Merge* m = merges_.find(syms[pos].id, syms[nxt].id)) {
      heap.push(Candidate{m->rank, pos, m->new_id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) consider(i);
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    Symbol& left = syms[top.pos];
    if (left.len == 0 || left.next < 0) continue;  // merged away or now last
    Symbol& right = syms[left.next];
    const Merge* m = merges_.find(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale candidate
    left.id = top.new_id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = lookup(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (cache_->lookup(word, out)) return;
  initial_symbols(word);
  merge_symbols();
  size_t first = out.size();
  for (const Symbol& s : scratch.symbols) {
    if (s.len > 0) out.push_back(s.id);
  }
  cache_->insert(word, out.data() + first, out.size() - first);
}

}  // namespace folio
