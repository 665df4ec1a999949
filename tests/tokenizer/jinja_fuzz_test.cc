// Randomized robustness harness (fixed seed, bounded time): random templates built from grammar
// fragments, mutated real chat templates, and random Unicode messages. Every case must end in a
// Status error or valid UTF-8 text, each render within a time bound, and never crash or hang.
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "tokenizer/chat_template.h"

namespace folio {
namespace {

// Independent UTF-8 validator (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  template <typename T>
  const T& one(const std::vector<T>& v) { return v[pick(v.size())]; }

  std::string expr(int depth) {
    static const std::vector<std::string> atoms = {
        "messages", "m", "m.role", "m.content", "m['content']", "x", "ns.v", "loop.index",
        "loop.last", "undefined_var", "tools", "add_generation_prompt", "bos_token", "1", "0",
        "-3", "2.5", "1e300", "'a'", "\"<|im_start|>\"", "'\\n'", "none", "true", "false",
        "[1, 'b', none]", "{'k': 1, 'j': [2]}", "range(3)", "range(100000)", "messages[0]",
        "messages[-1]", "messages[::-1]", "messages[1:]", "'é😀'", "9223372036854775807"};
    if (depth <= 0 || pick(3) == 0) return one(atoms);
    static const std::vector<std::string> binops = {
        " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " == ", " != ", " < ", " >= ",
        " and ", " or ", " in ", " not in "};
    static const std::vector<std::string> filters = {
        "trim", "length", "tojson", "tojson(indent=2)", "string", "upper", "title", "default('d')",
        "items", "first", "last", "join(', ')", "replace('a', 'b')", "list", "int", "float", "abs",
        "round(1)", "selectattr('role', 'equalto', 'user')", "map(attribute='content')",
        "indent(2)", "unique", "reverse", "sort", "e", "count", "sum", "max"};
    static const std::vector<std::string> tests = {
        "defined", "none", "string", "number", "mapping", "iterable", "even", "divisibleby 2",
        "equalto 1", "true", "sequence"};
    static const std::vector<std::string> methods = {
        ".strip()", ".split('a')", ".startswith('<')", ".upper()", ".replace('a', 'bb')",
        ".get('role')", ".items()", ".keys()", ".append(1)", ".format(1, 2)", ".lstrip('\\n')",
        ".title()", ".endswith(('a', 'b'))"};
    switch (pick(9)) {
      case 0: return expr(depth - 1) + one(binops) + expr(depth - 1);
      case 1: return expr(depth - 1) + " | " + one(filters);
      case 2: return expr(depth - 1) + " is " + (pick(2) ? "not " : "") + one(tests);
      case 3: return expr(depth - 1) + one(methods);
      case 4: return "(" + expr(depth - 1) + " if " + expr(depth - 1) + " else " + expr(depth - 1) + ")";
      case 5: return "not " + expr(depth - 1);
      case 6: return expr(depth - 1) + "[" + expr(depth - 1) + "]";
      case 7: return "[" + expr(depth - 1) + ", " + expr(depth - 1) + "]";
      default: return "f(" + expr(depth - 1) + ")";
    }
  }

  std::string open_tag() { return one(std::vector<std::string>{"{%", "{%-", "{%+"}); }
  std::string close_tag() { return one(std::vector<std::string>{"%}", "-%}", "+%}"}); }

  std::string stmt(int depth) {
    static const std::vector<std::string> texts = {
        "text", "\n", "  ", " \n  ", "<|im_end|>\n", "é", "\t", "{", "}", "%", "#"};
    if (depth <= 0) return one(texts);
    std::string body = stmt(depth - 1) + (pick(2) ? stmt(depth - 1) : "");
    switch (pick(11)) {
      case 0: return "{{" + one(std::vector<std::string>{"", "-"}) + " " + expr(2) + " " +
                     one(std::vector<std::string>{"", "-"}) + "}}";
      case 1: return open_tag() + " if " + expr(2) + " " + close_tag() + body +
                     (pick(2) ? "{% elif " + expr(1) + " %}" + stmt(depth - 1) : "") +
                     (pick(2) ? "{% else %}" + stmt(depth - 1) : "") + "{% endif %}";
      case 2: return open_tag() + " for m in " + expr(1) + (pick(3) ? "" : " if " + expr(1)) + " " +
                     close_tag() + body + (pick(4) ? "" : "{% else %}e") + "{% endfor %}";
      case 3: return "{% set x = " + expr(2) + " %}" + body;
      case 4: return "{% set ns = namespace(v=" + expr(1) + ") %}" + body + "{% set ns.v = " + expr(1) + " %}";
      case 5: return "{% macro f(a, b=" + expr(1) + ") %}" + body + (pick(3) ? "" : "{{ f(a) }}") +
                     "{% endmacro %}" + body;
      case 6: return "{# " + one(texts) + " #}" + body;
      case 7: return "{% raw %}" + body + "{% endraw %}";
      case 8: return "{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% if v %}{% break %}{% endif %}{% endfor %}";
      case 9: return "{{ raise_exception('boom') }}";
      default: return body + stmt(depth - 1);
    }
  }

