// JinjaError: the interpreter's internal error channel.
//
// Inside the Jinja interpreter (lexer, parser, evaluator, builtins) errors are thrown as
// JinjaError so that deeply nested evaluation stays readable. They never leave the module:
// jinja::Template::parse/render catch them and return a Status naming the template line.
#pragma once

#include <string>
#include <utility>

namespace folio::jinja {

enum class ErrorKind {
  kSyntax,     // the template does not parse
  kRuntime,    // a type error, undefined access, bad argument
  kRaised,     // raise_exception(msg) called by the template
  kLimit,      // step budget, output cap or recursion depth exceeded
};

struct JinjaError {
  ErrorKind kind;
  std::string message;
  int line = 0;  // 0: not known where it was thrown; the evaluator fills it in
};

[[noreturn]] inline void throw_error(std::string message, ErrorKind kind = ErrorKind::kRuntime) {
  throw JinjaError{kind, std::move(message), 0};
}

}  // namespace folio::jinja
