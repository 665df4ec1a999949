// Where a model folder keeps its chat template: `chat_template.jinja` (transformers >= 4.47 saves
// it there and prefers it) over tokenizer_config.json's `chat_template`, and nothing when the
// folder has neither; a template that does not parse is an error naming its file.
#include <gtest/gtest.h>

#include <string>

#include "scratch_dir.h"
#include "tokenizer/chat_template.h"

namespace folio {
namespace {

using ModelDir = testing::ScratchDir;

// The text a template renders for one user message, or the error.
std::string render(const ModelDir& d) {
  auto t = ChatTemplate::from_model_dir(d.str());
  if (!t.ok()) return "error: " + t.status().message();
  if (!*t) return "none";
  auto text = (*t)->render(nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}}), false,
                           nlohmann::json::object(), "", "");
  return text.ok() ? *text : "render error: " + text.status().message();
}

TEST(ChatTemplateModelDir, TheJinjaFileWinsOverTheInlineTemplate) {
  ModelDir d;
  EXPECT_EQ(render(d), "none");
  d.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(render(d), "none");
  d.write("tokenizer_config.json",
          R"({"chat_template": "{% for m in messages %}inline:{{ m.content }}{% endfor %}"})");
  EXPECT_EQ(render(d), "inline:hi");
  d.write("chat_template.jinja", "{% for m in messages %}file:{{ m.content }}{% endfor %}");
  EXPECT_EQ(render(d), "file:hi");
}

TEST(ChatTemplateModelDir, ErrorsNameTheFile) {
  ModelDir d;
  d.write("chat_template.jinja", "{% for m in messages %}unclosed");
  const std::string jinja = render(d);
  EXPECT_EQ(jinja.rfind("error: " + d.str() + "/chat_template.jinja: ", 0), 0u) << jinja;
  ModelDir e;
  e.write("tokenizer_config.json", R"({"chat_template": 3})");
  const std::string inline_error = render(e);
  EXPECT_EQ(inline_error.rfind("error: " + e.str() + "/tokenizer_config.json: ", 0), 0u)
      << inline_error;
  e.write("tokenizer_config.json", "{not json");
  EXPECT_EQ(render(e).rfind("error: ", 0), 0u);
}

}  // namespace
}  // namespace folio
