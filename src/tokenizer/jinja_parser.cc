#include "tokenizer/jinja_parser.h"

#include <algorithm>

#include "tokenizer/jinja_error.h"

namespace folio::jinja {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kText: return "template text";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "'}}'";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "'%}'";
    case TokenType::kName: return "'" + t.text + "'";
    case TokenType::kInt: case TokenType::kFloat: return "number " + t.text;
    case TokenType::kString: return "a string";
    case TokenType::kOp: return "'" + t.text + "'";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

namespace {
StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}
}  // namespace

Body parse_tokens(std::vector<Token> tokens, int max_depth) {
  return Parser(std::move(tokens), max_depth).parse_template();
}

Parser::DepthGuard::DepthGuard(Parser& p) : p_(p) {
  if (++p_.depth_ > p_.max_depth_) {
    p_.fail("template nested deeper than " + std::to_string(p_.max_depth_) + " levels");
  }
}

const Token& Parser::peek(size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}
Token Parser::next() {
  Token t = peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return t;
}
bool Parser::at_op(const char* op, size_t ahead) const {
  const Token& t = peek(ahead);
  return t.type == TokenType::kOp && t.text == op;
}
bool Parser::at_name(const char* name, size_t ahead) const {
  const Token& t = peek(ahead);
  return t.type == TokenType::kName && t.text == name;
}
void Parser::expect_op(const char* op) {
  if (!at_op(op)) fail(std::string("expected '") + op + "', got " + describe(peek()));
  next();
}
std::string Parser::expect_name() {
  if (peek().type != TokenType::kName) fail("expected a name, got " + describe(peek()));
  return next().text;
}
void Parser::expect_block_end() {
  if (peek().type != TokenType::kBlockEnd) fail("expected '%}', got " + describe(peek()));
  next();
}
void Parser::fail(const std::string& message) const { fail_at(peek(), message); }
void Parser::fail_at(const Token& t, const std::string& message) const {
  throw JinjaError{ErrorKind::kSyntax, message, t.line};
}

Body Parser::parse_template() { return parse_body({}); }

