// Scheduler: applying a step's results, forking, statistics and the log line.
#include <cstdio>

#include "base/check.h"
#include "sched/scheduler.h"

namespace folio {

void Scheduler::finish_seq(SequenceGroup* g, Sequence* s, SeqStatus status) {
  if (s->finished()) return;
  s->status = status;
  kv_.free(s->id);
  (void)g;
}

void Scheduler::retire_if_done(SequenceGroup* g, UpdateResult& result) {
  if (g->num_live() > 0) return;
  g->status = SeqStatus::kFinishedStopped;
  for (const Sequence& s : g->seqs) seq_group_.erase(s.id);
  dequeue(running_, g);
  dequeue(waiting_, g);
  dequeue(swapped_, g);
  result.finished_groups.push_back(g->id);
  groups_.erase(g->id);
}

Sequence* Scheduler::find_live(SeqId id, SequenceGroup** g) {
  auto it = seq_group_.find(id);
  if (it == seq_group_.end()) return nullptr;
  auto git = groups_.find(it->second);
  if (git == groups_.end()) return nullptr;
  *g = git->second.get();
  return (*g)->find(id);
}

// 1. The scheduled tokens now have K/V; full blocks enter the prefix cache.
void Scheduler::apply_computed(std::vector<GroupId>& touched) {
  for (const Scheduled& e : last_) {
    SequenceGroup* g = nullptr;
    Sequence* s = find_live(e.seq_id, &g);
    if (!s || s->finished() || s->status != SeqStatus::kRunning) continue;  // aborted meanwhile
    s->num_computed += e.num_tokens;
    kv_.mark_computed(s->id, s->tokens, s->num_computed);
    touched.push_back(g->id);
    // 2. A finished prompt of an n > 1 group: the siblings appear, sharing every block.
    if (e.fork_ids.size() > 1 && !g->forked) {
      g->forked = true;
      const Sequence leader = *s;
      for (size_t i = 1; i < e.fork_ids.size(); ++i) {
        Sequence child = leader;
        child.id = e.fork_ids[i];
        kv_.fork(leader.id, child.id);
        seq_group_[child.id] = g->id;
        g->seqs.push_back(std::move(child));
      }
    }
  }
  last_.clear();
}

// 3. Sampled tokens (or their placeholders), with the length limits the scheduler owns.
void Scheduler::append_sampled(std::span<const SampledToken> sampled, UpdateResult& result,
                               std::vector<GroupId>& sampled_groups) {
  sampled_groups.reserve(sampled_groups.size() + sampled.size());
  for (const SampledToken& t : sampled) {
    SequenceGroup* g = nullptr;
    Sequence* s = find_live(t.seq_id, &g);
    if (!s) continue;
    sampled_groups.push_back(g->id);
    if (s->finished()) continue;
    s->tokens.push_back(t.token);
    if (s->num_output_tokens() >= g->params.max_tokens || s->num_tokens() >= seq_capacity()) {
      finish_seq(g, s, SeqStatus::kFinishedLength);
      result.finished_by_length.push_back(s->id);
    }
  }
}

// 4. The engine's stop decisions.
void Scheduler::apply_stops(std::span<const FinishedSeq> finished, std::vector<GroupId>& touched) {
  for (const FinishedSeq& f : finished) {
    SequenceGroup* g = nullptr;
    Sequence* s = find_live(f.seq_id, &g);
    if (!s) continue;
    finish_seq(g, s, f.status);
    touched.push_back(g->id);
  }
}

void Scheduler::retire_touched(const std::vector<GroupId>& touched, UpdateResult& result) {
  for (GroupId id : touched)
    if (auto it = groups_.find(id); it != groups_.end()) retire_if_done(it->second.get(), result);
}

UpdateResult Scheduler::update_from_output(const StepResult& step) {
  UpdateResult result;
  std::vector<GroupId> touched, sampled_groups;
  touched.reserve(last_.size() + step.finished.size() + step.sampled.size());
  apply_computed(touched);
  // Sampled groups are checked for retirement after the engine's stops, in this order.
  append_sampled(step.sampled, result, sampled_groups);
  apply_stops(step.finished, touched);
  touched.insert(touched.end(), sampled_groups.begin(), sampled_groups.end());
  retire_touched(touched, result);
  return result;
}

UpdateResult Scheduler::advance(std::span<const SampledToken> placeholders) {
  for (const SampledToken& t : placeholders)
    FOLIO_CHECK(t.token < 0, "advance: a placeholder token must be negative");
  UpdateResult result;
  std::vector<GroupId> touched;
  touched.reserve(last_.size() + placeholders.size());
  apply_computed(touched);
  append_sampled(placeholders, result, touched);
  retire_touched(touched, result);
  return result;
}

UpdateResult Scheduler::resolve(const StepResult& step) {
  UpdateResult result;
  for (const SampledToken& t : step.sampled) {
    SequenceGroup* g = nullptr;
    Sequence* s = find_live(t.seq_id, &g);
    if (!s) continue;  // retired at advance (length) or aborted since
    // Nothing appends between advance() and resolve(), so the placeholder is the last token.
    FOLIO_CHECK(!s->tokens.empty() && s->tokens.back() < 0,
                "resolve: the sequence has no placeholder token");
    s->tokens.back() = t.token;
  }
  std::vector<GroupId> touched;
  apply_stops(step.finished, touched);
  retire_touched(touched, result);
  return result;
}

Result<SeqId> Scheduler::fork_sequence(SeqId parent, std::optional<TokenId> last_token) {
  auto it = seq_group_.find(parent);
  if (it == seq_group_.end()) return not_found("no live sequence " + std::to_string(parent));
  SequenceGroup* g = groups_.at(it->second).get();
  const Sequence* p = g->find(parent);
  if (!p || p->status != SeqStatus::kRunning)
    return not_found("sequence " + std::to_string(parent) + " is not running");
  if (last_token && (p->num_computed >= p->num_tokens() || p->num_tokens() <= p->prompt_len))
    return invalid_argument("fork_sequence: the parent's last token is already computed");
  Sequence child = *p;
  child.id = next_seq_id_++;
  if (last_token) child.tokens.back() = *last_token;
  kv_.fork(parent, child.id);
  seq_group_[child.id] = g->id;
  g->seqs.push_back(std::move(child));
  return g->seqs.back().id;
}

void Scheduler::record_step_stats(const SchedulerOutput& out) {
  stats_.peak_blocks_used = std::max(stats_.peak_blocks_used, kv_.num_used_blocks());
  if (out.empty()) return;
  ++stats_.num_steps;
  stats_.num_scheduled_tokens += out.num_batched_tokens;
  int64_t used = static_cast<int64_t>(kv_.num_used_blocks()) * kv_.block_size();
  if (used > 0) stats_.kv_slot_utilization_sum += double(kv_.num_filled_slots()) / double(used);
}

std::string Scheduler::summary() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "running: %d reqs, waiting: %d, swapped: %d, KV: %.1f%% (%d/%d blocks), "
                "preemptions: %lld",
                num_running(), num_waiting(), num_swapped(), 100.0 * kv_.usage(),
                kv_.num_used_blocks(), kv_.num_total_blocks(),
                static_cast<long long>(stats_.num_preemptions));
  return buf;
}

}  // namespace folio
