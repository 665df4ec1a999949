// Whitespace control, trim_blocks, lstrip_blocks, comments, raw blocks.
// Expected strings were produced by Jinja2 3.1 configured like Hugging Face's chat-template
// environment (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson); see kVars for the
// variables every case sees.
#include <string>

#include <gtest/gtest.h>

#include "jinja_test_cases.h"
#include "tokenizer/jinja_template.h"

namespace folio::jinja {
namespace {

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  static const Case kCases[] = {
      {R"J(  {% if true %}
    x
  {% endif %}
  y
)J", R"J(    x
  y)J"},
      {R"J({% if true %}
A
{% endif %}
B
{# c #}
C)J", R"J(A
B
C)J"},
      {R"J({{ 'a' }}
{{ 'b' }}
{% if 1 %}
{{ 'c' }}
{% endif %}
)J", R"J(a
b
c
)J"},
      {R"J({% for message in messages %}
  {% if message.role == 'user' %}
    U: {{ message.content }}
  {% else %}
    O: {{ message.role }}
  {% endif %}
{% endfor %}
)J", R"J(    O: system
    U: Hi there
    O: assistant
    O: tool
)J"},
      {R"J({% if true %}   
  text  {% endif %}   
)J", R"J(   
  text     )J"},
      {R"J(x  {% if true %}y{% endif %}
  z)J", R"J(x  y  z)J"},
      {R"J(trailing newline is dropped
)J", R"J(trailing newline is dropped)J"},
      {R"J(two trailing newlines keep one

)J", R"J(two trailing newlines keep one
)J"},
      {R"J(crlf
lines
{% if true %}
x
{% endif %}
)J", R"J(crlf
lines
x
)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaWhitespace, Markers) {
  static const Case kCases[] = {
      {R"J(a
  {%- if true -%}  
 b 
 {%- endif %}
c)J", R"J(abc)J"},
      {R"J({{- ' x ' -}}  
 {{ 'y' }})J", R"J( x y)J"},
      {R"J(  {%+ if true %}x{% endif %}
  {%- if true +%}
 y{% endif %})J", R"J(  x
 y)J"},
      {R"J({%- for m in messages -%}
  {{ m.role }}
{%- endfor %})J", R"J(systemuserassistanttool)J"},
      {R"J({{ 'a' }}  {{- 'b' -}}  

  {{ 'c' }})J", R"J(abc)J"},
      {R"J(a 　{%- if true %}b{% endif %})J", R"J(ab)J"},
  };
  check(kCases, std::size(kCases));
}

TEST(JinjaWhitespace, CommentsAndRaw) {
  static const Case kCases[] = {
      {R"J(a {# comment #} b {#- c -#} d)J", R"J(a  bd)J"},
      {R"J(	{# comment #}
z
   {#- c2 #}  q)J", R"J(z  q)J"},
      {R"J({# multi
line
comment #}
after)J", R"J(after)J"},
      {R"J({% raw %}{{ not }} {% evaluated %}{% endraw %}!)J", R"J({{ not }} {% evaluated %}!)J"},
      {R"J(x {%- raw -%}  {{ y }}  {%- endraw -%}  z)J", R"J(x{{ y }}z)J"},
      {R"J({% raw %}
  {{ a }}
{% endraw %}
b)J", R"J(
  {{ a }}
b)J"},
      {R"J({{ {'a': {'b': 1}} }}|{{ '}}' }}|{{ '%}' }})J", R"J({'a': {'b': 1}}|}}|%})J"},
  };
  check(kCases, std::size(kCases));
}

}  // namespace
}  // namespace folio::jinja
