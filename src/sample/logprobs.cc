#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace folio {

double log_sum_exp(std::span<const float> row) {
  FOLIO_CHECK(!row.empty());
  float m = -std::numeric_limits<float>::infinity();
  for (float x : row) m = x > m ? x : m;  // NaN never wins a comparison
  if (!std::isfinite(m)) return m;  // all -inf (or +inf present): nothing to normalize
  double sum = 0.0;
  for (float x : row) sum += std::exp(x - m);
  return static_cast<double>(m) + std::log(sum);
}

namespace {
// Strict "a ranks before b": higher value, then lower id.
inline bool ranks_before(float va, int32_t a, float vb, int32_t b) {
  return va > vb || (va == vb && a < b);
}
}  // namespace

std::vector<int32_t> top_k_ids(std::span<const float> row, int k) {
  const int n = static_cast<int>(row.size());
  k = std::clamp(k, 0, n);
  std::vector<int32_t> heap;  // min-heap by rank: heap.front() is the worst kept
  heap.reserve(static_cast<size_t>(k) + 1);
  if (k == 0) return heap;
  auto worse_first = [&](int32_t a, int32_t b) { return ranks_before(row[a], a, row[b], b); };
  for (int32_t i = 0; i < n; ++i) {
    if (std::isnan(row[i])) continue;  // never ranked (keeps the comparator a strict order)
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(i);
      std::push_heap(heap.begin(), heap.end(), worse_first);
    } else if (ranks_before(row[i], i, row[heap.front()], heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), worse_first);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), worse_first);
    }
  }
  std::sort(heap.begin(), heap.end(), worse_first);  // best first
  return heap;
}

TokenLogprobs make_token_logprobs(std::span<const float> row, int32_t token_id, int k,
                                  std::optional<double> lse) {
  FOLIO_CHECK(token_id >= 0 && static_cast<size_t>(token_id) < row.size());
  const double norm = lse ? *lse : log_sum_exp(row);
  const float value = row[token_id];
  TokenLogprobs out;
  out.token_id = token_id;
  out.logprob = static_cast<float>(static_cast<double>(value) - norm);
  int32_t rank = 0;
  for (float x : row) rank += (x >= value) ? 1 : 0;
  out.rank = rank;
  if (k > 0) {
    bool has_token = false;
    for (int32_t id : top_k_ids(row, k)) {
      out.top.push_back({id, static_cast<float>(static_cast<double>(row[id]) - norm)});
      has_token |= (id == token_id);
    }
    if (!has_token) out.top.push_back({token_id, out.logprob});
  }
  return out;
}

std::vector<std::optional<TokenLogprobs>> prompt_logprobs(std::span<const float> logits, int vocab,
                                                          std::span<const int32_t> prompt, int k,
                                                          int first_position) {
  FOLIO_CHECK(vocab > 0 && logits.size() % static_cast<size_t>(vocab) == 0);
  FOLIO_CHECK(first_position >= 0);
  const int num_rows = static_cast<int>(logits.size() / static_cast<size_t>(vocab));
  const int prompt_len = static_cast<int>(prompt.size());
  std::vector<std::optional<TokenLogprobs>> out;
  if (first_position == 0 && prompt_len > 0) out.push_back(std::nullopt);
  for (int r = 0; r < num_rows; ++r) {
    const int q = first_position + r + 1;  // the position this row predicts
    if (q >= prompt_len) break;
    auto row = logits.subspan(static_cast<size_t>(r) * vocab, static_cast<size_t>(vocab));
    out.push_back(make_token_logprobs(row, prompt[q], k));
  }
  return out;
}

}  // namespace folio
