// Jinja parser: token stream -> syntax tree (jinja_ast.h), following Jinja2's grammar and
// operator precedence (filters bind tighter than arithmetic; `~` between + and *).
//
// Errors throw JinjaError(kSyntax) with the offending line. Nesting (parentheses, unary chains,
// nested blocks) is capped at max_depth so hostile input cannot overflow the stack.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace folio::jinja {

Body parse_tokens(std::vector<Token> tokens, int max_depth);

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}
  Body parse_template();

  // Statements (jinja_parser.cc).
 private:
  Body parse_body(const std::vector<std::string>& end_names);
  StmtPtr parse_statement();
  StmtPtr parse_if(int line);
  StmtPtr parse_for(int line);
  StmtPtr parse_set(int line);
  StmtPtr parse_macro(int line);
  StmtPtr parse_filter_block(int line);
  StmtPtr parse_plain_block(int line, const std::string& end_name);
  std::vector<std::string> parse_targets();
  ExprPtr parse_filter_chain(ExprPtr base);
  // Consumes `{% <name>` where name is one of the body's end names; returns it.
  std::string take_end_tag();

  // Expressions (jinja_parser_expr.cc).
 public:
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool with_condexpr = true);

 private:
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr& call);
  ExprPtr make(ExprKind kind, int line);
  ExprPtr make_binary(const std::string& op, ExprPtr a, ExprPtr b);

  // Token access.
  const Token& peek(size_t ahead = 0) const;
  Token next();
  bool at_op(const char* op, size_t ahead = 0) const;
  bool at_name(const char* name, size_t ahead = 0) const;
  void expect_op(const char* op);
  std::string expect_name();
  void expect_block_end();
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const;

  struct DepthGuard {
    DepthGuard(Parser& p);
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
};

std::string describe(const Token& t);

}  // namespace folio::jinja
