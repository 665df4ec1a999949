#include "kv/radix_tree.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "base/check.h"

namespace folio {
namespace {

size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

RadixNode* RadixTree::root(std::string_view salt) {
  auto it = roots_.find(salt);
  if (it == roots_.end())
    it = roots_.emplace(std::string(salt), std::make_unique<RadixNode>()).first;
  return it->second.get();
}

RadixNode* RadixTree::split(RadixNode* node, size_t at) {
  // The new node takes the first `at` tokens and becomes node's parent; `node` keeps its
  // identity (and the locks that point at it).
  auto mid = std::make_unique<RadixNode>();
  mid->tokens.assign(node->tokens.begin(), node->tokens.begin() + at);
  mid->slots.assign(node->slots.begin(), node->slots.begin() + at);
  mid->parent = node->parent;
  mid->lock_ref = node->lock_ref;
  mid->last_access = node->last_access;
  mid->serial = next_serial_++;
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + at);
  node->slots.erase(node->slots.begin(), node->slots.begin() + at);
  RadixNode* parent = node->parent;
  auto self = std::move(parent->children[mid->tokens[0]]);
  node->parent = mid.get();
  mid->children.emplace(node->tokens[0], std::move(self));
  RadixNode* raw = mid.get();
  parent->children[raw->tokens[0]] = std::move(mid);
  return raw;
}

RadixNode* RadixTree::add_child(RadixNode* parent, std::span<const TokenId> tokens,
                                std::span<const int32_t> slots) {
  auto child = std::make_unique<RadixNode>();
  child->tokens.assign(tokens.begin(), tokens.end());
  child->slots.assign(slots.begin(), slots.end());
  child->parent = parent;
  child->last_access = tick_;
  child->serial = next_serial_++;
  evictable_ += static_cast<int>(tokens.size());
  stored_ += static_cast<int>(tokens.size());
  RadixNode* raw = child.get();
  parent->children.emplace(tokens[0], std::move(child));
  return raw;
}

std::pair<RadixNode*, int> RadixTree::match(std::string_view salt, std::span<const TokenId> tokens,
                                            int max_len, std::vector<int32_t>* slots) {
  ++tick_;
  RadixNode* node = root(salt);
  auto rest = tokens.first(std::min(tokens.size(), static_cast<size_t>(std::max(0, max_len))));
  size_t pos = 0;
  while (pos < rest.size()) {
    auto it = node->children.find(rest[pos]);
    if (it == node->children.end()) break;
    RadixNode* child = it->second.get();
    size_t m = common_prefix(child->tokens, rest.subspan(pos));
    if (m < child->tokens.size()) child = split(child, m);
    slots->insert(slots->end(), child->slots.begin(), child->slots.end());
    child->last_access = tick_;
    pos += m;
    node = child;
  }
  return {node, static_cast<int>(pos)};
}

RadixNode* RadixTree::insert(std::string_view salt, RadixNode* from, int from_len,
                             std::span<const TokenId> tokens, std::span<const int32_t> slots,
                             std::vector<int32_t>* stored) {
  ++tick_;
  RadixNode* node = from ? from : root(salt);
  size_t pos = static_cast<size_t>(from ? from_len : 0);
  node->last_access = tick_;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {
      auto new_tokens = tokens.subspan(pos);
      auto new_slots = slots.subspan(pos);
      stored->insert(stored->end(), new_slots.begin(), new_slots.end());
      if (node == from && node->parent && node->children.empty() && node->lock_ref == 1) {
        node->tokens.insert(node->tokens.end(), new_tokens.begin(), new_tokens.end());
        node->slots.insert(node->slots.end(), new_slots.begin(), new_slots.end());
        stored_ += static_cast<int>(new_tokens.size());
        return node;
      }
      return add_child(node, new_tokens, new_slots);
    }
    RadixNode* child = it->second.get();
    size_t m = common_prefix(child->tokens, tokens.subspan(pos));
    if (m < child->tokens.size()) child = split(child, m);
    child->last_access = tick_;
    pos += m;
    node = child;
  }
  return node;
}

void RadixTree::lock(RadixNode* node) {
  for (RadixNode* n = node; n && n->parent; n = n->parent)
    if (n->lock_ref++ == 0) evictable_ -= static_cast<int>(n->tokens.size());
}

void RadixTree::unlock(RadixNode* node) {
  for (RadixNode* n = node; n && n->parent; n = n->parent) {
    FOLIO_CHECK(n->lock_ref > 0, "radix unlock below zero");
    if (--n->lock_ref == 0) evictable_ += static_cast<int>(n->tokens.size());
  }
}

void RadixTree::evict(int num_slots, std::vector<int32_t>* dropped) {
  using Item = std::tuple<uint64_t, uint64_t, RadixNode*>;  // (last_access, serial, node)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  auto push_if_leaf = [&](RadixNode* n) {
    if (n->parent && n->children.empty() && n->lock_ref == 0)
      heap.emplace(n->last_access, n->serial, n);
  };
  for (auto& [salt, r] : roots_) {
    std::vector<RadixNode*> stack{r.get()};
    while (!stack.empty()) {
      RadixNode* n = stack.back();
      stack.pop_back();
      push_if_leaf(n);
      for (auto& [tok, c] : n->children) stack.push_back(c.get());
    }
  }
  int freed = 0;
  while (freed < num_slots && !heap.empty()) {
    RadixNode* n = std::get<2>(heap.top());
    heap.pop();
    int len = static_cast<int>(n->tokens.size());
    dropped->insert(dropped->end(), n->slots.begin(), n->slots.end());
    freed += len;
    evictable_ -= len;
    stored_ -= len;
    RadixNode* parent = n->parent;
    parent->children.erase(n->tokens[0]);  // destroys n
    push_if_leaf(parent);
  }
}

Status RadixTree::check_node(const RadixNode* n, const std::map<const RadixNode*, int>& held,
                             int* lock_sum, int* evictable, int* stored) const {
  int locks = 0;
  if (auto it = held.find(n); it != held.end()) locks = it->second;
  for (const auto& [tok, c] : n->children) {
    if (c->tokens.empty() || c->tokens[0] != tok || c->parent != n)
      return internal_error("radix tree: bad child link");
    if (c->tokens.size() != c->slots.size())
      return internal_error("radix tree: tokens and slots differ in length");
    int sub = 0;
    FOLIO_RETURN_IF_ERROR(check_node(c.get(), held, &sub, evictable, stored));
    locks += sub;
  }
  if (n->parent) {
    if (n->lock_ref != locks)
      return internal_error("radix tree: lock_ref " + std::to_string(n->lock_ref) + " but " +
                            std::to_string(locks) + " sequences below");
    if (n->lock_ref == 0) *evictable += static_cast<int>(n->tokens.size());
    *stored += static_cast<int>(n->tokens.size());
  }
  *lock_sum = locks;
  return Status::ok_status();
}

Status RadixTree::check(const std::map<const RadixNode*, int>& held) const {
  int evictable = 0, stored = 0;
  for (const auto& [salt, r] : roots_) {
    int locks = 0;
    FOLIO_RETURN_IF_ERROR(check_node(r.get(), held, &locks, &evictable, &stored));
  }
  if (evictable != evictable_ || stored != stored_)
    return internal_error("radix tree: evictable/stored counters drifted");
  return Status::ok_status();
}

}  // namespace folio
