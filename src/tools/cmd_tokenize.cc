// `folio tokenize` and `folio detokenize`: JSONL in, JSONL out, one output line per non-blank
// input line (an "id" field, when present, is copied through to help align results).
//   tokenize:   {"text": "..."}  ->  {"ids": [...]}
//   detokenize: {"ids": [...]}   ->  {"text": "..."}
// A malformed line yields {"error": "..."} and processing continues. A model directory without
// a usable tokenizer, or an unreadable --input / unwritable --output, is bad input: one line on
// stderr and exit code 2.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace folio::tools {
namespace {

struct LineOptions {
  std::string model_dir, input, output;
  bool flag = false;  // --add-special-tokens / --skip-special-tokens
};

using LineFn = nlohmann::json (*)(const Tokenizer&, const nlohmann::json&, bool);

nlohmann::json tokenize_line(const Tokenizer& tok, const nlohmann::json& in, bool add_special) {
  if (!in.contains("text") || !in["text"].is_string()) {
    return {{"error", "expected an object with a string field \"text\""}};
  }
  return {{"ids", tok.encode(in["text"].get_ref<const std::string&>(), add_special)}};
}

nlohmann::json detokenize_line(const Tokenizer& tok, const nlohmann::json& in, bool skip) {
  if (!in.contains("ids") || !in["ids"].is_array()) {
    return {{"error", "expected an object with an array field \"ids\""}};
  }
  std::vector<int32_t> ids;
  ids.reserve(in["ids"].size());
  for (const auto& v : in["ids"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return {{"error", "\"ids\" must hold non-negative integers, got " + v.dump()}};
    }
    ids.push_back(v.get<int32_t>());
  }
  return {{"text", tok.decode(ids, skip)}};
}

int run(const char* name, const LineOptions& o, LineFn fn) {
  auto tok = Tokenizer::load(o.model_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "folio %s: %s\n", name, tok.status().to_string().c_str());
    return 2;
  }
  std::ifstream fin;
  std::istream* in = &std::cin;
  if (!o.input.empty()) {
    fin.open(o.input, std::ios::binary);
    if (!fin) {
      std::fprintf(stderr, "folio %s: cannot open --input %s\n", name, o.input.c_str());
      return 2;
    }
    in = &fin;
  }
  std::ofstream fout;
  std::ostream* out = &std::cout;
  if (!o.output.empty()) {
    fout.open(o.output, std::ios::binary | std::ios::trunc);
    if (!fout) {
      std::fprintf(stderr, "folio %s: cannot open --output %s\n", name, o.output.c_str());
      return 2;
    }
    out = &fout;
  }
  std::string line;
  while (std::getline(*in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    nlohmann::json result;
    if (j.is_discarded() || !j.is_object()) {
      result = {{"error", "line is not a JSON object"}};
    } else {
      result = fn(*tok, j, o.flag);
      if (j.contains("id")) result["id"] = j["id"];
    }
    *out << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  out->flush();
  if (!*out) {
    std::fprintf(stderr, "folio %s: failed writing the output\n", name);
    return 1;
  }
  return 0;
}

void add_common(CLI::App* cmd, LineOptions& o) {
  cmd->add_option("--model", o.model_dir, "Directory holding tokenizer.json (and tokenizer_config.json)")
      ->required();
  cmd->add_option("--input", o.input, "JSONL input file (default: stdin)");
  cmd->add_option("--output", o.output, "JSONL output file (default: stdout)");
}

}  // namespace

void register_tokenize(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<LineOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Encode JSONL {\"text\"} lines into {\"ids\"} lines");
  add_common(cmd, *opts);
  cmd->add_flag("--add-special-tokens", opts->flag, "Apply the post-processor (e.g. BOS)");
  cmd->callback([opts, &exit_code] { exit_code = run("tokenize", *opts, &tokenize_line); });
}

void register_detokenize(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<LineOptions>();
  auto* cmd = app.add_subcommand("detokenize", "Decode JSONL {\"ids\"} lines into {\"text\"} lines");
  add_common(cmd, *opts);
  cmd->add_flag("--skip-special-tokens", opts->flag, "Drop special tokens from the text");
  cmd->callback([opts, &exit_code] { exit_code = run("detokenize", *opts, &detokenize_line); });
}

}  // namespace folio::tools
