// Generation: RequestOutputs in, OpenAI response shapes out (no sockets, no engine thread).
#include <gtest/gtest.h>

#include "server/generation.h"

namespace folio {
namespace {

using nlohmann::json;

std::string text_of(int32_t id) { return std::string(1, static_cast<char>(id)); }

GenerationPlan make_plan(ApiKind kind, bool stream, int n = 1, int prompts = 1) {
  GenerationPlan p;
  p.kind = kind;
  p.response_id = kind == ApiKind::kChat ? "chatcmpl-x" : "cmpl-x";
  p.model = "m";
  p.created = 123;
  p.stream = stream;
  p.n = n;
  for (int i = 0; i < prompts; ++i) {
    GenerateRequest r;
    r.request_id = p.response_id + "-" + std::to_string(i);
    r.prompt_token_ids = {'p', 'q'};
    r.params.n = n;
    p.requests.push_back(r);
  }
  return p;
}

RequestOutput step(std::vector<std::pair<int, std::string>> deltas, bool finished,
                   int generated, const char* reason = "length") {
  RequestOutput o;
  for (auto& [index, text] : deltas) {
    CompletionDelta d;
    d.index = index;
    for (char c : text) d.token_ids.push_back(c);
    d.text = text;
    if (finished) d.finish_reason = reason;
    o.deltas.push_back(std::move(d));
  }
  o.finished = finished;
  o.num_prompt_tokens = 2;
  o.num_cached_prompt_tokens = 1;
  o.num_generated_tokens = generated;
  return o;
}

std::vector<json> events_of(const std::string& sse) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    size_t end = sse.find("\n\n", pos);
    std::string payload = sse.substr(pos + 6, end - pos - 6);
    out.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
    pos = end;
  }
  return out;
}

class GenerationTest : public ::testing::Test {
 protected:
  ServerMetrics metrics_;
  Admission admission_{100};
};

TEST_F(GenerationTest, NonStreamingCompletionWithUsageAndN) {
  ASSERT_TRUE(admission_.try_acquire(1));
  Generation g(make_plan(ApiKind::kCompletion, false, 2), text_of, metrics_, admission_);
  EXPECT_EQ(g.on_output(0, step({{0, "ab"}, {1, "x"}}, false, 3)), "");
  EXPECT_EQ(admission_.pending(), 0);  // the first output releases the slot
  EXPECT_FALSE(g.finished());
  g.on_output(0, step({{0, "c"}, {1, "y"}}, true, 5));
  ASSERT_TRUE(g.finished());
  json body = json::parse(g.final_body());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "cmpl-x");
  EXPECT_EQ(body["model"], "m");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["choices"][1]["text"], "xy");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"], json::parse(R"({"prompt_tokens":2,"completion_tokens":5,
      "total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}})"));
}

TEST_F(GenerationTest, StreamingChatSendsRoleFirstThenContentThenUsage) {
  GenerationPlan plan = make_plan(ApiKind::kChat, true);
  plan.include_usage = true;
  admission_.try_acquire(1);
  Generation g(std::move(plan), text_of, metrics_, admission_);
  auto ev = events_of(g.on_output(0, step({{0, "he"}}, false, 2)));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev[0]["choices"][0]["delta"], json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["content"], "he");
  EXPECT_TRUE(ev[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(ev[1].contains("usage"));
  auto last = events_of(g.on_output(0, step({{0, "y"}}, true, 3, "stop")));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["choices"][0]["delta"]["content"], "y");
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "stop");
  auto tail = events_of(g.stream_tail());
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_TRUE(tail[0]["choices"].empty());
  EXPECT_EQ(tail[0]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(tail[1], "[DONE]");
}

TEST_F(GenerationTest, CompletionLogprobsShapeAndEcho) {
  GenerationPlan plan = make_plan(ApiKind::kCompletion, false);
  plan.echo = true;
  plan.echo_text = {"pq"};
  plan.logprobs = 1;
  admission_.try_acquire(1);
  Generation g(std::move(plan), text_of, metrics_, admission_);
  RequestOutput o = step({{0, "a"}}, true, 1);
  o.deltas[0].logprobs.push_back({'a', -0.5f, 1, {{'a', -0.5f}}});
  o.prompt_logprobs = {std::nullopt, PositionLogprobs{'q', -1.0f, 2, {{'z', -0.1f}}}};
  g.on_output(0, std::move(o));
  json body = json::parse(g.final_body());
  const json& c = body["choices"][0];
  EXPECT_EQ(c["text"], "pqa");
  const json& lp = c["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"p", "q", "a"}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][2], -0.5);
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"a", -0.5}}));
  EXPECT_EQ(c["prompt_logprobs"][1]["113"]["rank"], 2);
}

TEST_F(GenerationTest, ChatLogprobsShapeAndInfinityClamp) {
  GenerationPlan plan = make_plan(ApiKind::kChat, false);
  plan.logprobs = 1;
  admission_.try_acquire(1);
  Generation g(std::move(plan), text_of, metrics_, admission_);
  RequestOutput o = step({{0, "a"}}, true, 1);
  o.deltas[0].logprobs.push_back({'a', -INFINITY, 1, {{'b', -0.25f}}});
  g.on_output(0, std::move(o));
  json c = json::parse(g.final_body())["choices"][0];
  EXPECT_EQ(c["message"], json::parse(R"({"role":"assistant","content":"a"})"));
  const json& e = c["logprobs"]["content"][0];
  EXPECT_EQ(e["token"], "a");
  EXPECT_EQ(e["logprob"], -9999.0);
  EXPECT_EQ(e["bytes"], json({97}));
  EXPECT_EQ(e["top_logprobs"][0], json::parse(R"({"token":"b","logprob":-0.25,"bytes":[98]})"));
}

TEST_F(GenerationTest, AbortFinishesEveryChoiceAndReleasesAdmission) {
  admission_.try_acquire(2);
  Generation g(make_plan(ApiKind::kCompletion, true, 1, 2), text_of, metrics_, admission_);
  g.on_output(0, step({{0, "a"}}, false, 1));
  EXPECT_EQ(admission_.pending(), 1);  // prompt 1 still queued
  std::string events;
  auto ids = g.abort_unfinished(true, &events);
  EXPECT_EQ(ids, (std::vector<std::string>{"cmpl-x-0", "cmpl-x-1"}));
  EXPECT_TRUE(g.finished());
  EXPECT_EQ(admission_.pending(), 0);
  auto ev = events_of(events);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["choices"][0]["finish_reason"], "abort");
  EXPECT_EQ(ev[1]["choices"][0]["index"], 1);
  std::string metrics = metrics_.render({}, "m");
  EXPECT_NE(metrics.find("finished_reason=\"abort\"} 2"), std::string::npos) << metrics;
}

TEST_F(GenerationTest, EngineErrorBecomesTheResponse) {
  admission_.try_acquire(1);
  Generation g(make_plan(ApiKind::kCompletion, false), text_of, metrics_, admission_);
  RequestOutput o;
  o.error = invalid_argument("prompt too long for the KV cache");
  o.finished = true;
  g.on_output(0, std::move(o));
  ASSERT_TRUE(g.error().has_value());
  EXPECT_EQ(g.error()->http_status, 400);
  EXPECT_TRUE(g.finished());
}

TEST_F(GenerationTest, DestructorReleasesUnstartedSlots) {
  admission_.try_acquire(3);
  { Generation g(make_plan(ApiKind::kCompletion, false, 1, 3), text_of, metrics_, admission_); }
  EXPECT_EQ(admission_.pending(), 0);
}

}  // namespace
}  // namespace folio
