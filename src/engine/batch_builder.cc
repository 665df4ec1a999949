#include "engine/batch_builder.h"

namespace folio {

void build_forward_batch(const SchedulerOutput& out, const std::vector<bool>& want_all_rows,
                         ForwardBatch& b, BatchRows& rows) {
  b.clear();
  const int bs = out.block_size;
  const size_t n = out.seqs.size();
  size_t tokens = 0, table = 0;
  for (const ScheduledSeq& s : out.seqs) {
    tokens += s.token_ids.size();
    table += s.block_table.size();
  }
  b.token_ids.reserve(tokens);
  b.positions.reserve(tokens);
  b.slot_mapping.reserve(tokens);
  b.block_table.reserve(table);
  rows.first_row.assign(n, -1);
  rows.all_rows.assign(n, false);
  rows.last_offset.assign(n, 0);
  b.query_start.push_back(0);
  b.block_table_start.push_back(0);
  int next_row = 0;
  for (size_t i = 0; i < n; ++i) {
    const ScheduledSeq& s = out.seqs[i];
    const int num = s.num_tokens();
    const int first_token = b.num_tokens();
    b.token_ids.insert(b.token_ids.end(), s.token_ids.begin(), s.token_ids.end());
    for (int k = 0; k < num; ++k) {
      const int pos = s.start_pos + k;
      b.positions.push_back(pos);
      b.slot_mapping.push_back(static_cast<int64_t>(s.block_table[pos / bs]) * bs + pos % bs);
    }
    rows.last_offset[i] = num - 1;
    if (want_all_rows[i]) {
      rows.all_rows[i] = true;
      rows.first_row[i] = next_row;
      for (int k = 0; k < num; ++k) b.logits_rows.push_back(first_token + k);
      next_row += num;
    } else if (s.samples()) {
      rows.first_row[i] = next_row++;
      b.logits_rows.push_back(first_token + num - 1);
    }
    b.query_start.push_back(b.num_tokens());
    b.context_lens.push_back(s.start_pos + num);
    b.block_table.insert(b.block_table.end(), s.block_table.begin(), s.block_table.end());
    b.block_table_start.push_back(static_cast<int32_t>(b.block_table.size()));
  }
}

}  // namespace folio
