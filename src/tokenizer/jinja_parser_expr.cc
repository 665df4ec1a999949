// Expression half of the parser (precedence climbing as in Jinja2's parser.py).
#include "tokenizer/jinja_parser.h"

namespace folio::jinja {

ExprPtr Parser::make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr Parser::make_binary(const std::string& op, ExprPtr a, ExprPtr b) {
  ExprPtr e = make(ExprKind::kBinary, a->line);
  e->name = op;
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  ExprPtr node = parse_or();
  if (!with_condexpr) return node;
  while (at_name("if")) {
    int line = next().line;
    ExprPtr cond = make(ExprKind::kCondition, line);
    ExprPtr test = parse_or();
    ExprPtr otherwise;
    if (at_name("else")) {
      next();
      otherwise = parse_expression();
    }
    cond->children.push_back(std::move(test));
    cond->children.push_back(std::move(node));
    cond->children.push_back(std::move(otherwise));
    node = std::move(cond);
  }
  return node;
}

// Comma-separated expressions; a single one without a trailing comma is not a tuple.
ExprPtr Parser::parse_tuple(bool with_condexpr) {
  int line = peek().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) {
      if (!at_op(",")) break;
      next();
      is_tuple = true;
      TokenType t = peek().type;
      if (at_op(")") || at_op("]") || t == TokenType::kVarEnd || t == TokenType::kBlockEnd ||
          at_op("=") || at_name("in") || at_name("if")) {
        break;
      }
    }
    items.push_back(parse_expression(with_condexpr));
  }
  if (!is_tuple) return std::move(items[0]);
  ExprPtr node = make(ExprKind::kTuple, line);
  node->children = std::move(items);
  return node;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    next();
    left = make_binary("or", std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    next();
    left = make_binary("and", std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  DepthGuard guard(*this);
  ExprPtr e = make(ExprKind::kUnary, next().line);
  e->name = "not";
  e->children.push_back(parse_not());
  return e;
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  static const char* kOps[] = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    for (const char* o : kOps) if (at_op(o)) op = o;
    if (!op.empty()) {
      next();
    } else if (at_name("in")) {
      next();
      op = "in";
    } else if (at_name("not") && at_name("in", 1)) {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::kCompare, first->line);
      cmp->children.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->children.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    std::string op = next().text;
    left = make_binary(op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (at_op("~")) {
    next();
    left = make_binary("~", std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    std::string op = next().text;
    left = make_binary(op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_op("**")) {
    next();
    left = make_binary("**", std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    Token t = next();
    node = make(ExprKind::kUnary, t.line);
    node->name = t.text;
    node->children.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  int line = t.line;
  if (t.type == TokenType::kName) {
    std::string n = next().text;
    ExprPtr e = make(ExprKind::kLiteral, line);
    if (n == "true" || n == "True") e->literal = Value(true);
    else if (n == "false" || n == "False") e->literal = Value(false);
    else if (n == "none" || n == "None") e->literal = Value::none();
    else { e->kind = ExprKind::kName; e->name = n; }
    return e;
  }
  if (t.type == TokenType::kString) {
    std::string s;
    while (peek().type == TokenType::kString) s += next().text;
    ExprPtr e = make(ExprKind::kLiteral, line);
    e->literal = Value(std::move(s));
    return e;
  }
  if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
    Token n = next();
    ExprPtr e = make(ExprKind::kLiteral, line);
    e->literal = n.type == TokenType::kInt ? Value(n.int_value) : Value(n.float_value);
    return e;
  }
  if (at_op("(")) {
    next();
    if (at_op(")")) {
      next();
      return make(ExprKind::kTuple, line);
    }
    ExprPtr e = parse_tuple();
    expect_op(")");
    return e;
  }
  if (at_op("[")) {
    next();
    ExprPtr e = make(ExprKind::kList, line);
    while (!at_op("]")) {
      e->children.push_back(parse_expression());
      if (!at_op(",")) break;
      next();
    }
    expect_op("]");
    return e;
  }
  if (at_op("{")) {
    next();
    ExprPtr e = make(ExprKind::kDict, line);
    while (!at_op("}")) {
      e->children.push_back(parse_expression());
      expect_op(":");
      e->children.push_back(parse_expression());
      if (!at_op(",")) break;
      next();
    }
    expect_op("}");
    return e;
  }
  fail("unexpected " + describe(t) + " in expression");
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".")) {
      int line = next().line;
      const Token& t = peek();
      if (t.type == TokenType::kName) {
        ExprPtr e = make(ExprKind::kGetAttr, line);
        e->name = next().text;
        e->children.push_back(std::move(node));
        node = std::move(e);
      } else if (t.type == TokenType::kInt) {
        ExprPtr e = make(ExprKind::kGetItem, line);
        ExprPtr index = make(ExprKind::kLiteral, line);
        index->literal = Value(next().int_value);
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(index));
        node = std::move(e);
      } else {
        fail("expected an attribute name after '.', got " + describe(t));
      }
    } else if (at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      ExprPtr call = make(ExprKind::kCall, peek().line);
      call->children.push_back(std::move(node));
      parse_call_args(*call);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  int line = next().line;  // '['
  std::vector<ExprPtr> parts;  // up to 3 slice parts
  bool is_slice = false;
  parts.emplace_back();
  while (!at_op("]")) {
    if (at_op(":")) {
      next();
      is_slice = true;
      if (parts.size() == 3) fail("too many ':' in slice");
      parts.emplace_back();
      continue;
    }
    if (parts.back()) fail("expected ']' or ':' in subscript, got " + describe(peek()));
    parts.back() = parse_expression();
  }
  expect_op("]");
  if (!is_slice && !parts[0]) fail("empty subscript '[]'");
  ExprPtr e = make(is_slice ? ExprKind::kSlice : ExprKind::kGetItem, line);
  e->children.push_back(std::move(node));
  parts.resize(is_slice ? 3 : 1);
  for (auto& p : parts) e->children.push_back(std::move(p));
  return e;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  while (!at_op(")")) {
    if (at_op("*") || at_op("**")) fail("*args and **kwargs in calls are not supported");
    if (peek().type == TokenType::kName && at_op("=", 1)) {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(key, parse_expression());
    } else {
      if (!call.kwargs.empty()) fail("positional argument follows keyword argument");
      call.children.push_back(parse_expression());
    }
    if (!at_op(",")) break;
    next();
  }
  expect_op(")");
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      next();
      node = parse_filter(std::move(node));
    } else if (at_name("is")) {
      next();
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      ExprPtr call = make(ExprKind::kCall, peek().line);
      call->children.push_back(std::move(node));
      parse_call_args(*call);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr node) {
  ExprPtr f = make(ExprKind::kFilter, peek().line);
  f->name = expect_name();
  f->children.push_back(std::move(node));  // may be null in a {% filter %} chain
  if (at_op("(")) parse_call_args(*f);
  return f;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  ExprPtr t = make(ExprKind::kTest, peek().line);
  if (at_name("not")) {
    next();
    t->negated = true;
  }
  t->name = expect_name();
  t->children.push_back(std::move(node));
  const Token& n = peek();
  if (at_op("(")) {
    parse_call_args(*t);
  } else if ((n.type == TokenType::kName || n.type == TokenType::kString ||
              n.type == TokenType::kInt || n.type == TokenType::kFloat || at_op("[") ||
              at_op("{")) &&
             !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail("cannot chain multiple tests with 'is'");
    t->children.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

}  // namespace folio::jinja
