// jinja::Template: the interpreter's public face. Parses Jinja source once, renders it many
// times against variables, with errors returned as Status (never thrown) and every render
// bounded by Limits.
//
// The environment matches Hugging Face's chat-template one: trim_blocks and lstrip_blocks on,
// default Undefined, loop controls (break/continue), `{% generation %}` blocks, and globals
// raise_exception, strftime_now, range, namespace, dict. A Template is immutable after parse
// and may be rendered from several threads at once.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_value.h"

namespace folio::jinja {

struct TemplateOptions {
  LexOptions lex;  // trim_blocks/lstrip_blocks on by default
  Limits limits;
  std::function<std::tm()> clock;  // for strftime_now; null: the local wall clock
};

class Template {
 public:
  // Errors name the line: "template syntax error at line 3: expected 'endif', ...".
  static Result<Template> parse(std::string_view source, TemplateOptions options = {});

  // `vars` is a dict of top-level variables. Errors: a template error (invalid argument, with
  // the line and, for raise_exception, its message) or a limit (resource exhausted).
  Result<std::string> render(const Value& vars) const;

  const TemplateOptions& options() const { return options_; }

 private:
  Template(std::shared_ptr<const Body> body, TemplateOptions options)
      : body_(std::move(body)), options_(std::move(options)) {}

  std::shared_ptr<const Body> body_;
  TemplateOptions options_;
};

// Formats a JinjaError the way Template reports it.
Status error_status(const JinjaError& error);

}  // namespace folio::jinja
