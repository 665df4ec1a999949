// Request parsing through the Router (no sockets): good requests become the expected
// GenerateRequests; every bad input becomes the right status and an OpenAI error shape.
#include <gtest/gtest.h>

#include "server/router.h"
#include "fake_engine.h"

namespace folio {
namespace {

using nlohmann::json;
using testing::FakeEngine;

class ParsingTest : public ::testing::Test {
 protected:
  ParsingTest() : ctx_(config(), engine_), router_(ctx_) {}
  static ServerConfig config() {
    ServerConfig c;
    c.max_n = 8;
    c.max_stop_strings = 3;
    c.max_logprobs = 5;
    c.max_queued_requests = 1000;
    return c;
  }
  RouteResult post(const std::string& path, const std::string& body) {
    return router_.route({"POST", path, body, "", ""});
  }
  // Asserts an error reply and returns its parsed body.
  json expect_error(const RouteResult& r, int status) {
    EXPECT_TRUE(r.reply.has_value());
    if (!r.reply) return json();
    EXPECT_EQ(r.reply->status, status) << r.reply->body;
    json j = json::parse(r.reply->body, nullptr, false);
    EXPECT_TRUE(j.contains("error")) << r.reply->body;
    if (!j.contains("error")) return j;
    const json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param"));
    EXPECT_TRUE(e.contains("code"));
    return e;
  }

  FakeEngine engine_;
  ServerContext ctx_;
  Router router_;
};

TEST_F(ParsingTest, CompletionFieldsMapToSamplingParams) {
  json body = {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 7},
               {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 0}, {"min_p", 0.1},
               {"repetition_penalty", 1.2}, {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5}, {"logit_bias", {{"5", 200}, {"7", -3}}},
               {"seed", 42}, {"stop", "x"}, {"stop_token_ids", {99}}, {"min_tokens", 2},
               {"ignore_eos", true}, {"skip_special_tokens", false},
               {"include_stop_str_in_output", true}, {"length_penalty", 0.7},
               {"prompt_logprobs", 2}, {"logprobs", 3}, {"n", 2}, {"priority", 4},
               {"cache_salt", "s1"}};
  RouteResult r = post("/v1/completions", body.dump());
  ASSERT_TRUE(r.plan.has_value()) << (r.reply ? r.reply->body : "");
  const GenerationPlan& plan = *r.plan;
  EXPECT_EQ(plan.kind, ApiKind::kCompletion);
  EXPECT_EQ(plan.model, "fake-model");
  EXPECT_EQ(plan.response_id.rfind("cmpl-", 0), 0u);
  ASSERT_EQ(plan.requests.size(), 1u);
  const GenerateRequest& g = plan.requests[0];
  EXPECT_EQ(g.request_id, plan.response_id + "-0");
  EXPECT_EQ(g.prompt_token_ids, (std::vector<int32_t>{256, 'h', 'i'}));  // BOS added
  const SamplingParams& p = g.params;
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_TRUE(p.has_temperature);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, -1);  // 0 means off
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.logit_bias.at(5), 100.0f);  // clamped to OpenAI's range
  EXPECT_FLOAT_EQ(p.logit_bias.at(7), -3.0f);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>{99});
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_FLOAT_EQ(p.length_penalty, 0.7f);
  EXPECT_EQ(p.prompt_logprobs, 2);
  EXPECT_EQ(p.logprobs, 3);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(g.priority, 4);
  EXPECT_EQ(g.cache_salt, "s1");
  EXPECT_FALSE(plan.stream);
}

