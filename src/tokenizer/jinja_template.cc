#include "tokenizer/jinja_template.h"

#include <exception>
#include <new>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm out{};
  localtime_r(&t, &out);
  return out;
}

// Jinja rejects unknown filters and tests when compiling; so do we, with the line.
void check_names(const Expr* e) {
  if (!e) return;
  if (e->kind == ExprKind::kFilter && !has_filter(e->name)) {
    throw JinjaError{ErrorKind::kSyntax, "no filter named '" + e->name + "'", e->line};
  }
  if (e->kind == ExprKind::kTest && !has_test(e->name)) {
    throw JinjaError{ErrorKind::kSyntax, "no test named '" + e->name + "'", e->line};
  }
  for (const auto& c : e->children) check_names(c.get());
  for (const auto& [k, v] : e->kwargs) check_names(v.get());
}

void check_names(const Body& body) {
  for (const auto& s : body) {
    check_names(s->expr.get());
    check_names(s->filter.get());
    for (const auto& [cond, b] : s->branches) {
      check_names(cond.get());
      check_names(b);
    }
    for (const auto& p : s->params) check_names(p.default_value.get());
    check_names(s->body);
    check_names(s->else_body);
  }
}

}  // namespace

Status error_status(const JinjaError& e) {
  std::string where = e.line > 0 ? " at line " + std::to_string(e.line) : "";
  switch (e.kind) {
    case ErrorKind::kSyntax: return invalid_argument("template syntax error" + where + ": " + e.message);
    case ErrorKind::kRaised: return invalid_argument("template raised an exception" + where + ": " + e.message);
    case ErrorKind::kLimit: return resource_exhausted("template exceeded a limit" + where + ": " + e.message);
    case ErrorKind::kRuntime: break;
  }
  return invalid_argument("template error" + where + ": " + e.message);
}

Result<Template> Template::parse(std::string_view source, TemplateOptions options) {
  if (!is_valid_utf8(source)) return invalid_argument("template source is not valid UTF-8");
  if (!options.clock) options.clock = local_now;
  try {
    auto body = std::make_shared<Body>(
        parse_tokens(lex(source, options.lex), options.limits.max_parse_depth));
    check_names(*body);
    return Template(std::move(body), std::move(options));
  } catch (const JinjaError& e) {
    return error_status(e);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("template too large to parse");
  } catch (const std::exception& e) {
    return invalid_argument(std::string("template syntax error: ") + e.what());
  }
}

Result<std::string> Template::render(const Value& vars) const {
  try {
    Evaluator ev(options_.limits, options_.clock);
    return ev.render(*body_, vars);
  } catch (const JinjaError& e) {
    return error_status(e);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("template error: out of memory while rendering");
  } catch (const std::exception& e) {
    return invalid_argument(std::string("template error: ") + e.what());
  }
}

}  // namespace folio::jinja
