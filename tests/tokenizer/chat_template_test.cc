// ChatTemplate against transformers' apply_chat_template goldens, config handling, and the
// variables a chat template sees.
#include "tokenizer/chat_template.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/file_util.h"

namespace folio {
namespace {

std::string config_path(const std::string& name) {
  return std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/" + name + "/tokenizer_config.json";
}

// Renders every line of tests/data/tokenizers/chat_<name>.jsonl and compares the text.
void check_goldens(const std::string& name) {
  std::string cfg_path = config_path(name);
  if (!file_exists(cfg_path)) {
    GTEST_SKIP() << cfg_path << " is missing: run scripts/fetch_tokenizers.sh";
  }
  auto config = read_json_file(cfg_path);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto tmpl = ChatTemplate::from_tokenizer_config(*config);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  std::string bos = special_token_from_config(*config, "bos_token").value_or("");
  std::string eos = special_token_from_config(*config, "eos_token").value_or("");

  std::ifstream in(std::string(FOLIO_TEST_DATA_DIR) + "/tokenizers/chat_" + name + ".jsonl");
  ASSERT_TRUE(in) << "missing golden file chat_" << name << ".jsonl";
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto row = nlohmann::ordered_json::parse(line);
    // Every key besides these is a template kwarg (tools, enable_thinking, ...).
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it.key() != "messages" && it.key() != "add_generation_prompt" && it.key() != "text" &&
          it.key() != "ids") {
        kwargs[it.key()] = it.value();
      }
    }
    auto text = tmpl->render(row["messages"], row["add_generation_prompt"].get<bool>(), kwargs,
                             bos, eos);
    ASSERT_TRUE(text.ok()) << name << " line " << count + 1 << ": " << text.status().to_string();
    EXPECT_EQ(*text, row["text"].get<std::string>()) << name << " line " << count + 1;
    ++count;
  }
  EXPECT_GT(count, 0);
}

TEST(ChatTemplateGolden, Llama3) { check_goldens("llama3"); }
TEST(ChatTemplateGolden, Qwen3) { check_goldens("qwen3"); }

TEST(ChatTemplate, Qwen3ThinkingAndToolsKwargs) {
  std::string cfg_path = config_path("qwen3");
  if (!file_exists(cfg_path)) GTEST_SKIP() << cfg_path << " is missing: run scripts/fetch_tokenizers.sh";
  auto config = read_json_file(cfg_path);
  ASSERT_TRUE(config.ok());
  auto tmpl = ChatTemplate::from_tokenizer_config(*config);
  ASSERT_TRUE(tmpl.ok());
  auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  auto off = tmpl->render(messages, true, nlohmann::ordered_json{{"enable_thinking", false}}, "", "<|im_end|>");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_EQ(*off, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Expected text rendered by Jinja2 3.1 in HF's environment (trim/lstrip_blocks, json.dumps tojson).
  auto tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  auto with_tools = tmpl->render(messages, false, nlohmann::ordered_json{{"tools", tools}}, "", "");
  ASSERT_TRUE(with_tools.ok()) << with_tools.status().to_string();
  EXPECT_EQ(*with_tools,
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
            "</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, FromConfigPicksDefaultFromList) {
  auto config = nlohmann::json::parse(R"({"chat_template": [
      {"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages|length }}"}]})");
  auto tmpl = ChatTemplate::from_tokenizer_config(config);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  auto out = tmpl->render(nlohmann::json::array(), false, nlohmann::json::object(), "", "");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "D0");

  auto no_default = ChatTemplate::from_tokenizer_config(
      nlohmann::json::parse(R"({"chat_template": [{"name": "rag", "template": "x"}]})"));
  ASSERT_FALSE(no_default.ok());
  EXPECT_NE(no_default.status().message().find("rag"), std::string::npos);
  EXPECT_FALSE(ChatTemplate::from_tokenizer_config(nlohmann::json::object()).ok());
  EXPECT_FALSE(ChatTemplate::from_tokenizer_config(nlohmann::json{{"chat_template", 3}}).ok());
}

TEST(ChatTemplate, VariablesSeenByTheTemplate) {
  auto tmpl = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token is defined }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ add_generation_prompt }}|{{ custom }}|{{ messages[0].content }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  auto msgs = nlohmann::json::parse(R"([{"role": "user", "content": "héllo"}])");
  auto out = tmpl->render(msgs, true, nlohmann::json{{"custom", 7}}, "<s>", "");
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "<s>|False|True|True|True|7|héllo");
}

TEST(ChatTemplate, BadInputsAreErrors) {
  auto tmpl = ChatTemplate::parse("{{ messages }}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->render(nlohmann::json::object(), false, nlohmann::json::object(), "", "").ok());
  EXPECT_FALSE(tmpl->render(nlohmann::json::array(), false, nlohmann::json::array(), "", "").ok());
  auto bad = ChatTemplate::parse("{% for m in messages %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("endfor"), std::string::npos) << bad.status().message();
}

TEST(ChatTemplate, SpecialTokenFromConfig) {
  auto config = nlohmann::json::parse(
      R"({"bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": false}, "pad_token": null})");
  EXPECT_EQ(special_token_from_config(config, "bos_token").value_or("?"), "<s>");
  EXPECT_EQ(special_token_from_config(config, "eos_token").value_or("?"), "</s>");
  EXPECT_FALSE(special_token_from_config(config, "pad_token").has_value());
  EXPECT_FALSE(special_token_from_config(config, "unk_token").has_value());
}

}  // namespace
}  // namespace folio
