// Jinja syntax tree: expressions and statements produced by jinja_parser, run by the evaluator.
//
// Nodes are plain structs owned through unique_ptr; each carries its source line for error
// messages. One Expr/Stmt struct per category with a kind tag keeps the evaluator a switch.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace folio::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // children: elements
  kTuple,      // children: elements
  kDict,       // children: key0, value0, key1, value1, ...
  kGetAttr,    // children[0].name
  kGetItem,    // children[0][children[1]]
  kSlice,      // children[0][children[1]:children[2]:children[3]] (null parts omitted)
  kCall,       // children[0](children[1..], kwargs)
  kFilter,     // children[0] | name(children[1..], kwargs)
  kTest,       // children[0] is [not] name(children[1..], kwargs); negated
  kUnary,      // op children[0]: "-", "+", "not"
  kBinary,     // children[0] op children[1]: + - * / // % ** ~ and or
  kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ...
  kCondition,  // children[1] if children[0] else children[2] (children[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;              // variable, attribute, filter, test or operator
  std::vector<std::string> ops;  // comparison operators of kCompare
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // branches: (condition, body)...; else is a branch with a null condition
  kFor,       // for targets in expr [if filter]: body [else else_body]
  kSet,       // set targets = expr | set name.attr = expr (attr non-empty)
  kSetBlock,  // set targets[0] %} body {% endset (then optional filter chain in expr)
  kMacro,     // macro name(params) body
  kBreak,
  kContinue,
  kFilterBlock,  // filter name(args) body: expr is the filter chain applied to a placeholder
  kBlockBody,    // a body rendered as is ({% generation %}, {% block %})
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;                        // kFor's inline `if`
  std::vector<std::string> targets;      // kFor/kSet names (several: tuple unpacking)
  std::string attr;                      // kSet on a namespace attribute: targets[0].attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
};

}  // namespace folio::jinja
