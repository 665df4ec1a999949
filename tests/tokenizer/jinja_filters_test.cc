// Filters, tests and str/dict methods.
// Expected strings were produced by Jinja2 3.1 configured like Hugging Face's chat-template
// environment (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson); see kVars for the
// variables every case sees.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_cases.h"
#include "tokenizer/jinja_template.h"

namespace folio::jinja {
namespace {

TEST(JinjaFilters, Text) {
  static const Case kCases[] = {
      {R"J({{ s | trim }}|{{ s|length }}|{{ s | upper }}|{{ s|lower }}|{{ 'hello world'|capitalize }}|{{ 'hello wORLD-foo(bar'|title }})J", R"J(Hello World|15|  HELLO WORLD  |  hello world  |Hello world|Hello World-Foo(Bar)J"},
      {R"J({{ 'ß'.upper() }}|{{ 'İ'.lower()|length }}|{{ 'ǅ'.title() }}|{{ "they're bill's"|title }}|{{ "they're bill's".title() }}|{{ u|upper }})J", R"J(SS|2|ǅ|They're Bill's|They'Re Bill'S|HÉLLO WÖRLD SS)J"},
      {R"J({{ 'a
b

c' | indent(2) }}|{{ 'a
b' | indent(2, true) }}|{{ 'one\ntwo' | indent(4, first=true) }}|{{ 'a\n\nb' | indent(2, blank=true) }})J", R"J(a
  b

  c|  a
  b|    one
    two|a
  
  b)J"},
      {R"J({{ '<a&b>"\'' | e }}|{{ 'x' | safe }}|{{ 'aXa' | replace('a', 'b') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'xyx' | trim('x') }})J", R"J(&lt;a&amp;b&gt;&#34;&#39;|x|bXb|bba|y)J"},
      {R"J({{ 10 | string | length }}|{{ 3.0 | string }}|{{ [1, 'a'] | string }}|{{ 'abc' | count }}|{{ xs | count }})J", R"J(2|3.0|[1, 'a']|3|3)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaFilters, ToJson) {
  static const Case kCases[] = {
      {R"J({{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ u | tojson }}|{{ 'a"b\\c\n\t\u0001' | tojson }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }})J", R"J({"b": 1, "a": [1, 2.5, null, true]}|{
  "b": 1,
  "a": [
    1,
    2.5,
    null,
    true
  ]
}|"héllo wörld ß"|"a\"b\\c\n\t\u0001"|[]|{})J"},
      {R"J({{ {'a': {'b': [1, {'c': 'd'}]}} | tojson(indent=4) }}|{{ tools | tojson }})J", R"J({
    "a": {
        "b": [
            1,
            {
                "c": "d"
            }
        ]
    }
}|[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])J"},
      {R"J({{ [1.0, 2.50, 1e100, -1.5e-7, 100.0, 1e16] | tojson }}|{{ {'é': 'ü', 'k': ['\u2028', '\x7f', '\x00']} | tojson }})J", R"J([1.0, 2.5, 1e+100, -1.5e-07, 100.0, 1e+16]|{"é": "ü", "k": [" ", "", "\u0000"]})J"},
      {R"J({{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1, [2, 3]] | tojson(indent=2, separators=(', ', ' = ')) }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ '😀' | tojson(true) }})J", R"J({"a": 2, "b": 1}|[
  1, 
  [
    2, 
    3
  ]
]|"\u00e9"|"\ud83d\ude00")J"},
      {R"J({{ {1: 'a', none: 'b', true: 'c', 2.5: 'd'} | tojson }}|{{ (1, 'x') | tojson }}|{{ 'x' | tojson(indent='\t') }}|{{ [1] | tojson(indent='--') }})J", R"J({"1": "c", "null": "b", "2.5": "d"}|[1, "x"]|"x"|[
--1
])J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaFilters, Sequences) {
  static const Case kCases[] = {
      {R"J({{ xs | sort }}|{{ xs | sort(reverse=true) }}|{{ xs | reverse | list }}|{{ xs | first }}|{{ xs | last }}|{{ xs | join(', ') }}|{{ xs | length }}|{{ xs|sum }}|{{ xs|min }}|{{ xs|max }})J", R"J([1, 2, 3]|[3, 2, 1]|[2, 1, 3]|3|2|3, 1, 2|3|6|1|3)J"},
      {R"J({{ [1, 2, 2, 'a', 'A'] | unique | list }}|{{ ['b', 'A', 'c'] | sort }}|{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}|{{ messages | sort(attribute='role') | map(attribute='role') | join(',') }})J", R"J([1, 2, 'a']|['A', 'b', 'c']|['A', 'b', 'c']|assistant,system,tool,user)J"},
      {R"J({{ messages | selectattr('role', 'equalto', 'user') | list }}|{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='content') | list }}|{{ messages | map(attribute='role') | join(',') }})J", R"J([{'role': 'user', 'content': 'Hi there'}]|['Be nice.', '<think>\nhmm\n</think>\n\nHello!', '42']|system,user,assistant,tool)J"},
      {R"J({{ messages | map(attribute='role') | unique | list }}|{{ messages|selectattr('tool_calls', 'defined')|list|length }}|{{ messages | rejectattr('tool_calls') | list | length }})J", R"J(['system', 'user', 'assistant', 'tool']|1|3)J"},
      {R"J({{ xs|map('string')|join('-') }}|{{ [1, 0, 2]|select|list }}|{{ [1, 0, 2]|reject|list }}|{{ xs|select('odd')|list }}|{{ messages|map(attribute='missing', default='?')|join }})J", R"J(3-1-2|[1, 2]|[0]|[3, 1]|????)J"},
      {R"J({{ [1,2,3] | join }}|{{ [1, none, 'a'] | join('/') }}|{{ 'hello' | list }}|{{ 'hello' | reverse }}|{{ [3, 1, 2] | sort | first }}|{{ d | items | list }}|{{ d | dictsort }})J", R"J(123|1/None/a|['h', 'e', 'l', 'l', 'o']|olleh|1|[('b', 1), ('a', [1, 2.5, None, True])]|[('a', [1, 2.5, None, True]), ('b', 1)])J"},
      {R"J({{ undefined_thing | length }}|{{ undefined_thing | list }}|{{ undefined_thing | string }}|{{ undefined_thing | items | list }})J", R"J(0|[]||[])J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaFilters, Conversions) {
  static const Case kCases[] = {
      {R"J({{ 3.7 | int }}|{{ '42' | int }}|{{ 'x' | int }}|{{ '3.5' | float }}|{{ -3 | abs }}|{{ -2.5 | abs }}|{{ 2.5 | round }}|{{ 3.14159 | round(2) }}|{{ 5 | string }})J", R"J(3|42|0|3.5|3|2.5|2.0|3.14|5)J"},
      {R"J({{ 2.0 | int }}|{{ '  12  ' | int }}|{{ True | int }}|{{ none | int }}|{{ '0x1A' | int(0, 16) }}|{{ 1.5 | round(0, 'floor') }}|{{ 0.5 | round }}|{{ 1.5 | round }}|{{ 7 | round }}|{{ 'q' | int(5) }})J", R"J(2|12|1|0|26|1.0|0.0|2.0|7|5)J"},
      {R"J({{ undefined_var }}|{{ undefined_var | default('dflt') }}|{{ '' | default('x') }}|{{ '' | default('x', true) }}|{{ 'x' | default }}|{{ undefined_thing | d('y') }}|{{ none | default('z') }}|{{ none | default('z', boolean=true) }})J", R"J(|dflt||x|x|y|None|z)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaFilters, Tests) {
  static const Case kCases[] = {
      {R"J({{ undefined_var is defined }}|{{ n is number }}|{{ n is integer }}|{{ f is float }}|{{ none is none }}|{{ true is number }}|{{ true is integer }})J", R"J(False|True|True|True|True|True|False)J"},
      {R"J({{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is string }}{{ d is mapping }}{{ xs is iterable }}{{ xs is sequence }}{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 1 is true }}{{ undefined_var is undefined }})J", R"J(TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueFalseTrue)J"},
      {R"J({{ 3 is gt 2 }}|{{ 2 is le 2 }}|{{ 'a' is in 'abc' }}|{{ none is sameas none }}|{{ 1 is ne 2 }}|{{ [1] is sameas [1] }}|{{ 'abc' is lower }}|{{ 'ABC' is upper }}|{{ n is callable }}|{{ range is callable }})J", R"J(True|True|True|True|True|False|True|True|False|True)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaFilters, Methods) {
  static const Case kCases[] = {
      {R"J({{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x','c')) }}|{{ 'aXa'.replace('a','b') }}|{{ '{} and {}'.format(1, 'two') }}|{{ 'hello world'.title() }})J", R"J(Hello World|Hello World  |  Hello World|['a', 'b', '', 'c']|['a', 'b']|True|True|bXb|1 and two|Hello World)J"},
      {R"J({{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 5) }}|{{ d.keys() | list }}|{{ d.values() | list }})J", R"J([1, 2.5, None, True]|None|5|['b', 'a']|[1, [1, 2.5, None, True]])J"},
      {R"J({{ 'a b c'.split(' ', 1) }}|{{ 'x\ny'.splitlines() }}|{{ '  '.isspace() }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'a-b'.capitalize() }}|{{ 'aaa'.count('a') }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ '12'.isdigit() }})J", R"J(['a', 'b c']|['x', 'y']|True|ABC|abc|A-b|3|1|3|True)J"},
      {R"J({% set content = messages[2].content %}{% if '</think>' in content %}{{ content.split('</think>')[-1].lstrip('\n') }}|{{ content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}{% endif %})J", R"J(Hello!|hmm)J"},
      {R"J({{ '{0}-{1}-{0}'.format('a', 'b') }}|{{ '{x}!'.format(x=1) }}|{{ '{{}}{}'.format(5) }}|{{ '-'.join(['a', 'b']) }}|{{ 'xyxzy'.strip('xy') }})J", R"J(a-b-a|1!|{}5|a-b|z)J"},
      {R"J({{ range(5) | list }}|{{ range(1, 10, 3) | list }}|{{ range(5, 0, -2) | list }}|{{ dict(a=1, b=2) }})J", R"J([0, 1, 2, 3, 4]|[1, 4, 7]|[5, 3, 1]|{'a': 1, 'b': 2})J"},
  };
  check(kCases, std::size(kCases));
}

}  // namespace
}  // namespace folio::jinja