Body Parser::parse_body(const std::vector<std::string>& end_names) {
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.type == TokenType::kEof) {
      if (end_names.empty()) return body;
      fail("unexpected end of template, expected '" + end_names.back() + "'");
    }
    if (t.type == TokenType::kText) {
      auto s = make_stmt(StmtKind::kText, t.line);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kVarBegin) {
      auto s = make_stmt(StmtKind::kOutput, t.line);
      next();
      s->expr = parse_tuple();
      if (peek().type != TokenType::kVarEnd) fail("expected '}}', got " + describe(peek()));
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& name = peek(1);
      if (name.type == TokenType::kName &&
          std::find(end_names.begin(), end_names.end(), name.text) != end_names.end()) {
        return body;
      }
      if (name.type == TokenType::kName &&
          (name.text.rfind("end", 0) == 0 || name.text == "elif" || name.text == "else")) {
        fail_at(name, "unexpected '" + name.text + "'" +
                          (end_names.empty() ? std::string(", no block is open")
                                             : ", expected '" + end_names.back() + "'"));
      }
      next();
      body.push_back(parse_statement());
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

std::string Parser::take_end_tag() {
  next();  // '{%'
  return next().text;
}

StmtPtr Parser::parse_statement() {
  DepthGuard guard(*this);
  const Token& t = peek();
  if (t.type != TokenType::kName) fail("expected a tag name after '{%', got " + describe(t));
  std::string name = next().text;
  int line = t.line;
  if (name == "if") return parse_if(line);
  if (name == "for") return parse_for(line);
  if (name == "set") return parse_set(line);
  if (name == "macro") return parse_macro(line);
  if (name == "filter") return parse_filter_block(line);
  if (name == "generation") return parse_plain_block(line, "endgeneration");
  if (name == "block") {
    expect_name();
    return parse_plain_block(line, "endblock");
  }
  if (name == "break" || name == "continue") {
    expect_block_end();
    return make_stmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
  }
  fail_at(t, "unknown or unsupported tag '" + name + "'");
}

StmtPtr Parser::parse_if(int line) {
  auto s = make_stmt(StmtKind::kIf, line);
  ExprPtr cond = parse_tuple(false);
  expect_block_end();
  while (true) {
    Body body = parse_body({"elif", "else", "endif"});
    s->branches.emplace_back(std::move(cond), std::move(body));
    std::string tag = take_end_tag();
    if (tag == "elif") {
      cond = parse_tuple(false);
      expect_block_end();
    } else if (tag == "else") {
      expect_block_end();
      s->branches.emplace_back(nullptr, parse_body({"endif"}));
      take_end_tag();
      expect_block_end();
      return s;
    } else {
      expect_block_end();
      return s;
    }
  }
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  bool paren = at_op("(");
  if (paren) next();
  names.push_back(expect_name());
  while (at_op(",")) {
    next();
    if (peek().type != TokenType::kName || at_name("in")) break;
    names.push_back(expect_name());
  }
  if (paren) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(int line) {
  auto s = make_stmt(StmtKind::kFor, line);
  s->targets = parse_targets();
  if (!at_name("in")) fail("expected 'in' in for loop, got " + describe(peek()));
  next();
  s->expr = parse_tuple(false);
  if (at_name("if")) {
    next();
    s->filter = parse_expression();
  }
  if (at_name("recursive")) fail("recursive for loops are not supported");
  expect_block_end();
  s->body = parse_body({"else", "endfor"});
  if (take_end_tag() == "else") {
    expect_block_end();
    s->else_body = parse_body({"endfor"});
    take_end_tag();
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_set(int line) {
  auto s = make_stmt(StmtKind::kSet, line);
  if (peek().type == TokenType::kName && at_op(".", 1)) {
    s->targets.push_back(next().text);
    next();
    s->attr = expect_name();
  } else {
    s->targets = parse_targets();
  }
  if (at_op("=")) {
    next();
    s->expr = parse_tuple();
    expect_block_end();
    return s;
  }
  if (!s->attr.empty() || s->targets.size() != 1) fail("expected '=' in set");
  s->kind = StmtKind::kSetBlock;
  if (at_op("|")) s->filter = parse_filter_chain(nullptr);
  expect_block_end();
  s->body = parse_body({"endset"});
  take_end_tag();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_macro(int line) {
  auto s = make_stmt(StmtKind::kMacro, line);
  s->targets.push_back(expect_name());
  expect_op("(");
  while (!at_op(")")) {
    MacroParam p{expect_name(), nullptr};
    if (at_op("=")) {
      next();
      p.default_value = parse_expression();
    } else if (!s->params.empty() && s->params.back().default_value) {
      fail("macro parameter '" + p.name + "' without default follows one with a default");
    }
    s->params.push_back(std::move(p));
    if (!at_op(",")) break;
    next();
  }
  expect_op(")");
  expect_block_end();
  s->body = parse_body({"endmacro"});
  take_end_tag();
  if (peek().type == TokenType::kName) next();  // {% endmacro name %}
  expect_block_end();
  return s;
}

// A filter chain applied to nothing (base null): `| f(a) | g`, or `f(a) | g` after `filter`.
ExprPtr Parser::parse_filter_chain(ExprPtr base) {
  if (at_op("|")) next();
  ExprPtr node = parse_filter(std::move(base));
  while (at_op("|")) {
    next();
    node = parse_filter(std::move(node));
  }
  return node;
}

StmtPtr Parser::parse_filter_block(int line) {
  auto s = make_stmt(StmtKind::kFilterBlock, line);
  s->filter = parse_filter_chain(nullptr);
  expect_block_end();
  s->body = parse_body({"endfilter"});
  take_end_tag();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_plain_block(int line, const std::string& end_name) {
  auto s = make_stmt(StmtKind::kBlockBody, line);
  expect_block_end();
  s->body = parse_body({end_name});
  take_end_tag();
  if (peek().type == TokenType::kName) next();  // {% endblock name %}
  expect_block_end();
  return s;
}

}  // namespace folio::jinja
