#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/normalizer.h"

namespace folio {
namespace {

// GPT-2's pre-tokenization regex, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct Span {
  size_t b, e;
  bool match;
};

}  // namespace

Status PreTokenizer::add_steps(const nlohmann::json& j) {
  if (j.is_null()) return Status();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return invalid_argument("pre_tokenizer must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  Step s;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return invalid_argument("Sequence pre_tokenizer without a \"pretokenizers\" array");
    }
    for (const auto& sub : j["pretokenizers"]) FOLIO_RETURN_IF_ERROR(add_steps(sub));
    return Status();
  } else if (type == "Split") {
    if (!j.contains("pattern")) return invalid_argument("Split pre_tokenizer without \"pattern\"");
    FOLIO_ASSIGN_OR_RETURN(s.pattern, load_pattern(j["pattern"]));
    const std::string b = j.value("behavior", std::string("Isolated"));
    if (b == "Removed") s.behavior = Behavior::kRemoved;
    else if (b == "Isolated") s.behavior = Behavior::kIsolated;
    else if (b == "MergedWithPrevious") s.behavior = Behavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") s.behavior = Behavior::kMergedWithNext;
    else if (b == "Contiguous") s.behavior = Behavior::kContiguous;
    else return invalid_argument("Split pre_tokenizer: unknown behavior \"" + b + "\"");
    s.invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    byte_level_ = true;
    if (j.value("add_prefix_space", false)) {
      Step p;
      p.kind = Kind::kPrefixSpace;
      steps_.push_back(std::move(p));
    }
    if (!j.value("use_regex", true)) return Status();
    FOLIO_ASSIGN_OR_RETURN(s.pattern, Regex::compile(kGpt2Pattern));
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspaceReplace;
    s.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    std::string scheme = j.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    s.prepend = scheme == "never" ? 0 : scheme == "first" ? 1 : 2;
    steps_.push_back(s);
    if (!j.value("split", true)) return Status();
    Step sp;
    FOLIO_ASSIGN_OR_RETURN(sp.pattern, Regex::literal(s.replacement));
    sp.behavior = Behavior::kMergedWithNext;
    s = std::move(sp);
  } else if (type == "Digits") {
    bool individual = j.value("individual_digits", false);
    FOLIO_ASSIGN_OR_RETURN(s.pattern, Regex::compile("\\p{N}"));
    s.behavior = individual ? Behavior::kIsolated : Behavior::kContiguous;
  } else if (type == "Whitespace") {
    FOLIO_ASSIGN_OR_RETURN(s.pattern, Regex::compile("\\w+|[^\\w\\s]+"));
    s.behavior = Behavior::kRemoved;
    s.invert = true;
  } else if (type == "WhitespaceSplit") {
    FOLIO_ASSIGN_OR_RETURN(s.pattern, Regex::compile("\\s+"));
    s.behavior = Behavior::kRemoved;
  } else {
    return unimplemented("pre_tokenizer type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(s));
  return Status();
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  FOLIO_RETURN_IF_ERROR(p.add_steps(j));
  return p;
}

void PreTokenizer::apply_split(const Step& s, std::string_view piece,
                               std::vector<std::string_view>& out) {
  // Cover the piece with alternating gap / match spans (HF's find_matches), then apply the
  // delimiter behavior.
  thread_local std::vector<Span> spans;
  spans.clear();
  size_t last = 0;
  s.pattern.for_each_match(piece, [&](size_t b, size_t e) {
    if (b > last) spans.push_back({last, b, false});
    spans.push_back({b, e, true});
    last = e;
  });
  if (last < piece.size()) spans.push_back({last, piece.size(), false});
  if (s.invert) {
    for (Span& sp : spans) sp.match = !sp.match;
  }
  auto emit = [&](size_t b, size_t e) { out.push_back(piece.substr(b, e - b)); };
  switch (s.behavior) {
    case Behavior::kIsolated:
      for (const Span& sp : spans) emit(sp.b, sp.e);
      break;
    case Behavior::kRemoved:
      for (const Span& sp : spans) {
        if (!sp.match) emit(sp.b, sp.e);
      }
      break;
    case Behavior::kContiguous:
    case Behavior::kMergedWithPrevious: {
      // Contiguous merges runs of matches; MergedWithPrevious glues a match onto the gap before.
      bool contiguous = s.behavior == Behavior::kContiguous;
      size_t first = out.size();
      bool prev_match = false;
      for (const Span& sp : spans) {
        bool glue = contiguous ? (sp.match && prev_match) : (sp.match && !prev_match);
        if (glue && out.size() > first) {
          std::string_view& p = out.back();
          p = std::string_view(p.data(), p.size() + (sp.e - sp.b));
        } else {
          emit(sp.b, sp.e);
        }
        prev_match = sp.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool pending = false;  // a match waiting to be glued onto the next span
      size_t start = 0;
      for (const Span& sp : spans) {
        if (pending && !sp.match) {
          emit(start, sp.e);
          pending = false;
        } else {
          if (pending) emit(start, sp.b);
          if (sp.match) {
            pending = true;
            start = sp.b;
          } else {
            emit(sp.b, sp.e);
          }
        }
      }
      if (pending) emit(start, piece.size());
      break;
    }
  }
}

void PreTokenizer::split(std::string_view text, bool at_start, std::vector<std::string_view>& out,
                         std::deque<std::string>& arena) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    out.push_back(text);
    return;
  }
  thread_local std::vector<std::string_view> cur, next;
  cur.assign(1, text);
  for (const Step& s : steps_) {
    next.clear();
    for (size_t i = 0; i < cur.size(); ++i) {
      std::string_view piece = cur[i];
      if (s.kind == Kind::kPrefixSpace) {
        if (!piece.empty() && piece.front() == ' ') {
          next.push_back(piece);
        } else {
          std::string& with_space = arena.emplace_back();
          with_space.reserve(piece.size() + 1);
          with_space.push_back(' ');
          with_space.append(piece);
          next.push_back(with_space);
        }
      } else if (s.kind == Kind::kMetaspaceReplace) {
        std::string r;
        for (char c : piece) {
          if (c == ' ') r += s.replacement;
          else r.push_back(c);
        }
        bool first = at_start && i == 0;
        bool starts = r.compare(0, s.replacement.size(), s.replacement) == 0;
        if (!starts && (s.prepend == 2 || (s.prepend == 1 && first))) r.insert(0, s.replacement);
        next.push_back(arena.emplace_back(std::move(r)));
      } else {
        apply_split(s, piece, next);
      }
    }
    std::swap(cur, next);
  }
  for (std::string_view p : cur) {
    if (!p.empty()) out.push_back(p);
  }
}

}  // namespace folio
