// Statements: if, for and loop variables, set, namespace, macros, filter blocks.
// Expected strings were produced by Jinja2 3.1 configured like Hugging Face's chat-template
// environment (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson); see kVars for the
// variables every case sees.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_cases.h"
#include "tokenizer/jinja_template.h"

namespace folio::jinja {
namespace {

TEST(JinjaStmt, If) {
  static const Case kCases[] = {
      {R"J({% if messages[0].role == 'system' %}sys{% elif messages[0].role == 'user' %}usr{% else %}other{% endif %})J", R"J(sys)J"},
      {R"J({% if n is not none and n > 2 %}big{% endif %}|{% if n is defined and n is number %}num{% endif %}|{% if e %}x{% else %}empty{% endif %})J", R"J(big|num|empty)J"},
      {R"J({%- if not tools is none %}T{% endif %}|{{ tools | length }}|{{ not tools }}|{{ tools[0].function.name }})J", R"J(T|1|False|f)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaStmt, ForLoop) {
  static const Case kCases[] = {
      {R"J({% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}:{{ m.role }};{% endfor %})J", R"J(10TrueFalse443:system;21FalseFalse432:user;32FalseFalse421:assistant;43FalseTrue410:tool;)J"},
      {R"J({% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in e %}{{x}}{% else %}empty{% endfor %})J", R"J(3222|empty)J"},
      {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{k}}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %})J", R"J(b=1;a=[1, 2.5, None, True];|ba|[h][é])J"},
      {R"J({% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for a, b in [(1, 2)] %}{{ a }}{{ b }}{% endfor %})J", R"J(37|12)J"},
      {R"J({% for x in [1,2] %}{% for y in [3,4] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.index }}|{% endfor %})J", R"J(113 214 1|123 224 2|)J"},
      {R"J({% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else 'none' }}>{{ loop.nextitem.role if not loop.last else 'end' }};{% endfor %})J", R"J(none>user;system>assistant;user>tool;assistant>end;)J"},
      {R"J({% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %})J", R"J(02)J"},
      {R"J({% for message in messages[::-1] %}{{ (messages|length - 1) - loop.index0 }}{% endfor %}|{% for i in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %})J", R"J(3210|abab)J"},
      {R"J({% for x in undefined_thing %}x{% else %}undefined iterates as empty{% endfor %})J", R"J(undefined iterates as empty)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaStmt, Scoping) {
  static const Case kCases[] = {
      {R"J({% set x = 1 %}{% for i in xs %}{% set x = i %}{% endfor %}{{ x }})J", R"J(1)J"},
      {R"J({% for i in range(3) %}{% if i == 1 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %})J", R"J([][a][])J"},
      {R"J({% set ns = namespace(a=1, b='x') %}{% for x in xs %}{% set ns.a = ns.a + x %}{% endfor %}{{ ns.a }}{{ ns.b }})J", R"J(7x)J"},
      {R"J({%- set ns = namespace(found=false) -%}
{%- for message in messages -%}
    {%- if message['role'] == 'system' -%}
        {%- set ns.found = true -%}
    {%- endif -%}
{%- endfor -%}
{{ ns.found }})J", R"J(True)J"},
      {R"J({% set t %}block {{ n }}{% endset %}[{{ t }}]|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set x = [1, 2] %}{% set y = x %}{{ x is sameas y }})J", R"J([block 7]|12|True)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaStmt, Macros) {
  static const Case kCases[] = {
      {R"J({% macro f(a, b=2, c='z') %}<{{ a }}{{ b }}{{ c }}>{% endmacro %}{{ f(1) }}{{ f(1, 3) }}{{ f(a=5, c='q') }})J", R"J(<12z><13z><52q>)J"},
      {R"J({% for m in messages %}{% macro show(sep=':') %}{{ loop.index }}{{ sep }}{{ m.role }}{% endmacro %}{{ show() }} {% endfor %})J", R"J(1:system 2:user 3:assistant 4:tool )J"},
      {R"J({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }})J", R"J(54321)J"},
      {R"J({% macro m(x) %}{{ x }}|{{ y is defined }}{% endmacro %}{{ m('a') }}|{% macro g() %}{{ n }}{% endmacro %}{{ g() }})J", R"J(a|False|7)J"},
      {R"J({% macro render(v) %}{% if v is mapping %}{ {% for k, x in v.items() %}{{ k }}: {{ render(x) }} {% endfor %}}{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(d) }})J", R"J({ b: 1 a: [1, 2.5, None, True] })J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaStmt, FilterBlocksAndMisc) {
  static const Case kCases[] = {
      {R"J({% filter upper %}hello {{ n }}{% endfilter %}|{% set x | upper %}abc{% endset %}{{ x }})J", R"J(HELLO 7|ABC)J"},
  };
  check(kCases, std::size(kCases));
}

}  // namespace
}  // namespace folio::jinja
