// Beam search on the paged KV cache (the paper's §4.4): every beam is a sequence of one group;
// a surviving child continues its parent's sequence (first child) or forks it, sharing all of
// its blocks (copy-on-write of the partial last block happens at the next append); a beam with
// no surviving child is finished and its blocks freed.
#include <algorithm>

#include "engine/engine_core.h"
#include "engine/request_state.h"

namespace folio {

Status EngineCore::step_beams(std::span<const float> logits, const std::vector<GroupId>& groups,
                              StepResult& result, std::vector<BeamFork>& forks,
                              std::vector<GroupId>& done) {
  const size_t vocab = static_cast<size_t>(model_.vocab_size);
  for (GroupId gid : groups) {
    RequestState& r = *requests_.at(gid);
    if (!r.beam || r.beam_rows.empty()) continue;
    if (r.beam_rows.size() != r.beam_seqs.size())
      return internal_error("beam search: only some beams of request " + r.id + " were scheduled");
    std::vector<float> rows(r.beam_seqs.size() * vocab);
    for (size_t b = 0; b < r.beam_seqs.size(); ++b) {
      const int row = r.beam_rows.at(r.beam_seqs[b]);
      std::copy_n(logits.data() + row * vocab, vocab, rows.data() + b * vocab);
    }
    r.beam_rows.clear();
    std::vector<BeamChild> children = r.beam->step(rows, model_.vocab_size);
    r.num_generated = r.beam->num_generated();
    counters_.generated_tokens += static_cast<int64_t>(r.beam_seqs.size());
    std::vector<int> num_children(r.beam_seqs.size(), 0);
    std::vector<SeqId> next(children.size(), 0);
    for (size_t i = 0; i < children.size(); ++i) {
      const SeqId parent = r.beam_seqs[children[i].parent];
      if (num_children[children[i].parent]++ == 0) {
        result.sampled.push_back({parent, children[i].token_id});
        next[i] = parent;
      } else {
        forks.push_back({gid, static_cast<int>(i), parent, children[i].token_id});
      }
    }
    // Dropped beams take a placeholder token (the scheduler wants one per sampled sequence)
    // and finish at once, freeing their blocks.
    for (size_t b = 0; b < r.beam_seqs.size(); ++b) {
      if (num_children[b] > 0) continue;
      result.sampled.push_back({r.beam_seqs[b], 0});
      result.finished.push_back({r.beam_seqs[b], SeqStatus::kFinishedStopped});
    }
    r.beam_seqs = std::move(next);
    if (r.beam->done()) done.push_back(gid);
  }
  return Status();
}

void EngineCore::apply_beam_forks(const std::vector<BeamFork>& forks) {
  for (const BeamFork& f : forks) {
    auto it = requests_.find(f.group);
    if (it == requests_.end()) continue;
    auto child = scheduler_->fork_sequence(f.parent, f.token);
    if (!child.ok()) continue;  // the group ended at this update (length): nothing to fork
    it->second->beam_seqs[f.beam_index] = *child;
  }
}

void EngineCore::beam_final_output(RequestState& r, RequestOutput& out) const {
  int j = 0;
  for (const BeamHypothesis& h : r.beam->finished()) {
    CompletionDelta d;
    d.index = j++;
    d.token_ids = h.tokens;
    if (tokenizer_) d.text = tokenizer_->decode(h.tokens, r.params.skip_special_tokens);
    d.cumulative_logprob = h.sum_logprobs;
    d.finish_reason = h.ended_with_eos ? "stop" : "length";
    out.deltas.push_back(std::move(d));
  }
}

}  // namespace folio
