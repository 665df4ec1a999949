#include "sched/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace folio {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv)
    : config_(config),
      kv_(kv),
      headroom_(config.schedule_conservativeness, config.max_model_len, config.reactive_headroom) {
  FOLIO_CHECK(config.validate().ok(), "invalid SchedulerConfig");
}

int Scheduler::output_budget(const SequenceGroup& g) const {
  return std::min(g.params.max_tokens, config_.max_model_len - g.prompt_len);
}

bool Scheduler::before(const SequenceGroup* a, const SequenceGroup* b) const {
  if (config_.policy == SchedulePolicy::kPriority && a->priority != b->priority)
    return a->priority < b->priority;
  if (config_.policy == SchedulePolicy::kLongestOutputFirst) {
    const int ka = output_budget(*a), kb = output_budget(*b);
    if (ka != kb) return ka > kb;
  }
  return a->arrival < b->arrival;
}

void Scheduler::enqueue(Queue& q, SequenceGroup* g) {
  auto it = std::upper_bound(q.begin(), q.end(), g,
                             [this](const SequenceGroup* a, const SequenceGroup* b) {
                               return before(a, b);
                             });
  q.insert(it, g);
}

void Scheduler::dequeue(Queue& q, const SequenceGroup* g) {
  auto it = std::find(q.begin(), q.end(), g);
  if (it != q.end()) q.erase(it);
}

int Scheduler::seq_capacity() const {
  const int bs = kv_.block_size(), cache_blocks = kv_.num_total_blocks();
  // With a sliding window a decoding sequence holds the blocks its window spans and the next
  // one, however long it grows: the cache bounds it only where that does not fit.
  const int window_blocks =
      config_.sliding_window > 0 ? (config_.sliding_window - 1 + bs - 1) / bs + 2 : 0;
  if (window_blocks > 0 && window_blocks <= cache_blocks) return config_.max_model_len;
  return std::min(config_.max_model_len, cache_blocks * bs);
}

