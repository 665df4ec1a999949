// folio render-chat: renders chat turns with the model's chat template, as transformers'
// apply_chat_template(tokenize=True) does: {"messages", "add_generation_prompt",
// "chat_template_kwargs"?} lines in, {"text", "ids"} lines out (ids without added special
// tokens: the template writes them). A bad line or a template that raises gets {"error"}.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace folio::tools {
namespace {

using nlohmann::ordered_json;

struct RenderFlags {
  std::string model, input, output, chat_template;
};

Result<ChatTemplate> load_template(const RenderFlags& f) {
  if (!f.chat_template.empty()) {
    FOLIO_ASSIGN_OR_RETURN(std::string src, read_file(f.chat_template));
    return ChatTemplate::parse(src);
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<ChatTemplate> t, ChatTemplate::from_model_dir(f.model));
  if (!t)
    return not_found(f.model +
                     ": no chat template (chat_template.jinja, or chat_template in "
                     "tokenizer_config.json); pass --chat-template FILE");
  return std::move(*t);
}

// One line: the rendered text and its ids, or the reason it failed.
ordered_json render_line(const std::string& line, const ChatTemplate& tmpl, const Tokenizer& tok) {
  ordered_json in = ordered_json::parse(line, nullptr, false);
  if (in.is_discarded() || !in.is_object()) return {{"error", "line is not a JSON object"}};
  if (!in.contains("messages") || !in["messages"].is_array() || in["messages"].empty())
    return {{"error", "\"messages\" must be a non-empty list"}};
  bool add_gen = false;
  if (in.contains("add_generation_prompt")) {
    if (!in["add_generation_prompt"].is_boolean())
      return {{"error", "\"add_generation_prompt\" must be a boolean"}};
    add_gen = in["add_generation_prompt"].get<bool>();
  }
  ordered_json kwargs = ordered_json::object();
  if (in.contains("chat_template_kwargs")) {
    if (!in["chat_template_kwargs"].is_object())
      return {{"error", "\"chat_template_kwargs\" must be an object"}};
    kwargs = in["chat_template_kwargs"];
  }
  auto text = tmpl.render(in["messages"], add_gen, kwargs, tok.bos_token(), tok.eos_token());
  if (!text.ok()) return {{"error", text.status().message()}};
  return {{"text", *text}, {"ids", tok.encode(*text, /*add_special_tokens=*/false)}};
}

int run_render(const RenderFlags& f) {
  auto tok = Tokenizer::load(f.model);
  if (!tok.ok()) {
    std::cerr << "folio render-chat: " << tok.status().message() << "\n";
    return 2;
  }
  auto tmpl = load_template(f);
  if (!tmpl.ok()) {
    std::cerr << "folio render-chat: " << tmpl.status().message() << "\n";
    return 2;
  }
  std::ifstream in_file;
  std::istream* in = &std::cin;
  if (!f.input.empty() && f.input != "-") {
    in_file.open(f.input);
    if (!in_file) {
      std::cerr << "folio render-chat: cannot open --input " << f.input << "\n";
      return 2;
    }
    in = &in_file;
  }
  std::ofstream out_file;
  std::ostream* out = &std::cout;
  if (!f.output.empty() && f.output != "-") {
    out_file.open(f.output);
    out = &out_file;
  }
  std::string line;
  while (std::getline(*in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    *out << render_line(line, *tmpl, *tok)
                .dump(-1, ' ', false, ordered_json::error_handler_t::replace)
         << "\n";
  }
  return 0;
}

}  // namespace

void register_render_chat(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<RenderFlags>();
  auto* cmd = app.add_subcommand("render-chat", "Render chat turns with the model's template");
  cmd->add_option("--model", f->model, "model folder (tokenizer files suffice)")->required();
  cmd->add_option("--input", f->input, "JSONL chat turns (default stdin)");
  cmd->add_option("--output", f->output, "JSONL {text, ids} (default stdout)");
  cmd->add_option("--chat-template", f->chat_template, "a Jinja template file instead");
  cmd->callback([f, &exit_code] { exit_code = run_render(*f); });
}

}  // namespace folio::tools
