// Hostile and unlucky clients: slow or truncated requests, oversized bodies, invalid UTF-8,
// overload, disconnects at every stage, graceful stop. Every wait is bounded.
#include <gtest/gtest.h>

#include "live_server.h"

namespace folio {
namespace {

using nlohmann::json;
using namespace folio::testing;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = std::chrono::seconds(5);

int status_of(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(raw.substr(9, 3));
}

TEST(Robustness, OversizedBodyIs413) {
  LiveServer s;
  RawConn conn(s.port);
  std::string body = "{\"prompt\": \"" + std::string(10000, 'a') + "\"}";
  conn.send(http_post_raw("/v1/completions", body));
  std::string got = conn.recv_until("\r\n\r\n", kWait);
  EXPECT_EQ(status_of(got), 413) << got;
  // A chunked body over the limit is refused as well.
  RawConn chunked(s.port);
  std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string chunk = "1388\r\n" + std::string(5000, 'a') + "\r\n";
  chunked.send(head + chunk);
  EXPECT_EQ(status_of(chunked.recv_until("\r\n\r\n", kWait)), 413);
  EXPECT_EQ(http_call(s.port, "GET", "/health").status, 200);
}

TEST(Robustness, InvalidUtf8AndMalformedHttp) {
  LiveServer s;
  RawConn conn(s.port);
  conn.send(http_post_raw("/v1/completions", "{\"prompt\": \"\xc3\x28\"}"));
  std::string got = conn.recv_until("}}", kWait);
  EXPECT_EQ(status_of(got), 400);
  EXPECT_NE(got.find("UTF-8"), std::string::npos);
  RawConn garbage(s.port);
  garbage.send("NOT HTTP AT ALL\r\n\r\n");
  std::string g = garbage.recv_until("\r\n\r\n", kWait);
  EXPECT_EQ(status_of(g), 400) << g;
}

TEST(Robustness, SlowlorisAndTruncatedBodiesAreCutOff) {
  LiveServer s;  // header and body timeouts: 300 ms
  auto t0 = Clock::now();
  RawConn slow(s.port, milliseconds(3000));
  slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");  // headers never end
  slow.recv_until("", std::chrono::seconds(3));
  EXPECT_TRUE(slow.closed_by_peer());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));

  t0 = Clock::now();
  RawConn truncated(s.port, milliseconds(3000));
  truncated.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro");
  truncated.recv_until("", std::chrono::seconds(3));
  EXPECT_TRUE(truncated.closed_by_peer());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(s.engine.submitted().empty());
  EXPECT_EQ(http_call(s.port, "GET", "/health").status, 200);
}

TEST(Robustness, OverloadAnswers503WhileHealthStaysFast) {
  ServerConfig c = test_config();
  c.max_queued_requests = 2;
  FakeEngineOptions o;
  o.hold = true;  // nothing ever starts
  LiveServer s(c, o);
  std::vector<std::unique_ptr<RawConn>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::make_unique<RawConn>(s.port));
    queued.back()->send(http_post_raw("/v1/completions", R"({"prompt":"a","stream":true})"));
  }
  ASSERT_TRUE(s.engine.wait_for([&] { return s.engine.submitted().size() == 2; }, kWait));
  auto t0 = Clock::now();
  HttpResult r = post_json(s.port, "/v1/completions", {{"prompt", "a"}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_EQ(r.json()["error"]["code"], "overloaded");
  EXPECT_LT(Clock::now() - t0, milliseconds(500));
  for (int i = 0; i < 20; ++i) {
    t0 = Clock::now();
    EXPECT_EQ(http_call(s.port, "GET", "/health").status, 200);
    EXPECT_EQ(http_call(s.port, "GET", "/metrics").status, 200);
    EXPECT_LT(Clock::now() - t0, milliseconds(500));
  }
  // The waiting clients hang up: both requests are aborted, the slots come back.
  std::set<std::string> ids;
  for (const auto& g : s.engine.submitted()) ids.insert(g.request_id);
  queued.clear();
  ASSERT_TRUE(s.engine.wait_for([&] { return s.engine.aborted() == ids; }, kWait));
  s.engine.set_hold(false);
  HttpResult ok = post_json(s.port, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(Robustness, DisconnectMidStreamAbortsOnlyThatRequest) {
  FakeEngineOptions o;
  o.token_delay = milliseconds(10);
  LiveServer s(test_config(), o);
  RawConn conn(s.port);
  conn.send(http_post_raw("/v1/completions",
                          R"({"prompt":"a","stream":true,"max_tokens":200})"));
  std::string got = conn.recv_until("data: ", kWait);
  ASSERT_NE(got.find("data: "), std::string::npos) << got;
  ASSERT_EQ(s.engine.submitted().size(), 1u);
  const std::string id = s.engine.submitted()[0].request_id;
  // A second, unrelated request runs through while the first is cut.
  std::thread other([&] {
    HttpResult r = post_json(s.port, "/v1/completions", {{"prompt", "b"}, {"max_tokens", 20}});
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.json()["choices"][0]["text"], expected_text(20));
  });
  conn.close();
  auto t0 = Clock::now();
  EXPECT_TRUE(s.engine.wait_for([&] { return s.engine.aborted().count(id) == 1; }, kWait));
  EXPECT_LT(Clock::now() - t0, milliseconds(500));  // promptly, not at the end of generation
  other.join();
  EXPECT_EQ(s.engine.aborted().size(), 1u);
  HttpResult m = http_call(s.port, "GET", "/metrics");
  EXPECT_NE(m.body.find("finished_reason=\"abort\"} 1"), std::string::npos);
}

TEST(Robustness, DisconnectWhileQueuedNonStreamingAborts) {
  FakeEngineOptions o;
  o.hold = true;
  LiveServer s(test_config(), o);
  {
    RawConn conn(s.port);
    conn.send(http_post_raw("/v1/chat/completions",
                            R"({"messages":[{"role":"user","content":"x"}]})"));
    ASSERT_TRUE(s.engine.wait_for([&] { return s.engine.submitted().size() == 1; }, kWait));
  }  // hang up
  const std::string id = s.engine.submitted()[0].request_id;
  EXPECT_TRUE(s.engine.wait_for([&] { return s.engine.aborted().count(id) == 1; }, kWait));
  s.engine.set_hold(false);
  EXPECT_EQ(post_json(s.port, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 1}}).status,
            200);
}

TEST(Robustness, GracefulStopFinishesStreamsWithAbort) {
  FakeEngineOptions o;
  o.token_delay = milliseconds(20);
  LiveServer s(test_config(), o);  // shutdown grace 200 ms
  RawConn conn(s.port);
  conn.send(http_post_raw("/v1/completions",
                          R"({"prompt":"a","stream":true,"max_tokens":200})"));
  ASSERT_NE(conn.recv_until("data: ", kWait).find("data: "), std::string::npos);
  auto t0 = Clock::now();
  s.server->stop();
  s.server->wait();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  std::string got = conn.recv_until("\r\n0\r\n\r\n", kWait);
  EXPECT_NE(got.find("\"finish_reason\":\"abort\""), std::string::npos);
  EXPECT_NE(got.find("data: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos);
  EXPECT_EQ(s.engine.aborted().size(), 1u);
  RawConn after(s.port, milliseconds(500));
  EXPECT_FALSE(after.connected() && after.send("GET /health HTTP/1.1\r\n\r\n") &&
               status_of(after.recv_until("\r\n\r\n", milliseconds(500))) == 200);
}

}  // namespace
}  // namespace folio