  // Random code points from several ranges: ASCII, controls, Latin-1, CJK, emoji, combining.
  std::string unicode_text() {
    std::string s;
    size_t n = pick(24);
    for (size_t i = 0; i < n; ++i) {
      uint32_t cp;
      switch (pick(7)) {
        case 0: cp = static_cast<uint32_t>(pick(0x20)); break;
        case 1: cp = 0x20 + static_cast<uint32_t>(pick(0x5F)); break;
        case 2: cp = 0x80 + static_cast<uint32_t>(pick(0x780)); break;
        case 3: cp = 0x4E00 + static_cast<uint32_t>(pick(0x100)); break;
        case 4: cp = 0x1F600 + static_cast<uint32_t>(pick(0x50)); break;
        case 5: cp = 0x300 + static_cast<uint32_t>(pick(0x70)); break;
        default: {
          cp = static_cast<uint32_t>(pick(0x110000));
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        }
      }
      nlohmann::json::string_t one;
      if (cp < 0x80) one.push_back(static_cast<char>(cp));
      else if (cp < 0x800) { one += static_cast<char>(0xC0 | (cp >> 6)); one += static_cast<char>(0x80 | (cp & 0x3F)); }
      else if (cp < 0x10000) { one += static_cast<char>(0xE0 | (cp >> 12)); one += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); one += static_cast<char>(0x80 | (cp & 0x3F)); }
      else { one += static_cast<char>(0xF0 | (cp >> 18)); one += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)); one += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); one += static_cast<char>(0x80 | (cp & 0x3F)); }
      s += one;
    }
    if (pick(4) == 0) s = "<think>" + s + "</think>\n" + s;
    return s;
  }

  nlohmann::ordered_json messages() {
    static const std::vector<std::string> roles = {"system", "user", "assistant", "tool", "weird"};
    auto msgs = nlohmann::ordered_json::array();
    size_t n = pick(6);
    for (size_t i = 0; i < n; ++i) {
      nlohmann::ordered_json m = {{"role", one(roles)}, {"content", unicode_text()}};
      if (pick(5) == 0) m["content"] = nullptr;
      if (pick(6) == 0) {
        m["tool_calls"] = nlohmann::ordered_json::array(
            {{{"function", {{"name", unicode_text()}, {"arguments", {{"q", unicode_text()}, {"n", 1.5}}}}}}});
      }
      msgs.push_back(std::move(m));
    }
    return msgs;
  }

  // Deletes, duplicates or inserts a random chunk (mutating real templates).
  std::string mutate(std::string s) {
    static const std::vector<std::string> inserts = {"{%", "%}", "{{", "}}", "{#", "-", "(", "]", "'", "endfor", " if ", "|"};
    size_t edits = 1 + pick(3);
    for (size_t e = 0; e < edits && !s.empty(); ++e) {
      size_t at = pick(s.size());
      size_t len = std::min(s.size() - at, pick(16));
      switch (pick(3)) {
        case 0: s.erase(at, len); break;
        case 1: s.insert(at, s.substr(at, len)); break;
        default: s.insert(at, one(inserts)); break;
      }
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<std::string> real_templates() {
  std::vector<std::string> out;
  for (const char* name : {"llama3", "qwen3"}) {
    auto cfg = read_json_file(std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/" + name +
                              "/tokenizer_config.json");
    if (cfg.ok() && cfg->contains("chat_template") && (*cfg)["chat_template"].is_string()) {
      out.push_back((*cfg)["chat_template"].get<std::string>());
    }
  }
  out.push_back("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}");
  return out;
}

TEST(JinjaFuzz, RandomTemplatesAndMessagesNeverCrash) {
  Gen gen(0x5eedf0110ULL);
  std::vector<std::string> reals = real_templates();
  ChatTemplateOptions options;
  options.limits.max_steps = 200'000;
  options.limits.max_output_bytes = 64 << 10;
  options.clock = [] { return std::tm{}; };

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  int cases = 0, parsed = 0, rendered = 0, valid = 0;
  double worst_render_s = 0;
  for (; cases < 4000 && std::chrono::steady_clock::now() < deadline; ++cases) {
    std::string source = cases % 3 == 0 ? gen.mutate(gen.one(reals)) : gen.stmt(3);
    auto tmpl = ChatTemplate::parse(source, options);
    if (!tmpl.ok()) {
      EXPECT_FALSE(tmpl.status().message().empty());
      continue;
    }
    ++parsed;
    nlohmann::ordered_json kwargs = {{"enable_thinking", gen.pick(2) == 0}};
    if (gen.pick(3) == 0) kwargs["tools"] = nlohmann::ordered_json::array({{{"name", gen.unicode_text()}}});
    auto start = std::chrono::steady_clock::now();
    auto out = tmpl->render(gen.messages(), gen.pick(2) == 0, kwargs, "<s>", "</s>");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    worst_render_s = std::max(worst_render_s, secs);
    EXPECT_LT(secs, 1.0) << "slow render of: " << source;
    if (!out.ok()) {
      EXPECT_FALSE(out.status().message().empty());
      continue;
    }
    ++rendered;
    valid += valid_utf8(*out);
    EXPECT_TRUE(valid_utf8(*out)) << "invalid UTF-8 from: " << source;
    EXPECT_LE(out->size(), options.limits.max_output_bytes);
  }
  std::printf("jinja fuzz: %d cases, %d parsed, %d rendered (all valid UTF-8: %s), worst render %.1f ms\n",
              cases, parsed, rendered, valid == rendered ? "yes" : "no", worst_render_s * 1e3);
  // The generator must reach the evaluator, not only the parser's error paths.
  EXPECT_GT(parsed, cases / 4);
  EXPECT_GT(rendered, cases / 10);
}

}  // namespace
}  // namespace folio
