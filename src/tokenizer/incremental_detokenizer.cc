#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace folio {

using Kind = Decoder::Kind;

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {
  for (const Decoder::Step& step : tokenizer.decoder().steps()) {
    Stage s;
    s.step = &step;
    stages_.push_back(std::move(s));
  }
}

void IncrementalDetokenizer::prime(std::span<const int32_t> ids) {
  for (int32_t id : ids) step(id);
  out_.clear();
}

std::string IncrementalDetokenizer::step(int32_t id) {
  out_.clear();
  if (skip_special_ && tokenizer_.is_special(id)) return out_;
  const std::string* token = tokenizer_.token_string(id);
  if (token == nullptr) return out_;  // unknown ids are dropped, as decode() does
  push(0, *token, /*new_token=*/true);
  return std::move(out_);
}

std::string IncrementalDetokenizer::finish() {
  out_.clear();
  flush(0);
  return std::move(out_);
}

void IncrementalDetokenizer::emit_fused(size_t i, Stage& s, std::string_view text) {
  // Fuse and ByteLevel output a single token: only their first output starts it.
  bool first = !s.emitted;
  s.emitted = true;
  push(i + 1, text, first);
}

void IncrementalDetokenizer::push(size_t i, std::string_view text, bool new_token) {
  if (i == stages_.size()) {
    out_.append(text);
    return;
  }
  Stage& s = stages_[i];
  switch (s.step->kind) {
    case Kind::kByteLevel:
      push_byte_level(i, s, text);
      break;
    case Kind::kReplace:
      push(i + 1, s.step->pattern.replace_all(text, s.step->content), new_token);
      break;
    case Kind::kByteFallback:
      push_byte_fallback(i, s, text, new_token);
      break;
    case Kind::kFuse:
      emit_fused(i, s, text);
      break;
    case Kind::kStrip:
      push_strip(i, s, text, new_token);
      break;
    case Kind::kMetaspace:
      push_metaspace(i, s, text, new_token);
      break;
    case Kind::kJoinSpace:
      if (new_token && s.tokens_seen++ > 0) {
        std::string t = " ";
        t.append(text);
        emit_fused(i, s, t);
      } else {
        emit_fused(i, s, text);
      }
      break;
  }
}

void IncrementalDetokenizer::push_byte_level(size_t i, Stage& s, std::string_view text) {
  std::optional<std::string> raw = byte_level_to_bytes(text);
  s.pending.append(raw ? *raw : std::string(text));
  // Bytes before an incomplete trailing character decode the same whatever comes next.
  size_t complete = s.pending.size() - incomplete_utf8_tail(s.pending);
  if (complete == 0) return;
  std::string piece = utf8_lossy(std::string_view(s.pending).substr(0, complete));
  s.pending.erase(0, complete);
  emit_fused(i, s, piece);
}

void IncrementalDetokenizer::push_byte_fallback(size_t i, Stage& s, std::string_view text,
                                                bool new_token) {
  // HF decodes a whole run of <0xXX> tokens at once: valid UTF-8, or one U+FFFD per byte.
  int b = new_token ? Decoder::parse_byte_token(text) : -1;
  if (b >= 0) {
    s.pending.push_back(static_cast<char>(b));
    return;
  }
  release_byte_run(i, s);
  push(i + 1, text, new_token);
}

void IncrementalDetokenizer::release_byte_run(size_t i, Stage& s) {
  if (s.pending.empty()) return;
  std::string run = std::move(s.pending);
  s.pending.clear();
  if (is_valid_utf8(run)) {
    push(i + 1, run, true);
  } else {
    for (size_t k = 0; k < run.size(); ++k) push(i + 1, kReplacementChar, true);
  }
}

void IncrementalDetokenizer::push_strip(size_t i, Stage& s, std::string_view text,
                                        bool new_token) {
  const Decoder::Step& st = *s.step;
  if (new_token) {
    // The previous token ended: its held trailing characters are stripped for good.
    s.held.clear();
    s.held_chars = 0;
    s.leading_left = st.start;
  }
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    size_t at = pos;
    char32_t cp = next_codepoint(text, pos);
    std::string_view ch = text.substr(at, pos - at);
    if (cp == st.strip_char && s.leading_left > 0) {
      --s.leading_left;
      continue;
    }
    s.leading_left = 0;
    if (cp == st.strip_char && st.stop > 0) {
      s.held.append(ch);
      if (++s.held_chars > st.stop) {
        // Only the last `stop` of a run can be stripped: release the oldest.
        size_t first_len = s.held.size() / static_cast<size_t>(s.held_chars);
        out.append(s.held, 0, first_len);
        s.held.erase(0, first_len);
        --s.held_chars;
      }
      continue;
    }
    out += s.held;
    s.held.clear();
    s.held_chars = 0;
    out.append(ch);
  }
  push(i + 1, out, new_token);
}

void IncrementalDetokenizer::push_metaspace(size_t i, Stage& s, std::string_view text,
                                            bool new_token) {
  if (new_token) ++s.tokens_seen;
  const Decoder::Step& st = *s.step;
  bool drop = s.tokens_seen == 1 && st.prepend;  // replacements in the first token vanish
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, st.replacement.size(), st.replacement) == 0) {
      if (!drop) out.push_back(' ');
      pos += st.replacement.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  push(i + 1, out, new_token);
}

void IncrementalDetokenizer::flush(size_t i) {
  if (i == stages_.size()) return;
  Stage& s = stages_[i];
  switch (s.step->kind) {
    case Kind::kByteLevel:
      if (!s.pending.empty()) {
        std::string piece = utf8_lossy(s.pending);
        s.pending.clear();
        emit_fused(i, s, piece);
      }
      break;
    case Kind::kByteFallback:
      release_byte_run(i, s);
      break;
    case Kind::kStrip:
      s.held.clear();  // trailing characters of the last token: stripped
      s.held_chars = 0;
      break;
    default:
      break;
  }
  flush(i + 1);
}

}  // namespace folio
