// Jinja lexer: template source -> a flat token stream.
//
// Text between tags becomes kText tokens (whitespace control `{%- -%}`, `{{- -}}`, `{#- -#}`,
// trim_blocks and lstrip_blocks already applied, `{% raw %}` bodies emitted verbatim, comments
// dropped). Tag interiors become expression tokens framed by kVarBegin/kVarEnd or
// kBlockBegin/kBlockEnd. Newlines are normalized to \n and one trailing newline is dropped, as
// Jinja does with keep_trailing_newline=False. Errors throw JinjaError(kSyntax) with the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio::jinja {

enum class TokenType {
  kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kInt, kFloat, kString, kOp, kEof
};

struct Token {
  TokenType type;
  std::string text;  // text/name/op spelling, or a string literal's decoded value
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

struct LexOptions {
  bool trim_blocks = true;    // drop the first newline after a block tag (HF's setting)
  bool lstrip_blocks = true;  // drop spaces/tabs before a block tag at line start (HF's setting)
  bool keep_trailing_newline = false;
};

std::vector<Token> lex(std::string_view source, const LexOptions& options);

}  // namespace folio::jinja
