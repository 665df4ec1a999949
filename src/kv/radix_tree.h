// RadixTree: token-granular prefix cache for token mode (SGLang's RadixAttention over
// LightLLM's token slots). Each edge holds a run of token ids and the KV slots computed for them;
// one tree per cache salt, so tenants never share.
//
// Locks: a sequence holds a lock on the deepest node of the prefix it uses; lock_ref(n) counts
// the sequences whose node lies in n's subtree, so a locked node is never evicted. Unlocked
// nodes are evictable, leaves first, least recently used first (a logical tick, no clock).
// Node pointers stay valid while locked: a split keeps the original node as the deeper half.
// The tree owns one reference on each slot it stores; it tells the caller which slots it
// started or stopped storing (`stored`, `dropped`) and never touches the pool itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/sequence.h"

namespace folio {

struct RadixNode {
  std::vector<TokenId> tokens;  // the edge into this node; empty only for a root
  std::vector<int32_t> slots;   // same length as tokens
  RadixNode* parent = nullptr;  // nullptr for a root
  std::map<TokenId, std::unique_ptr<RadixNode>> children;  // keyed by the child's first token
  int lock_ref = 0;
  uint64_t last_access = 0;
  uint64_t serial = 0;          // creation order, breaks LRU ties deterministically
};

class RadixTree {
 public:
  // Longest stored prefix of tokens[0, max_len); splits the last node if the match ends inside
  // it. Appends the matched slots to `slots`; returns the deepest node and the match length
  // (node is the root when nothing matched).
  std::pair<RadixNode*, int> match(std::string_view salt, std::span<const TokenId> tokens,
                                   int max_len, std::vector<int32_t>* slots);
  // Stores tokens[from_len, tokens.size()) with their `slots` below `from` (which covers
  // tokens[0, from_len); nullptr = the salt's root). Parts already stored are shared, not
  // duplicated. A leaf locked only by the caller (from, lock_ref 1) is extended in place.
  // Appends newly stored slots to `stored`; returns the deepest node covering all tokens.
  RadixNode* insert(std::string_view salt, RadixNode* from, int from_len,
                    std::span<const TokenId> tokens, std::span<const int32_t> slots,
                    std::vector<int32_t>* stored);
  void lock(RadixNode* node);
  void unlock(RadixNode* node);
  // Evicts unlocked leaves, least recently used first, until `num_slots` slots are dropped or
  // nothing is left to evict. Appends the dropped slots to `dropped`.
  void evict(int num_slots, std::vector<int32_t>* dropped);

  int evictable_tokens() const { return evictable_; }
  int stored_tokens() const { return stored_; }
  // Visits every non-root node.
  template <typename F>
  void for_each_node(F&& f) const {
    for (const auto& [salt, root] : roots_) visit(root.get(), f);
  }
  // Structure: edge lengths, child keys, parent links, lock_ref = sum of `held(node)` over the
  // subtree, evictable/stored counters.
  Status check(const std::map<const RadixNode*, int>& held) const;

 private:
  template <typename F>
  static void visit(const RadixNode* n, F& f) {
    for (const auto& [tok, child] : n->children) {
      f(*child);
      visit(child.get(), f);
    }
  }
  RadixNode* root(std::string_view salt);
  RadixNode* split(RadixNode* node, size_t at);
  RadixNode* add_child(RadixNode* parent, std::span<const TokenId> tokens,
                       std::span<const int32_t> slots);
  Status check_node(const RadixNode* n, const std::map<const RadixNode*, int>& held,
                    int* lock_sum, int* evictable, int* stored) const;

  std::map<std::string, std::unique_ptr<RadixNode>, std::less<>> roots_;
  uint64_t tick_ = 0;
  uint64_t next_serial_ = 1;
  int evictable_ = 0;  // tokens in unlocked nodes
  int stored_ = 0;     // tokens in all nodes
};

}  // namespace folio
