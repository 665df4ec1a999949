// ChatTemplate: renders a Hugging Face chat template (tokenizer_config.json's `chat_template`,
// Jinja) to the prompt text, byte-identical to transformers' apply_chat_template.
//
// The template sees what transformers passes: `messages`, `tools` and `documents` (None unless
// given in extra_kwargs), `add_generation_prompt`, `bos_token`/`eos_token` (left undefined when
// empty, as transformers leaves unset special tokens out), then every key of extra_kwargs (e.g.
// enable_thinking, tools), which override the rest. Rendering is bounded (steps, output size,
// recursion; see jinja::Limits): a hostile template yields an error, never a hang or crash.
// Immutable after parse; render may be called from several threads at once.
//
// Key order: nlohmann::json sorts object keys, Python keeps insertion order. Use the
// ordered_json overload when the template serializes objects (`tools | tojson`) so the text
// matches transformers byte for byte.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/jinja_template.h"

namespace folio {

using ChatTemplateOptions = jinja::TemplateOptions;

class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(std::string source, ChatTemplateOptions options = {});
  // `chat_template` as a string, or a list of {"name", "template"} (the one named "default").
  static Result<ChatTemplate> from_tokenizer_config(const nlohmann::json& config,
                                                    ChatTemplateOptions options = {});
  // A model folder's template as transformers (>= 4.47) and vLLM find it: `chat_template.jinja`
  // when present (it wins over the inline one), else tokenizer_config.json's `chat_template`;
  // nullopt when the folder has neither. Errors name the file.
  static Result<std::optional<ChatTemplate>> from_model_dir(const std::string& dir,
                                                            ChatTemplateOptions options = {});

  Result<std::string> render(const nlohmann::json& messages, bool add_generation_prompt,
                             const nlohmann::json& extra_kwargs, const std::string& bos_token,
                             const std::string& eos_token) const;
  Result<std::string> render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra_kwargs,
                             const std::string& bos_token, const std::string& eos_token) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, jinja::Template tmpl)
      : source_(std::move(source)), template_(std::move(tmpl)) {}

  std::string source_;
  jinja::Template template_;
};

// A special token's text from tokenizer_config.json: a plain string or an AddedToken object
// {"content": ...}; nullopt when absent or null.
std::optional<std::string> special_token_from_config(const nlohmann::json& config,
                                                     const std::string& key);

}  // namespace folio
