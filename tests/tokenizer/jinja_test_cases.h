// Shared by the Jinja golden-case tests: a case is a template and the text Jinja2 3.1 renders
// for it (configured like Hugging Face's chat-template environment: trim_blocks, lstrip_blocks,
// loopcontrols, json.dumps tojson); every case sees the variables in kVars.
#pragma once

#include <cstddef>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_template.h"

namespace folio::jinja {

struct Case {
  const char* source;
  const char* expected;
};

inline constexpr char kVars[] = R"J({"messages": [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": "x"}}}]}, {"role": "tool", "content": "42"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "xs": [3, 1, 2], "d": {"b": 1, "a": [1, 2.5, null, true]}, "s": "  Hello World  ", "n": 7, "f": 2.5, "u": "héllo wörld ß", "e": [], "bos_token": "<s>", "eos_token": "</s>"})J";

inline void check(const Case* cases, size_t n) {
  Value vars = from_json(nlohmann::ordered_json::parse(kVars));
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(cases[i].source);
    auto tmpl = Template::parse(cases[i].source);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
    auto out = tmpl->render(vars);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(*out, cases[i].expected);
  }
}

}  // namespace folio::jinja