TEST_F(ParsingTest, CompletionPromptForms) {
  auto plan_of = [&](const json& prompt) {
    RouteResult r = post("/v1/completions", json{{"prompt", prompt}}.dump());
    EXPECT_TRUE(r.plan.has_value()) << (r.reply ? r.reply->body : "");
    return r.plan ? *r.plan : GenerationPlan{};
  };
  GenerationPlan a = plan_of(json::array({"ab", "c"}));
  ASSERT_EQ(a.requests.size(), 2u);
  EXPECT_EQ(a.requests[1].prompt_token_ids, (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(a.requests[1].request_id, a.response_id + "-1");
  EXPECT_EQ(a.requests[0].params.max_tokens, 16);  // OpenAI's completions default
  GenerationPlan b = plan_of(json::array({5, 6, 7}));
  ASSERT_EQ(b.requests.size(), 1u);
  EXPECT_EQ(b.requests[0].prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));
  GenerationPlan c = plan_of(json::array({json::array({1, 2}), json::array({3})}));
  ASSERT_EQ(c.requests.size(), 2u);
  EXPECT_EQ(c.requests[1].prompt_token_ids, std::vector<int32_t>{3});
}

TEST_F(ParsingTest, EchoWithLogprobsAsksForPromptLogprobs) {
  RouteResult r = post("/v1/completions",
                       json{{"prompt", "ab"}, {"echo", true}, {"logprobs", 1}}.dump());
  ASSERT_TRUE(r.plan.has_value());
  EXPECT_EQ(r.plan->echo_text, std::vector<std::string>{"ab"});
  EXPECT_EQ(r.plan->requests[0].params.prompt_logprobs, 1);
}

TEST_F(ParsingTest, ChatRendersTemplateAndDefaultsMaxTokensToTheContext) {
  json body = {{"messages", {{{"role", "system"}, {"content", "S"}},
                             {{"role", "user"},
                              {"content", {{{"type", "text"}, {"text", "a"}},
                                           {{"type", "text"}, {"text", "b"}}}}}}},
               {"logprobs", true}, {"top_logprobs", 2}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  RouteResult r = post("/v1/chat/completions", body.dump());
  ASSERT_TRUE(r.plan.has_value()) << (r.reply ? r.reply->body : "");
  const GenerateRequest& g = r.plan->requests[0];
  std::string expected = "<|system|>S\n<|user|>a\nb\n<|assistant|>";  // no BOS for chat
  EXPECT_EQ(g.prompt_token_ids, std::vector<int32_t>(expected.begin(), expected.end()));
  EXPECT_EQ(g.params.max_tokens, 256 - static_cast<int>(expected.size()));
  EXPECT_EQ(g.params.logprobs, 2);
  EXPECT_TRUE(r.plan->stream);
  EXPECT_TRUE(r.plan->include_usage);
  EXPECT_EQ(r.plan->kind, ApiKind::kChat);
}

TEST_F(ParsingTest, ChatMaxCompletionTokensWins) {
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"max_tokens", 50}, {"max_completion_tokens", 9}};
  RouteResult r = post("/v1/chat/completions", body.dump());
  ASSERT_TRUE(r.plan.has_value());
  EXPECT_EQ(r.plan->requests[0].params.max_tokens, 9);
  body.erase("max_completion_tokens");
  r = post("/v1/chat/completions", body.dump());
  ASSERT_TRUE(r.plan.has_value());
  EXPECT_EQ(r.plan->requests[0].params.max_tokens, 50);
}

struct BadCase {
  const char* name;
  const char* path;
  std::string body;
  int status;
  const char* message_part;
};

