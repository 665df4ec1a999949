// Expressions: literals, operators, printing, access, slicing.
// Expected strings were produced by Jinja2 3.1 configured like Hugging Face's chat-template
// environment (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson); see kVars for the
// variables every case sees.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_cases.h"
#include "tokenizer/jinja_template.h"

namespace folio::jinja {
namespace {

TEST(JinjaExpr, Arithmetic) {
  static const Case kCases[] = {
      {R"J({{ 1 + 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 1.5 * 2 }}|{{ 10 / 5 }})J", R"J(3|3|-4|1|2|3.5|1024|3.0|2.0)J"},
      {R"J({{ -2 ** 2 }}|{{ 2 ** -1 }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 + 4 }}|{{ (1 + 2) ~ 3 }}|{{ 'a' ~ (1 + 2) }}|{{ 1 ~ 2 * 3 }})J", R"J(4|0.5|5|10|33|a3|16)J"},
      {R"J({{ 9007199254740993 }}|{{ 2 ** 62 }}|{{ 123456789012 * 1000 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }})J", R"J(9007199254740993|4611686018427387904|123456789012000|3.0|0.5)J"},
      {R"J({{ 0x1f }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ 1e3 }}|{{ 2.5E-3 }})J", R"J(31|15|5|1000|1000.0|0.0025)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaExpr, PythonPrinting) {
  static const Case kCases[] = {
      {R"J({{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 1/3 }}|{{ -0.0 }}|{{ 3.0 }}|{{ 2.5e-10 }}|{{ 123456789.123 }})J", R"J(0.30000000000000004|1e+16|1000000000000000.0|0.0001|1e-05|0.3333333333333333|-0.0|3.0|2.5e-10|123456789.123)J"},
      {R"J({{ 1.0e20 }}|{{ 12345678901234567890.0 }}|{{ 0.1 * 3 }}|{{ 1e100 }}|{{ 1.5e300 * 1e10 }}|{{ -1.5e300 * 1e10 }})J", R"J(1e+20|1.2345678901234567e+19|0.30000000000000004|1e+100|inf|-inf)J"},
      {R"J({{ true }}{{ false }}{{ none }}|{{ [none, true, 'it\'s', "q\"", 1.0] }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }})J", R"J(TrueFalseNone|[None, True, "it's", 'q"', 1.0]|(1, 2)|(1,)|())J"},
      {R"J({{ {'a': 1, 'b': 'x', 3: [None]} }}|{{ {'é': '\n\t\\'} }}|{{ ['\x7f', '\u200b', '\x00', 'x\'y"z'] }})J", R"J({'a': 1, 'b': 'x', 3: [None]}|{'é': '\n\t\\'}|['\x7f', '\u200b', '\x00', 'x\'y"z'])J"},
      {R"J({{ namespace(a=1) }}|{{ d }}|{{ messages[1] }})J", R"J(<Namespace {'a': 1}>|{'b': 1, 'a': [1, 2.5, None, True]}|{'role': 'user', 'content': 'Hi there'})J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaExpr, StringsAndConcat) {
  static const Case kCases[] = {
      {R"J({{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ 3 * 'ab' }}|{{ 'abc' * 0 }}|{{ [1] + [2] }}|{{ [1] * 3 }})J", R"J(a1NoneTrue|ababab|ababab||[1, 2]|[1, 1, 1])J"},
      {R"J({{ '\u00e9' }}|{{ '\x41' }}|{{ 'a\qb' }}|{{ '\'' }}|{{ 'a' 'b' }}|{{ "it's" }}|{{ '%s' }})J", R"J(é|A|a\qb|'|ab|it's|%s)J"},
      {R"J({{ 'Hello' ~ ' ' ~ messages[1].content | upper }}|{{ 'x' ~ undefined_thing ~ 'y' }})J", R"J(Hello HI THERE|xy)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaExpr, ComparisonsAndLogic) {
  static const Case kCases[] = {
      {R"J({{ 'x' if n > 5 else 'y' }}|{{ 'x' if n < 5 }}|{{ n > 5 and n < 10 }}|{{ not n }}|{{ 1 in xs }}|{{ 9 not in xs }}|{{ 'ell' in 'hello' }}|{{ 'a' in d }})J", R"J(x||True|False|True|True|True|True)J"},
      {R"J({{ 1 == 1.0 }}|{{ true == 1 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' < 'B' }})J", R"J(True|True|True|True|True|False|False)J"},
      {R"J({{ (1, 2) == [1, 2] }}|{{ none == none }}|{{ 0 == false }}|{{ '' == none }}|{{ undefined_thing == undefined_other }})J", R"J(False|True|True|False|True)J"},
      {R"J({{ 1 if true else 2 if true else 3 }}|{{ none if false }}|{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ none or [] }})J", R"J(1||x|y||[])J"},
      {R"J({{ (messages | length) > 3 and messages[3].role == 'tool' }}|{{ not (n > 1 and n < 5) }})J", R"J(True|True)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaExpr, AccessAndSlicing) {
  static const Case kCases[] = {
      {R"J({{ 'abc'[::-1] }}|{{ xs[1:] }}|{{ xs[:-1] }}|{{ xs[::2] }}|{{ u[1:4] }}|{{ u[-1] }}|{{ xs[-1] }}|{{ xs[10] }}|{{ xs[5:1:-1] }}|{{ xs[-10:10] }})J", R"J(cba|[1, 2]|[3, 1]|[3, 2]|éll|ß|2||[2]|[3, 1, 2])J"},
      {R"J({{ messages.0.role }}|{{ messages[0]['role'] }}|{{ messages[1].content[:3] }}|{{ [1, 2][0:1][0] }}|{{ d.zz }}|{{ d.zz is defined }})J", R"J(system|system|Hi |1||False)J"},
      {R"J({% set dd = {'a': 1} %}{{ dd['a'] }}{{ dd.a }}{{ dd.items() | list }}|{{ d['a'][1] }})J", R"J(11[('a', 1)]|2.5)J"},
      {R"J({{ messages[2].tool_calls[0].function.arguments.items() | list }}|{{ messages[2].tool_calls[0]['function']['arguments'] | dictsort }})J", R"J([('a', 1), ('b', 'x')]|[('a', 1), ('b', 'x')])J"},
  };
  check(kCases, std::size(kCases));
}

}  // namespace
}  // namespace folio::jinja
