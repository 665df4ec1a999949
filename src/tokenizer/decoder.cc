#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace folio {

int Decoder::parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

Status Decoder::add_steps(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return invalid_argument("decoder must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  Step s;
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) {
      return invalid_argument("Sequence decoder without a \"decoders\" array");
    }
    for (const auto& sub : j["decoders"]) FOLIO_RETURN_IF_ERROR(add_steps(sub));
    return Status();
  } else if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    if (!j.contains("pattern") || !j.contains("content") || !j["content"].is_string()) {
      return invalid_argument("Replace decoder needs \"pattern\" and \"content\"");
    }
    FOLIO_ASSIGN_OR_RETURN(s.pattern, load_pattern(j["pattern"]));
    if (j["pattern"].contains("String")) s.literal = j["pattern"]["String"].get<std::string>();
    s.content = j["content"].get<std::string>();
  } else if (type == "ByteFallback") {
    s.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = Kind::kFuse;
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.content = j.value("content", std::string(" "));
    size_t pos = 0;
    if (s.content.empty() || !is_valid_utf8(s.content)) {
      return invalid_argument("Strip decoder \"content\" must be one character");
    }
    s.strip_char = next_codepoint(s.content, pos);
    if (pos != s.content.size()) return invalid_argument("Strip decoder \"content\" must be one character");
    s.start = j.value("start", 0);
    s.stop = j.value("stop", 0);
    if (s.start < 0 || s.stop < 0) return invalid_argument("Strip decoder start/stop must be >= 0");
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    std::string scheme = j.value("prepend_scheme", std::string());
    s.prepend = scheme.empty() ? j.value("add_prefix_space", true) : scheme != "never";
  } else {
    return unimplemented("decoder type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(s));
  return Status();
}

Status Decoder::check_streamable() const {
  // Streaming passes text through the steps in fragments once a step fuses tokens or may hold
  // a token's tail back; steps that must see whole tokens are rejected after that point.
  bool whole_tokens = true;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::kByteFallback:
        if (!whole_tokens) return unimplemented("decoder ByteFallback after Fuse/ByteLevel/Strip");
        break;
      case Kind::kReplace: {
        size_t pos = 0;
        bool one_char = !s.literal.empty() && (next_codepoint(s.literal, pos), pos == s.literal.size());
        if (!whole_tokens && !one_char) {
          return unimplemented("decoder Replace of a multi-character or regex pattern after Fuse");
        }
        break;
      }
      case Kind::kFuse:
      case Kind::kByteLevel:
        whole_tokens = false;
        break;
      case Kind::kStrip:
        if (s.stop > 0) whole_tokens = false;
        break;
      default:
        break;
    }
  }
  return Status();
}

Result<Decoder> Decoder::from_json(const nlohmann::json& j) {
  Decoder d;
  if (j.is_null()) {
    Step join;
    join.kind = Kind::kJoinSpace;
    d.steps_.push_back(std::move(join));
    return d;
  }
  FOLIO_RETURN_IF_ERROR(d.add_steps(j));
  FOLIO_RETURN_IF_ERROR(d.check_streamable());
  return d;
}

void Decoder::apply(const Step& s, std::vector<std::string>& tokens) {
  switch (s.kind) {
    case Kind::kByteLevel: {
      // Each token maps back to bytes (a token outside the alphabet keeps its own bytes), then
      // the whole byte string is read as UTF-8, lossily.
      std::string bytes;
      for (const std::string& t : tokens) {
        std::optional<std::string> raw = byte_level_to_bytes(t);
        bytes += raw ? *raw : t;
      }
      tokens.assign(1, utf8_lossy(bytes));
      break;
    }
    case Kind::kReplace:
      for (std::string& t : tokens) t = s.pattern.replace_all(t, s.content);
      break;
    case Kind::kByteFallback: {
      std::vector<std::string> out;
      std::string run;
      auto flush = [&] {
        if (run.empty()) return;
        if (is_valid_utf8(run)) out.push_back(run);
        else out.insert(out.end(), run.size(), std::string(kReplacementChar));
        run.clear();
      };
      for (std::string& t : tokens) {
        int b = parse_byte_token(t);
        if (b >= 0) {
          run.push_back(static_cast<char>(b));
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      tokens = std::move(out);
      break;
    }
    case Kind::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case Kind::kStrip:
      for (std::string& t : tokens) {
        std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
        for (size_t pos = 0; pos < t.size();) {
          size_t at = pos;
          chars.emplace_back(at, next_codepoint(t, pos));
        }
        size_t b = 0, e = chars.size();
        while (b < chars.size() && b < static_cast<size_t>(s.start) && chars[b].second == s.strip_char) ++b;
        for (int k = 0; k < s.stop && e > b && chars[e - 1].second == s.strip_char; ++k) --e;
        size_t from = b < chars.size() ? chars[b].first : t.size();
        size_t to = e < chars.size() ? chars[e].first : t.size();
        t = t.substr(from, to - from);
      }
      break;
    case Kind::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string out;
        std::string_view t = tokens[i];
        for (size_t pos = 0; pos < t.size();) {
          if (t.compare(pos, s.replacement.size(), s.replacement) == 0) {
            if (!(i == 0 && s.prepend)) out.push_back(' ');
            pos += s.replacement.size();
          } else {
            out.push_back(t[pos++]);
          }
        }
        tokens[i] = std::move(out);
      }
      break;
    case Kind::kJoinSpace: {
      std::string all;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) all.push_back(' ');
        all += tokens[i];
      }
      tokens.assign(1, std::move(all));
      break;
    }
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step& s : steps_) apply(s, tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace folio
