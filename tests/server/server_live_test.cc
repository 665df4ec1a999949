// Live tests over loopback: the OpenAI endpoints end to end against the fake engine.
#include <gtest/gtest.h>

#include "live_server.h"

namespace folio {
namespace {

using nlohmann::json;
using namespace folio::testing;

class LiveTest : public ::testing::Test {
 protected:
  LiveServer s_;
};

TEST_F(LiveTest, CompletionNonStreaming) {
  HttpResult r = post_json(s_.port, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["choices"][0]["text"], expected_text(5));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // BOS + 5 bytes
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_TRUE(s_.engine.aborted().empty());  // a normal finish aborts nothing
}

TEST_F(LiveTest, StreamedTextEqualsNonStreamedText) {
  json req = {{"prompt", "abc"}, {"max_tokens", 12}, {"n", 2}};
  json plain = post_json(s_.port, "/v1/completions", req).json();
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  HttpResult r = post_json(s_.port, "/v1/completions", req);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  auto data = sse_data(r.body);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string texts[2];
  std::string finish[2];
  json usage;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    json chunk = json::parse(data[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    if (chunk["choices"].empty()) {
      usage = chunk["usage"];
      EXPECT_EQ(i, data.size() - 2);  // the usage chunk comes last
      continue;
    }
    int idx = chunk["choices"][0]["index"];
    texts[idx] += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish[idx] = chunk["choices"][0]["finish_reason"];
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(texts[k], plain["choices"][k]["text"].get<std::string>());
    EXPECT_EQ(texts[k], expected_text(12, k));
    EXPECT_EQ(finish[k], "length");
  }
  EXPECT_EQ(usage["completion_tokens"], 24);
  EXPECT_EQ(usage["prompt_tokens"], 4);
}

TEST_F(LiveTest, ChatStreamingFirstChunkCarriesRole) {
  json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"max_completion_tokens", 4}, {"stream", true}};
  HttpResult r = post_json(s_.port, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  auto data = sse_data(r.body);
  ASSERT_GE(data.size(), 3u);
  json first = json::parse(data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 1; i + 1 < data.size(); ++i) {
    json c = json::parse(data[i]);
    EXPECT_FALSE(c["choices"][0]["delta"].contains("role"));
    text += c["choices"][0]["delta"].value("content", "");
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, expected_text(4));
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(data.back(), "[DONE]");
  req["stream"] = false;
  json plain = post_json(s_.port, "/v1/chat/completions", req).json();
  EXPECT_EQ(plain["object"], "chat.completion");
  EXPECT_EQ(plain["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(plain["choices"][0]["message"]["content"], text);
}

TEST_F(LiveTest, StopStringsAndStopTokens) {
  json j = post_json(s_.port, "/v1/completions",
                     {{"prompt", "x"}, {"max_tokens", 20}, {"stop", {"e"}}}).json();
  EXPECT_EQ(j["choices"][0]["text"], "abcd");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "e");
  j = post_json(s_.port, "/v1/completions",
                {{"prompt", "x"}, {"max_tokens", 20}, {"stop_token_ids", {'c'}}}).json();
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["stop_reason"], 'c');
}

TEST_F(LiveTest, LogprobsShapes) {
  json c = post_json(s_.port, "/v1/completions",
                     {{"prompt", "x"}, {"max_tokens", 3}, {"logprobs", 2}}).json();
  const json& lp = c["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"a", "b", "c"}));
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  json chat = post_json(s_.port, "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "q"}}}},
                         {"max_tokens", 2}, {"logprobs", true}, {"top_logprobs", 3}})
                  .json();
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[1]["token"], "b");
  EXPECT_EQ(content[1]["top_logprobs"].size(), 3u);
  EXPECT_EQ(content[1]["bytes"], json({98}));
}

TEST_F(LiveTest, BeamSearchAndCachedTokens) {
  json req = {{"prompt", std::string(40, 'z')}, {"max_tokens", 3}, {"n", 2},
              {"use_beam_search", true}, {"stream", true}};
  HttpResult r = post_json(s_.port, "/v1/completions", req);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(sse_data(r.body).back(), "[DONE]");
  req["stream"] = false;
  json j = post_json(s_.port, "/v1/completions", req).json();  // same prompt: cache hit
  EXPECT_EQ(j["choices"][1]["text"], expected_text(3, 1));
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
}

TEST_F(LiveTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  RawConn conn(s_.port);
  ASSERT_TRUE(conn.connected());
  for (size_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(conn.send(http_post_raw("/v1/completions", R"({"prompt":"a","max_tokens":2})")));
    EXPECT_EQ(conn.recv_count("\"total_tokens\"", i, std::chrono::seconds(5)), i);
  }
  EXPECT_EQ(conn.occurrences("HTTP/1.1 200"), 3u);
  EXPECT_EQ(s_.engine.submitted().size(), 3u);
}

TEST_F(LiveTest, InfoEndpointsAndMetrics) {
  EXPECT_EQ(http_call(s_.port, "GET", "/health").status, 200);
  EXPECT_EQ(http_call(s_.port, "GET", "/v1/models").json()["data"][0]["id"], "fake-model");
  EXPECT_EQ(http_call(s_.port, "GET", "/version").status, 200);
  post_json(s_.port, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 3}});
  post_json(s_.port, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 3}, {"stop", "b"}});
  HttpResult m = http_call(s_.port, "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u);
  const std::string l = "{model_name=\"fake-model\"";
  for (const char* line :
       {"folio:request_success_total{model_name=\"fake-model\",finished_reason=\"length\"} 1",
        "folio:request_success_total{model_name=\"fake-model\",finished_reason=\"stop\"} 1",
        "folio:time_to_first_token_seconds_count{model_name=\"fake-model\"} 2",
        "folio:e2e_request_latency_seconds_count{model_name=\"fake-model\"} 2",
        "folio:time_per_output_token_seconds_count{model_name=\"fake-model\"} 2",
        "folio:request_queue_time_seconds_count{model_name=\"fake-model\"} 2",
        "folio:kv_cache_usage_perc{model_name=\"fake-model\"} 0.25",
        "folio:generation_tokens_total{model_name=\"fake-model\"} 5",
        "folio:num_preemptions_total{model_name=\"fake-model\"} 3",
        "folio:cache_config_info{model_name=\"fake-model\",block_size=\"16\",cache_dtype=\"auto\","
        "kv_cache_mode=\"paged\",num_gpu_blocks=\"256\",num_cpu_blocks=\"0\","
        "enable_prefix_caching=\"True\"} 1"})
    EXPECT_NE(m.body.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << m.body;
  s_.engine.set_healthy(false);
  EXPECT_EQ(http_call(s_.port, "GET", "/health").status, 503);
}

TEST_F(LiveTest, ErrorsOverTheWire) {
  HttpResult r = http_call(s_.port, "POST", "/v1/completions", R"({"prompt": )");
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(r.json()["error"]["message"].is_string());
  r = post_json(s_.port, "/v1/completions", {{"prompt", "a"}, {"model", "other"}});
  EXPECT_EQ(r.status, 404);
  r = post_json(s_.port, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 1000}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("maximum context length is 256 tokens"), std::string::npos);
  s_.engine.set_reject_submits(true);
  r = post_json(s_.port, "/v1/completions", {{"prompt", "a"}});
  EXPECT_EQ(r.status, 503);
  s_.engine.set_reject_submits(false);
  EXPECT_EQ(post_json(s_.port, "/v1/completions", {{"prompt", "a"}}).status, 200);
}

TEST(LiveAuth, ApiKeyOverTheWire) {
  ServerConfig c = test_config();
  c.api_key = "sk-live";
  LiveServer s(c);
  json req = {{"prompt", "a"}, {"max_tokens", 1}};
  EXPECT_EQ(post_json(s.port, "/v1/completions", req).status, 401);
  EXPECT_EQ(post_json(s.port, "/v1/completions", req, {{"Authorization", "Bearer nope"}}).status,
            401);
  EXPECT_EQ(http_call(s.port, "GET", "/metrics").status, 401);
  EXPECT_EQ(http_call(s.port, "GET", "/health").status, 200);
  EXPECT_EQ(post_json(s.port, "/v1/completions", req, {{"Authorization", "Bearer sk-live"}}).status,
            200);
  EXPECT_EQ(post_json(s.port, "/v1/completions", req, {{"x-api-key", "sk-live"}}).status, 200);
}

}  // namespace
}  // namespace folio