TEST_F(ParsingTest, BadInputsBecomeOpenAIErrors) {
  const std::string c = "/v1/completions", ch = "/v1/chat/completions";
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  std::vector<BadCase> cases = {
      {"malformed json", c.c_str(), R"({"prompt": "a",)", 400, "not valid JSON"},
      {"not an object", c.c_str(), R"([1,2])", 400, "JSON object"},
      {"empty body", c.c_str(), "", 400, "empty"},
      {"invalid utf8", c.c_str(), "{\"prompt\": \"a\xff\xfe\"}", 400, "UTF-8"},
      {"stream as string", c.c_str(), R"({"prompt":"a","stream":"true"})", 400, "'stream' must be a boolean"},
      {"max_tokens as string", c.c_str(), R"({"prompt":"a","max_tokens":"10"})", 400, "'max_tokens' must be an integer"},
      {"temperature as string", c.c_str(), R"({"prompt":"a","temperature":"hot"})", 400, "'temperature' must be a number"},
      {"empty prompt", c.c_str(), R"({"prompt":""})", 400, "empty"},
      {"empty prompt list", c.c_str(), R"({"prompt":[]})", 400, "empty"},
      {"missing prompt", c.c_str(), R"({"max_tokens":3})", 400, "'prompt' is required"},
      {"prompt wrong type", c.c_str(), R"({"prompt":{"a":1}})", 400, "'prompt' must be"},
      {"unknown model", c.c_str(), R"({"prompt":"a","model":"gpt-9"})", 404, "does not exist"},
      {"context exceeded", c.c_str(), R"({"prompt":"abc","max_tokens":254})", 400, "maximum context length is 256 tokens"},
      {"prompt alone too long", c.c_str(), "{\"prompt\":\"" + std::string(300, 'a') + "\"}", 400, "maximum context length is 256 tokens"},
      {"temperature negative", c.c_str(), R"({"prompt":"a","temperature":-1})", 400, "temperature"},
      {"top_p zero", c.c_str(), R"({"prompt":"a","top_p":0})", 400, "top_p"},
      {"max_tokens zero", c.c_str(), R"({"prompt":"a","max_tokens":0})", 400, "max_tokens"},
      {"n over cap", c.c_str(), R"({"prompt":"a","n":9})", 400, "'n' must be in [1, 8]"},
      {"stop list over cap", c.c_str(), R"({"prompt":"a","stop":["a","b","c","d"]})", 400, "limit of 3"},
      {"stop wrong type", c.c_str(), R"({"prompt":"a","stop":5})", 400, "'stop' must be"},
      {"token id outside vocab", c.c_str(), R"({"prompt":[1,300]})", 400, "outside the vocabulary"},
      {"negative token id", c.c_str(), R"({"prompt":[[1],[-1]]})", 400, "outside the vocabulary"},
      {"logit_bias outside vocab", c.c_str(), R"({"prompt":"a","logit_bias":{"999":1}})", 400, "logit_bias"},
      {"logprobs over cap", c.c_str(), R"({"prompt":"a","logprobs":6})", 400, "logprobs"},
      {"suffix refused", c.c_str(), R"({"prompt":"a","suffix":"z"})", 400, "suffix"},
      {"stream_options without stream", c.c_str(), R"({"prompt":"a","stream_options":{"include_usage":true}})", 400, "stream_options"},
      {"empty messages", ch.c_str(), R"({"messages":[]})", 400, "must not be empty"},
      {"missing messages", ch.c_str(), R"({"model":"fake-model"})", 400, "'messages' is required"},
      {"message without role", ch.c_str(), R"({"messages":[{"content":"x"}]})", 400, "role"},
      {"image part", ch.c_str(), R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", 400, "not supported"},
      {"template raises", ch.c_str(), R"({"messages":[{"role":"raise","content":"x"}]})", 400, "template error: role 'raise' is not allowed"},
      {"top_logprobs without logprobs", ch.c_str(), "{" + msgs + R"(,"top_logprobs":2})", 400, "top_logprobs"},
      {"top_logprobs over cap", ch.c_str(), "{" + msgs + R"(,"logprobs":true,"top_logprobs":6})", 400, "top_logprobs"},
      {"chat context exceeded", ch.c_str(), "{" + msgs + R"(,"max_completion_tokens":1000})", 400, "maximum context length is 256 tokens"},
      {"chat unknown model", ch.c_str(), "{" + msgs + R"(,"model":"nope"})", 404, "does not exist"},
      {"chat n wrong type", ch.c_str(), "{" + msgs + R"(,"n":"2"})", 400, "'n' must be an integer"},
  };
  for (const auto& bc : cases) {
    SCOPED_TRACE(bc.name);
    json e = expect_error(post(bc.path, bc.body), bc.status);
    if (!e.is_object()) continue;
    EXPECT_NE(e["message"].get<std::string>().find(bc.message_part), std::string::npos)
        << e["message"];
    EXPECT_EQ(e["type"], "invalid_request_error");  // 400 and 404 alike, as OpenAI does
  }
  EXPECT_EQ(ctx_.admission.pending(), 0);  // refused requests hold no admission slot
}

TEST_F(ParsingTest, ContextErrorNamesTheParam) {
  json e = expect_error(post("/v1/completions", R"({"prompt":"abc","max_tokens":254})"), 400);
  EXPECT_EQ(e["param"], "max_tokens");
  EXPECT_EQ(e["code"], "context_length_exceeded");
}

TEST_F(ParsingTest, AdmissionRefusesPastTheQueueLimit) {
  ServerConfig c = config();
  c.max_queued_requests = 2;
  ServerContext ctx(c, engine_);
  Router router(ctx);
  RouteResult a = router.route({"POST", "/v1/completions", R"({"prompt":["a","b"]})", "", ""});
  ASSERT_TRUE(a.plan.has_value());
  RouteResult b = router.route({"POST", "/v1/completions", R"({"prompt":"a"})", "", ""});
  ASSERT_TRUE(b.reply.has_value());
  EXPECT_EQ(b.reply->status, 503);
  ASSERT_EQ(b.reply->headers.size(), 1u);
  EXPECT_EQ(b.reply->headers[0].first, "Retry-After");
  ctx.admission.release(2);
  EXPECT_TRUE(router.route({"POST", "/v1/completions", R"({"prompt":"a"})", "", ""}).plan);
}

TEST_F(ParsingTest, ApiKeyGuardsEverythingButHealth) {
  ServerConfig c = config();
  c.api_key = "sk-secret";
  ServerContext ctx(c, engine_);
  Router router(ctx);
  auto status = [&](const std::string& method, const std::string& path, const std::string& auth,
                    const std::string& xkey) {
    RouteResult r = router.route({method, path, R"({"prompt":"a"})", auth, xkey});
    return r.reply ? r.reply->status : 0;  // 0 = a generation plan
  };
  EXPECT_EQ(status("GET", "/health", "", ""), 200);
  EXPECT_EQ(status("GET", "/v1/models", "", ""), 401);
  EXPECT_EQ(status("GET", "/metrics", "", ""), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "Bearer sk-wrong", ""), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "Bearer sk-secre", ""), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "Basic sk-secret", ""), 401);
  EXPECT_EQ(status("POST", "/v1/completions", "", "sk-secretX"), 401);
  EXPECT_EQ(status("GET", "/v1/models", "Bearer sk-secret", ""), 200);
  EXPECT_EQ(status("GET", "/v1/models", "", "sk-secret"), 200);
  RouteResult r = router.route({"GET", "/v1/models", "", "", ""});
  EXPECT_EQ(r.reply->body.find("sk-secret"), std::string::npos);
  json e = json::parse(r.reply->body);
  EXPECT_EQ(e["error"]["type"], "authentication_error");
}

