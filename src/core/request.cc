#include "core/request.h"

namespace folio {

Sequence* SequenceGroup::find(SeqId sid) {
  for (Sequence& s : seqs)
    if (s.id == sid) return &s;
  return nullptr;
}

const Sequence* SequenceGroup::find(SeqId sid) const {
  for (const Sequence& s : seqs)
    if (s.id == sid) return &s;
  return nullptr;
}

int SequenceGroup::num_live() const {
  int n = 0;
  for (const Sequence& s : seqs) n += s.finished() ? 0 : 1;
  return n;
}

std::vector<SeqId> SequenceGroup::live_ids() const {
  std::vector<SeqId> ids;
  for (const Sequence& s : seqs)
    if (!s.finished()) ids.push_back(s.id);
  return ids;
}

bool SequenceGroup::in_prefill() const {
  for (const Sequence& s : seqs)
    if (!s.finished() && s.num_uncomputed() > 1) return true;
  return false;
}

}  // namespace folio
