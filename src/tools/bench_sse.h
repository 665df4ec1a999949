// Server-sent events, client side: SseParser splits a byte stream (arriving in arbitrary pieces)
// into events and returns each event's data (the `data:` lines joined by "\n"), following the
// WHATWG rules the OpenAI streaming API uses: lines end in \n, \r\n or \r; a blank line ends an
// event; `:` lines are comments; other fields (event, id, retry) are ignored; one space after
// "data:" is dropped. parse_completion_event() reads one /v1/completions stream payload.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace folio::tools {

class SseParser {
 public:
  // `max_line_bytes` bounds memory against a peer that never ends a line.
  explicit SseParser(size_t max_line_bytes = 16u << 20) : max_line_bytes_(max_line_bytes) {}

  // Appends the data of every event completed by `bytes` to `events`. An over-long line is an
  // error; the parser is then unusable.
  Status feed(std::string_view bytes, std::vector<std::string>& events);

 private:
  void end_line(std::vector<std::string>& events);

  size_t max_line_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;  // a \n right after \r belongs to the same line end
};

// What one stream payload says, for the benchmark's timing.
struct CompletionEvent {
  bool done = false;                    // "[DONE]"
  bool has_choice = false;              // a chunk with a non-empty "choices" (one token step)
  std::string text;                     // choices[0].text
  std::optional<int> completion_tokens; // usage.completion_tokens when the chunk carries usage
  std::optional<std::string> error;     // an in-band {"error": {...}} event, or bad JSON
};

CompletionEvent parse_completion_event(std::string_view data);

}  // namespace folio::tools