const SequenceGroup* Scheduler::group(GroupId id) const {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

Status Scheduler::add_request(Request r) {
  if (groups_.count(r.id)) return invalid_argument("request id " + std::to_string(r.id) +
                                                   " is already in use");
  if (r.prompt.empty()) return invalid_argument("the prompt is empty");
  if (r.params.n < 1) return invalid_argument("n must be at least 1");
  const int len = static_cast<int>(r.prompt.size());
  std::string why;
  if (len + 1 > config_.max_model_len) {
    why = "prompt of " + std::to_string(len) + " tokens leaves no room to generate within " +
          "max_model_len " + std::to_string(config_.max_model_len);
  } else if (len + 1 > kv_.num_total_blocks() * kv_.block_size()) {
    why = "prompt of " + std::to_string(len) + " tokens (+1 generated) exceeds the KV cache (" +
          std::to_string(kv_.num_total_blocks() * kv_.block_size()) + " token slots)";
  }
  if (!why.empty()) {
    pending_failed_.push_back({r.id, why});
    ++stats_.num_failed;
    return Status::ok_status();
  }
  auto g = std::make_unique<SequenceGroup>();
  g->id = r.id;
  g->params = std::move(r.params);
  g->priority = r.priority;
  g->arrival = next_arrival_++;
  g->cache_salt = std::move(r.cache_salt);
  g->prompt_len = len;
  g->forked = g->params.n == 1;
  Sequence s;
  s.id = next_seq_id_++;
  s.tokens = std::move(r.prompt);
  s.prompt_len = len;
  g->seqs.push_back(std::move(s));
  seq_group_[g->seqs[0].id] = g->id;
  enqueue(waiting_, g.get());
  groups_.emplace(g->id, std::move(g));
  return Status::ok_status();
}

Status Scheduler::abort_request(GroupId id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return not_found("no live request with id " + std::to_string(id));
  SequenceGroup* g = it->second.get();
  for (Sequence& s : g->seqs) {
    if (!s.finished()) s.status = SeqStatus::kFinishedAborted;
    kv_.free(s.id);
    seq_group_.erase(s.id);
  }
  dequeue(waiting_, g);
  dequeue(running_, g);
  dequeue(swapped_, g);
  groups_.erase(it);
  return Status::ok_status();
}

std::vector<Scheduler::Planned> Scheduler::plan(SequenceGroup* g, int budget,
                                                int seqs_left) const {
  std::vector<Planned> out;
  if (g->num_live() > seqs_left) return out;  // a group steps together or not at all
  for (Sequence& s : g->seqs) {
    if (s.finished() || s.num_uncomputed() == 0) continue;
    int n = std::min(s.num_uncomputed(), budget);
    if (config_.long_prefill_token_threshold > 0)
      n = std::min(n, config_.long_prefill_token_threshold);
    if (!config_.enable_chunked_prefill && n < s.num_uncomputed()) n = 0;
    if (n == 0) continue;
    out.push_back({&s, n});
    budget -= n;
  }
  return out;
}

int Scheduler::blocks_needed(const std::vector<Planned>& plan) const {
  int need = 0;
  for (const Planned& p : plan) need += kv_.num_blocks_needed(p.seq->id, p.seq->num_computed + p.num_new);
  return need;
}

void Scheduler::commit(SequenceGroup* g, const std::vector<Planned>& plan, SchedulerOutput& out) {
  for (const Planned& p : plan) {
    Sequence& s = *p.seq;
    FOLIO_CHECK(kv_.append_slots(s.id, s.num_computed + p.num_new), "planned blocks vanished");
    ScheduledSeq e;
    e.seq_id = s.id;
    e.group_id = g->id;
    e.start_pos = s.num_computed;
    if (s.num_computed + p.num_new == s.num_tokens()) {
      e.sample_seq_ids.push_back(s.id);
      if (!g->forked)  // the prompt is done: the siblings sample from the same logits
        for (int i = 1; i < g->params.n; ++i) e.sample_seq_ids.push_back(next_seq_id_++);
    }
    e.token_ids = std::span<const TokenId>(s.tokens).subspan(static_cast<size_t>(s.num_computed),
                                                             static_cast<size_t>(p.num_new));
    e.block_table = kv_.block_table(s.id);
    last_.push_back({s.id, p.num_new, {}});
    if (e.sample_seq_ids.size() > 1) last_.back().fork_ids = e.sample_seq_ids;
    out.seqs.push_back(std::move(e));
    budget_ -= p.num_new;
    --seqs_left_;
  }
  // vLLM V1 caches a step's full blocks as it schedules them, so that a request admitted later in
  // the same step finds them (requests that arrive together with one system prompt would
  // otherwise each compute it). Safe because a step writes every row's K/V before any of its
  // attention reads the cache (each layer's qkv_post, or reshape_and_cache on the CPU, covers the
  // whole step first), and later steps run after it. After the whole group's slots: in token mode
  // caching locks radix nodes, which takes evictable slots the group's plan may have counted on.
  // Not while the range holds a placeholder (async scheduling: the token is not known yet);
  // advance() caches it then.
  for (const Planned& p : plan) {
    const Sequence& s = *p.seq;
    const auto first = s.tokens.begin() + s.num_computed;
    if (std::none_of(first, first + p.num_new, [](TokenId t) { return t < 0; }))
      kv_.mark_computed(s.id, s.tokens, s.num_computed + p.num_new);
  }
  g->scheduled_step = step_;
}

void Scheduler::schedule_running(SchedulerOutput& out, bool prefill_pass) {
  const Queue snapshot = running_;
  for (SequenceGroup* g : snapshot) {
    if (budget_ <= 0 || seqs_left_ <= 0) return;
    if (g->in_prefill() != prefill_pass || scheduled_now(g) || g->status != SeqStatus::kRunning)
      continue;
    std::vector<Planned> p = plan(g, budget_, seqs_left_);
    if (p.empty()) continue;
    free_out_of_window(*g);
    bool self_preempted = false;
    while (blocks_needed(p) > kv_.num_free_blocks()) {
      SequenceGroup* victim = pick_victim(g);
      if (!victim) {
        preempt(g, out);
        self_preempted = true;
        break;
      }
      preempt(victim, out);
    }
    if (!self_preempted) commit(g, p, out);
  }
}

void Scheduler::schedule_swapped(SchedulerOutput& out) {
  while (!swapped_.empty() && budget_ > 0 && seqs_left_ > 0) {
    SequenceGroup* g = swapped_.front();
    std::vector<SeqId> ids = g->live_ids();
    std::vector<Planned> p = plan(g, budget_, seqs_left_);
    if (p.empty()) return;
    free_out_of_window(*g);  // on the host: fewer blocks come back
    int need = kv_.num_blocks_to_swap(ids) + blocks_needed(p);
    if (need > kv_.num_free_blocks()) {
      if (running_.empty() && kv_.num_used_blocks() == 0) {
        // Cannot come back even into an empty cache: recompute instead (and fail if even that
        // cannot fit).
        dequeue(swapped_, g);
        preempt_recompute(g);
        continue;
      }
      return;
    }
    FOLIO_CHECK(kv_.swap_in(ids, &out.swap_in));
    dequeue(swapped_, g);
    g->status = SeqStatus::kRunning;
    for (Sequence& s : g->seqs)
      if (!s.finished()) s.status = SeqStatus::kRunning;
    enqueue(running_, g);
    commit(g, p, out);
  }
}

int64_t Scheduler::running_growth(std::vector<AdmissionHeadroom::Growth>* growth) const {
  int64_t held = 0;
  for (const SequenceGroup* g : running_) {
    headroom_.add_growth(*g, kv_.block_size(), growth);
    held += blocks_held(*g);
  }
  std::stable_sort(growth->begin(), growth->end(),
                   [](const auto& a, const auto& b) { return a.left > b.left; });
  return held;
}

int64_t Scheduler::blocks_held(const SequenceGroup& g) const {
  int64_t held = 0;
  for (const Sequence& s : g.seqs)
    if (!s.finished() && kv_.has_seq(s.id)) held += kv_.num_held_blocks(s.id);
  return held;
}

void Scheduler::free_out_of_window(const SequenceGroup& g) {
  if (config_.sliding_window <= 0) return;
  for (const Sequence& s : g.seqs)
    if (!s.finished() && kv_.has_seq(s.id)) kv_.free_out_of_window(s.id, s.num_computed);
}

void Scheduler::schedule_waiting(SchedulerOutput& out) {
  // The admission headroom's view, built on the first admission that needs it: the growth of
  // the running sequences (sorted by tokens left) and the blocks they hold now.
  std::vector<AdmissionHeadroom::Growth> growth;
  int64_t held = -1;
  while (!waiting_.empty() && budget_ > 0 && seqs_left_ > 0) {
    SequenceGroup* g = waiting_.front();
    for (Sequence& s : g->seqs)
      if (!s.finished() && !kv_.has_seq(s.id))
        s.num_computed = kv_.get_computed_prefix(s.id, s.tokens, g->cache_salt);
    free_out_of_window(*g);  // a prefix hit longer than the window
    std::vector<Planned> p = plan(g, budget_, seqs_left_);
    const int need = p.empty() ? 0 : blocks_needed(p);
    bool fits = !p.empty() && need <= kv_.num_free_blocks();
    int64_t g_held = 0;
    if (fits && headroom_.enabled() && !running_.empty()) {
      // The first group into an idle cache always goes in; a later one must keep the peak of
      // everyone's expected growth, its own included, within the cache (the blocks held now and
      // the free ones). Its entries stay in `growth` only if it is admitted (else we return).
      if (held < 0) held = running_growth(&growth);
      std::vector<AdmissionHeadroom::Growth> mine;
      headroom_.add_growth(*g, kv_.block_size(), &mine);
      for (const auto& e : mine) AdmissionHeadroom::insert_sorted(growth, e);
      g_held = blocks_held(*g);
      fits = AdmissionHeadroom::peak_blocks(growth, kv_.block_size(), config_.sliding_window) <=
             kv_.num_free_blocks() + held + g_held;
    }
    if (fits) {
      if (held >= 0) held += g_held + need;  // what it holds once this step's blocks are in
      dequeue(waiting_, g);
      g->status = SeqStatus::kRunning;
      for (Sequence& s : g->seqs)
        if (!s.finished()) {
          s.status = SeqStatus::kRunning;
          stats_.num_prefix_hit_tokens += s.num_computed;  // this admission's prefix-cache hit
        }
      enqueue(running_, g);
      commit(g, p, out);
      continue;
    }
    for (Sequence& s : g->seqs) {  // roll back the prefix lookups; retried next step
      kv_.free(s.id);
      s.num_computed = 0;
    }
    if (!p.empty() && running_.empty() && kv_.num_used_blocks() == 0) {
      fail(g, "request needs more KV cache than the whole cache holds (" +
                  std::to_string(kv_.num_total_blocks()) + " blocks of " +
                  std::to_string(kv_.block_size()) + " tokens)");
      out.failed.push_back(pending_failed_.back());
      pending_failed_.pop_back();
      continue;
    }
    return;
  }
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.block_size = kv_.block_size();
  out.failed = std::move(pending_failed_);
  pending_failed_.clear();
  ++step_;
  last_.clear();
  out.seqs.reserve(running_.size());
  budget_ = config_.max_num_batched_tokens;
  seqs_left_ = config_.max_num_seqs;
  preempted_this_step_ = false;

  schedule_running(out, /*prefill_pass=*/false);
  const bool decoded = !out.seqs.empty();  // the decode pass scheduled rows
  if (config_.decode_rows_longest_first)  // the decode pass's rows: start_pos + 1 is the context
    std::stable_sort(out.seqs.begin(), out.seqs.end(),
                     [](const ScheduledSeq& a, const ScheduledSeq& b) {
                       return a.start_pos + a.num_tokens() > b.start_pos + b.num_tokens();
                     });
  schedule_running(out, /*prefill_pass=*/true);
  if (!preempted_this_step_) schedule_swapped(out);
  if (!preempted_this_step_ && swapped_.empty()) schedule_waiting(out);

  headroom_.end_step(preempted_this_step_, decoded, running_.empty());
  out.copies = kv_.take_pending_copies();
  out.num_batched_tokens = config_.max_num_batched_tokens - budget_;
  record_step_stats(out);
  return out;
}

}  // namespace folio
