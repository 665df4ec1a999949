// Server-sent events split from arbitrary byte pieces; completion payloads; base URLs.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tools/bench_http_client.h"
#include "tools/bench_sse.h"

namespace folio::tools {
namespace {

std::vector<std::string> feed_in_pieces(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    Status st = p.feed(std::string_view(stream).substr(i, piece), events);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  return events;
}

TEST(BenchSse, EventsAreTheSameWhateverThePieces) {
  const std::string stream =
      ": a comment\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\nid: 7\r\ndata:no-space\r\n\r\n"
      "data: first\rdata: second\r\r"
      "retry: 10\n\n"  // no data: no event
      "data: [DONE]\n\n"
      "data: unterminated";  // never dispatched
  const std::vector<std::string> expected = {"{\"a\":1}", "no-space", "first\nsecond", "[DONE]"};
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, stream.size()})
    EXPECT_EQ(feed_in_pieces(stream, piece), expected) << "piece " << piece;
}

TEST(BenchSse, CrLfSplitAcrossPiecesIsOneLineEnd) {
  SseParser p;
  std::vector<std::string> events;
  ASSERT_TRUE(p.feed("data: x\r", events).ok());
  ASSERT_TRUE(p.feed("\n\r", events).ok());
  ASSERT_TRUE(p.feed("\n", events).ok());
  EXPECT_EQ(events, std::vector<std::string>{"x"});
}

TEST(BenchSse, OverlongLineIsAnError) {
  SseParser p(16);
  std::vector<std::string> events;
  EXPECT_FALSE(p.feed("data: 0123456789abcdef", events).ok());
}

TEST(BenchSse, CompletionEvents) {
  auto ev = parse_completion_event(
      R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":null}]})");
  EXPECT_TRUE(ev.has_choice);
  EXPECT_EQ(ev.text, "hi");
  EXPECT_FALSE(ev.error || ev.done || ev.completion_tokens);
  ev = parse_completion_event(
      R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":6,"total_tokens":10}})");
  EXPECT_FALSE(ev.has_choice);
  ASSERT_TRUE(ev.completion_tokens);
  EXPECT_EQ(*ev.completion_tokens, 6);
  EXPECT_TRUE(parse_completion_event("[DONE]").done);
  ev = parse_completion_event(R"({"error":{"message":"engine died","type":"internal"}})");
  ASSERT_TRUE(ev.error);
  EXPECT_EQ(*ev.error, "engine died");
  EXPECT_TRUE(parse_completion_event("{oops").error);
}

TEST(BenchHttp, BaseUrls) {
  auto u = parse_base_url("http://127.0.0.1:8123");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8123");
  EXPECT_EQ(u->base_path, "");
  u = parse_base_url("http://localhost/api/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->base_path, "/api");
  u = parse_base_url("http://[::1]:9000/x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_EQ(u->base_path, "/x");
  for (const char* bad : {"https://h:1", "127.0.0.1:80", "http://:80", "http://h:0",
                          "http://h:99999", "http://h:8x", "http://[::1"})
    EXPECT_FALSE(parse_base_url(bad).ok()) << bad;
}

}  // namespace
}  // namespace folio::tools