TEST_F(ParsingTest, InfoEndpoints) {
  RouteResult m = router_.route({"GET", "/v1/models", "", "", ""});
  json models = json::parse(m.reply->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "fake-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);
  json v = json::parse(router_.route({"GET", "/version", "", "", ""}).reply->body);
  EXPECT_EQ(v["version"], "0.1.0");
  EXPECT_EQ(router_.route({"GET", "/nope", "", "", ""}).reply->status, 404);
  EXPECT_EQ(router_.route({"GET", "/v1/completions", "", "", ""}).reply->status, 405);
  engine_.set_healthy(false);
  EXPECT_EQ(router_.route({"GET", "/health", "", "", ""}).reply->status, 503);
}

TEST_F(ParsingTest, TokenizeAndDetokenize) {
  json t = json::parse(post("/tokenize", R"({"prompt":"ab"})").reply->body);
  EXPECT_EQ(t["tokens"], json({256, 'a', 'b'}));
  EXPECT_EQ(t["count"], 3);
  EXPECT_EQ(t["max_model_len"], 256);
  json tc = json::parse(
      post("/tokenize", R"({"messages":[{"role":"user","content":"q"}]})").reply->body);
  std::string rendered = "<|user|>q\n<|assistant|>";
  EXPECT_EQ(tc["count"], rendered.size());
  json d = json::parse(post("/detokenize", R"({"tokens":[104,105]})").reply->body);
  EXPECT_EQ(d["prompt"], "hi");
  expect_error(post("/detokenize", R"({"tokens":[100000]})"), 400);
  expect_error(post("/detokenize", R"({"tokens":"ab"})"), 400);
  expect_error(post("/tokenize", R"({"prompt":5})"), 400);
}

}  // namespace
}  // namespace folio
