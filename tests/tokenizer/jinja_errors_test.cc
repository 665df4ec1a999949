// Error reporting (line numbers, raise_exception) and resource limits on hostile templates.
#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/jinja_template.h"

namespace folio::jinja {
namespace {

using ::testing::HasSubstr;

Status parse_error(const std::string& source) {
  auto t = Template::parse(source);
  EXPECT_FALSE(t.ok()) << "parsed: " << source;
  return t.ok() ? Status() : t.status();
}

Result<std::string> render(const std::string& source, TemplateOptions options = {},
                           Value vars = Value::make_dict()) {
  auto t = Template::parse(source, std::move(options));
  if (!t.ok()) return t.status();
  return t->render(vars);
}

Status render_error(const std::string& source, TemplateOptions options = {}) {
  auto out = render(source, std::move(options));
  EXPECT_FALSE(out.ok()) << "rendered: " << source;
  return out.ok() ? Status() : out.status();
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  Status s = parse_error("line1\n{{ 1 +* 2 }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("syntax error at line 2"));

  s = parse_error("{% for m in messages %}\n{% if m %}\nx\n{% endfor %}");
  EXPECT_THAT(s.message(), HasSubstr("line 4"));
  EXPECT_THAT(s.message(), HasSubstr("endif"));

  s = parse_error("{% if x %}\nunclosed");
  EXPECT_THAT(s.message(), HasSubstr("expected 'endif'"));

  s = parse_error("a\n\n{{ x | nosuchfilter }}");
  EXPECT_THAT(s.message(), HasSubstr("line 3"));
  EXPECT_THAT(s.message(), HasSubstr("no filter named 'nosuchfilter'"));

  EXPECT_THAT(parse_error("{% if x is nosuchtest %}{% endif %}").message(), HasSubstr("no test named"));
  EXPECT_THAT(parse_error("\n{% include 'x' %}").message(), HasSubstr("line 2: unknown or unsupported tag 'include'"));
  EXPECT_THAT(parse_error("{{ 'abc }}").message(), HasSubstr("unterminated string"));
  EXPECT_THAT(parse_error("{{ x ").message(), HasSubstr("missing '}}'"));
  EXPECT_THAT(parse_error("{# never closed").message(), HasSubstr("unclosed comment"));
  EXPECT_THAT(parse_error("{% raw %}abc").message(), HasSubstr("endraw"));
  EXPECT_THAT(parse_error("{{ x ) }}").message(), HasSubstr("unexpected ')'"));
  EXPECT_THAT(parse_error("{% macro f(a=1, b) %}{% endmacro %}").message(), HasSubstr("without default"));
  EXPECT_THAT(parse_error(std::string("{{ '\xff' }}")).message(), HasSubstr("UTF-8"));
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  Status s = render_error("a\nb\n{{ 'a' + 1 }}");
  EXPECT_THAT(s.message(), HasSubstr("template error at line 3"));
  EXPECT_THAT(s.message(), HasSubstr("unsupported operand type(s) for +: 'str' and 'int'"));

  s = render_error("{% for m in [1] %}\n  {{ undefined_var.attr }}\n{% endfor %}");
  EXPECT_THAT(s.message(), HasSubstr("line 2"));
  EXPECT_THAT(s.message(), HasSubstr("'undefined_var' is undefined"));

  s = render_error("{% set d = {} %}{{ d.missing.deeper }}");
  EXPECT_THAT(s.message(), HasSubstr("'dict object' has no attribute 'missing'"));

  EXPECT_THAT(render_error("{{ 1 / 0 }}").message(), HasSubstr("division by zero"));
  EXPECT_THAT(render_error("{% for x in 5 %}{% endfor %}").message(), HasSubstr("'int' object is not iterable"));
  EXPECT_THAT(render_error("{% set x = 1 %}{% set x.y = 2 %}").message(), HasSubstr("non-namespace"));
  EXPECT_THAT(render_error("{{ 'a' > 1 }}").message(), HasSubstr("'<' not supported"));
  EXPECT_THAT(render_error("{% set a, b = [1] %}").message(), HasSubstr("not enough values to unpack"));
  EXPECT_THAT(render_error("{{ 'x'.nosuch() }}").message(), HasSubstr("has no attribute 'nosuch'"));
  EXPECT_THAT(render_error("{{ [1]|join(', ', 'a', 'b') }}").message(), HasSubstr("takes at most 2"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 + 1 }}").message(), HasSubstr("overflow"));
}

TEST(JinjaErrors, RaiseExceptionCarriesItsMessage) {
  Status s = render_error(
      "{% for m in ['system', 'tool'] %}\n{% if m == 'tool' %}\n"
      "{{ raise_exception('Only user and assistant roles are supported, got ' + m) }}\n"
      "{% endif %}{% endfor %}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("raised an exception at line 3"));
  EXPECT_THAT(s.message(), HasSubstr("Only user and assistant roles are supported, got tool"));
}

TEST(JinjaErrors, UndefinedBehavesLikeJinjaDefault) {
  auto out = render("[{{ nope }}]{% if nope %}t{% else %}f{% endif %}{{ nope|length }}{% for x in nope %}x{% endfor %}"
                    "{{ nope is defined }}{{ {'a': 1}.b is defined }}{{ nope == nope }}");
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "[]f0FalseFalseTrue");
  EXPECT_THAT(render_error("{{ nope + 1 }}").message(), HasSubstr("'nope' is undefined"));
  EXPECT_THAT(render_error("{{ nope() }}").message(), HasSubstr("'nope' is undefined"));
  EXPECT_THAT(render_error("{{ nope | int }}").message(), HasSubstr("'nope' is undefined"));
  EXPECT_THAT(render_error("{{ none is none(1) }}").message(), HasSubstr("takes 0 argument(s)"));
}

TEST(JinjaErrors, ListAppendAndStrftimeNowWithInjectedClock) {
  // Some chat templates build lists with append; Python semantics (append returns None).
  auto out = render("{% set l = [] %}{% for x in [3, 1] %}{{ l.append(x) }}{% endfor %}{{ l }}");
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "NoneNone[3, 1]");

  TemplateOptions o;
  o.clock = [] {
    std::tm t{};
    t.tm_year = 2024 - 1900;
    t.tm_mon = 6;
    t.tm_mday = 4;
    t.tm_wday = 4;
    return t;
  };
  out = render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %B') }}", o);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "04 Jul 2024|Thursday July");
}

// Each hostile template must fail with a limit error, quickly.
void expect_limit(const std::string& source, const std::string& what, TemplateOptions o = {}) {
  auto start = std::chrono::steady_clock::now();
  auto out = render(source, std::move(o));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok()) << source;
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().to_string();
  EXPECT_THAT(out.status().message(), HasSubstr(what)) << source;
  EXPECT_LT(secs, 5.0) << source;
}

TEST(JinjaLimits, HostileTemplatesFailFast) {
  expect_limit("{% for i in range(10**15) %}{% endfor %}", "range() too large");
  expect_limit("{% for i in range(10**12) %}{% endfor %}", "exceeds the cap");
  expect_limit("{% for i in range(10**8) %}{% endfor %}", "exceeds the cap");
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               "step budget");
  expect_limit("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper than 64 calls");
  expect_limit("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "output cap");
  expect_limit("{% set ns = namespace(s='xx') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
               "exceeds the output cap");
  expect_limit("{{ 'x' * 10**12 }}", "exceeds the output cap");
  expect_limit("{{ [1] * 10**9 }}", "exceeds the cap");
  expect_limit("{% set l = [1] %}{{ l.append(l) }}{{ l }}", "contains itself");
  expect_limit("{% set l = [1] %}{{ l.append(l) }}{{ l | tojson }}", "contains itself");
  expect_limit("{% set ns = namespace(l=[]) %}{% for i in range(10**6) %}{% if ns.l.append(ns.l) %}{% endif %}{% endfor %}",
               "step budget");
}

TEST(JinjaLimits, ReferenceCyclesAreBrokenAfterTheRender) {
  // Values are reference counted: `l.append(l)` or `set ns.me = ns` would leak the cycle, so the
  // evaluator empties every container the template mutated once the render ends.
  Value vars = Value::make_dict();
  Value list = Value::make_list({Value(1)});
  vars.dict().set("l", list);
  auto out = render("{{ l.append(l) }}{{ l | length }}{% set ns = namespace() %}{% set ns.me = ns %}", {}, vars);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "None2");
  EXPECT_TRUE(list.list().items.empty());
  EXPECT_FALSE(render("{% set l = [1] %}{{ l.append(l) }}{{ l }}", {}, vars).ok());
  EXPECT_TRUE(list.list().items.empty());
}

TEST(JinjaLimits, DeepNestingInTheSourceIsASyntaxError) {
  std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(parse_error(parens).message(), HasSubstr("nested deeper"));
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(parse_error(ifs).message(), HasSubstr("nested deeper"));
  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_THAT(parse_error(nots + "x }}").message(), HasSubstr("nested deeper"));
}

TEST(JinjaLimits, LimitsAreConfigurable) {
  TemplateOptions o;
  o.limits.max_output_bytes = 10;
  EXPECT_TRUE(render("{{ 'x' * 10 }}", o).ok());
  expect_limit("{{ 'x' * 11 }}", "output cap", o);
  o = TemplateOptions();
  o.limits.max_steps = 1000;
  expect_limit("{% for i in range(600) %}{{ i }}{% endfor %}", "step budget", o);
  o = TemplateOptions();
  o.limits.max_call_depth = 3;
  EXPECT_TRUE(render("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(2) }}", o).ok());
  expect_limit("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", "3 calls", o);
}

}  // namespace
}  // namespace folio::jinja
