#include "tokenizer/chat_template.h"

#include "base/file_util.h"
#include "tokenizer/jinja_error.h"

namespace folio {
namespace {

template <typename Json>
Result<std::string> render_impl(const jinja::Template& tmpl, const Json& messages,
                                bool add_generation_prompt, const Json& extra_kwargs,
                                const std::string& bos_token, const std::string& eos_token) {
  if (!messages.is_array()) return invalid_argument("chat template: messages must be a JSON array");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) {
    return invalid_argument("chat template: extra kwargs must be a JSON object");
  }
  jinja::Value vars = jinja::Value::make_dict();
  try {
    jinja::ActiveBudgetScope no_budget(nullptr);
    auto& d = vars.dict();
    d.set("messages", jinja::from_json(messages));
    d.set("tools", jinja::Value::none());
    d.set("documents", jinja::Value::none());
    d.set("add_generation_prompt", jinja::Value(add_generation_prompt));
    if (!bos_token.empty()) d.set("bos_token", jinja::Value(bos_token));
    if (!eos_token.empty()) d.set("eos_token", jinja::Value(eos_token));
    if (extra_kwargs.is_object()) {
      for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
        d.set(jinja::Value(it.key()), jinja::from_json(it.value()));
      }
    }
  } catch (const jinja::JinjaError& e) {
    return jinja::error_status(e);
  }
  return tmpl.render(vars);
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string source, ChatTemplateOptions options) {
  FOLIO_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::parse(source, std::move(options)));
  return ChatTemplate(std::move(source), std::move(tmpl));
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const nlohmann::json& config,
                                                         ChatTemplateOptions options) {
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) {
    return not_found("tokenizer_config.json has no chat_template");
  }
  const auto& ct = config["chat_template"];
  if (ct.is_string()) return parse(ct.get<std::string>(), std::move(options));
  if (!ct.is_array()) {
    return invalid_argument("tokenizer_config.json: chat_template must be a string or a list");
  }
  std::string names;
  for (const auto& entry : ct) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return invalid_argument(
          "tokenizer_config.json: chat_template list entries must be {\"name\", \"template\"} strings");
    }
    std::string name = entry["name"].get<std::string>();
    if (name == "default") return parse(entry["template"].get<std::string>(), std::move(options));
    names += (names.empty() ? "" : ", ") + name;
  }
  return not_found("tokenizer_config.json: no chat template named 'default' among [" + names + "]");
}

Result<std::optional<ChatTemplate>> ChatTemplate::from_model_dir(const std::string& dir,
                                                                 ChatTemplateOptions options) {
  const std::string jinja_path = join_path(dir, "chat_template.jinja");
  if (file_exists(jinja_path)) {
    FOLIO_ASSIGN_OR_RETURN(std::string source, read_file(jinja_path));
    auto t = parse(std::move(source), std::move(options));
    if (!t.ok()) return invalid_argument(jinja_path + ": " + t.status().message());
    return std::optional<ChatTemplate>(std::move(*t));
  }
  const std::string config_path = join_path(dir, "tokenizer_config.json");
  if (!file_exists(config_path)) return std::optional<ChatTemplate>();
  FOLIO_ASSIGN_OR_RETURN(nlohmann::json config, read_json_file(config_path));
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null())
    return std::optional<ChatTemplate>();
  auto t = from_tokenizer_config(config, std::move(options));
  if (!t.ok()) return invalid_argument(config_path + ": " + t.status().message());
  return std::optional<ChatTemplate>(std::move(*t));
}

Result<std::string> ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                         const nlohmann::json& extra_kwargs,
                                         const std::string& bos_token,
                                         const std::string& eos_token) const {
  return render_impl(template_, messages, add_generation_prompt, extra_kwargs, bos_token, eos_token);
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_kwargs,
                                         const std::string& bos_token,
                                         const std::string& eos_token) const {
  return render_impl(template_, messages, add_generation_prompt, extra_kwargs, bos_token, eos_token);
}

std::optional<std::string> special_token_from_config(const nlohmann::json& config,
                                                     const std::string& key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace folio
