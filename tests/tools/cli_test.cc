// The folio executable as users run it: render-chat against transformers' chat goldens (text
// and ids), tokenize, and generate's handling of bad input lines and bad checkpoints.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dummy_configs.h"

namespace folio {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunResult {
  int exit_code = -1;
  std::string out;
};

// Runs `[ENV] folio ARGS < input_file` and captures stdout (stderr to `err_file` if given).
RunResult run_folio(const std::string& args, const std::string& input_file,
                    const std::string& err_file = "/dev/null", const std::string& env = "") {
  std::string cmd = env + " " + std::string(FOLIO_BINARY) + " " + args + " < " + input_file +
                    " 2> " + err_file;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

std::string temp_file(const std::string& name, const std::string& content) {
  fs::path p = fs::temp_directory_path() / ("folio_cli_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(p) << content;
  return p.string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class ChatGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatGolden, RenderChatMatchesTransformers) {
  const std::string dir = std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/" + GetParam();
  if (!fs::exists(dir + "/tokenizer_config.json"))
    GTEST_SKIP() << dir << " missing: run scripts/fetch_tokenizers.sh";
  const std::string golden =
      std::string(FOLIO_TEST_DATA_DIR) + "/tokenizers/chat_" + GetParam() + ".jsonl";
  RunResult r = run_folio("render-chat --model " + dir, golden);
  ASSERT_EQ(r.exit_code, 0);
  auto got = lines_of(r.out);
  std::ifstream want_in(golden);
  std::string line;
  size_t i = 0;
  for (; std::getline(want_in, line); ++i) {
    ASSERT_LT(i, got.size());
    json want = json::parse(line);
    ASSERT_FALSE(got[i].contains("error")) << got[i]["error"];
    EXPECT_EQ(got[i]["text"], want["text"]) << "line " << i;
    EXPECT_EQ(got[i]["ids"], want["ids"]) << "line " << i;
  }
  EXPECT_EQ(i, got.size());
  EXPECT_GT(i, 0u);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatGolden, ::testing::Values("llama3", "qwen3"));

TEST(Cli, RenderChatReportsBadLines) {
  const std::string dir = std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/qwen3";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " missing";
  auto in = temp_file("bad_chat.jsonl",
                      "not json\n{\"messages\": []}\n"
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  auto got = lines_of(run_folio("render-chat --model " + dir, in).out);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].contains("error"));
  EXPECT_TRUE(got[1].contains("error"));
  EXPECT_EQ(got[2]["text"], "<|im_start|>user\nhi<|im_end|>\n");
}

TEST(Cli, GenerateKeepsGoingPastBadLines) {
  const std::string model = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";
  auto in = temp_file("gen.jsonl",
                      "{\"prompt_token_ids\": [1, 2, 3], \"max_tokens\": 3, \"temperature\": 0}\n"
                      "{bad json\n"
                      "{\"prompt_token_ids\": [1, 2], \"max_tokens\": \"3\"}\n"
                      "{\"prompt_token_ids\": [1, 99999], \"max_tokens\": 3}\n"
                      "{\"prompt_token_ids\": [4, 5], \"max_tokens\": 2, \"temperature\": 0, "
                      "\"logprobs\": 2, \"prompt_logprobs\": 1}\n");
  RunResult r = run_folio("generate --model " + model + " --max-model-len 64", in);
  ASSERT_EQ(r.exit_code, 0);
  auto got = lines_of(r.out);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i]["index"], i);
  EXPECT_EQ(got[0]["outputs"][0]["token_ids"].size(), 3u);
  EXPECT_NE(got[1]["error"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_NE(got[2]["error"].get<std::string>().find("\"max_tokens\" must be an integer"),
            std::string::npos);
  EXPECT_NE(got[3]["error"].get<std::string>().find("outside the vocabulary"), std::string::npos);
  const json& lp = got[4];
  EXPECT_EQ(lp["outputs"][0]["logprobs"].size(), 2u);
  ASSERT_EQ(lp["prompt_logprobs"].size(), 2u);
  EXPECT_TRUE(lp["prompt_logprobs"][0].is_null());
  EXPECT_TRUE(lp["prompt_logprobs"][1].contains("5"));
}

TEST(Cli, MalformedCheckpointIsOneLineErrorAndExitCode2) {
  fs::path dir = fs::temp_directory_path() / ("folio_cli_bad_model_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa/config.json",
                dir / "config.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "model.safetensors") << "\x10\x00\x00\x00\x00\x00\x00\x00{\"broken\": tr";
  auto in = temp_file("one.jsonl", "{\"prompt_token_ids\": [1], \"max_tokens\": 1}\n");
  auto err = temp_file("err.txt", "");
  RunResult r = run_folio("generate --model " + dir.string(), in, err);
  EXPECT_EQ(r.exit_code, 2);
  const std::string text = read_file(err);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("model.safetensors"), std::string::npos) << text;
  fs::remove_all(dir);
}

// generate, like the bench commands, runs dummy weights from --model-config alone; with
// --tokenizer they take text prompts. Neither --model nor --model-config is a one-line error.
TEST(Cli, GenerateFromAModelConfigAndATokenizer) {
  auto in = temp_file("text.jsonl",
                      "{\"prompt\": \"Hello world\", \"max_tokens\": 2, \"temperature\": 0}\n");
  auto err = temp_file("src_err.txt", "");
  RunResult r = run_folio("generate --device cpu", in, err);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(err),
            "folio generate: give --model DIR, or --model-config FILE with --load-format dummy\n");
  const std::string tok = std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/llama3";
  if (!fs::exists(tok + "/tokenizer.json")) GTEST_SKIP() << tok << " missing";
  const json config = testing::tiny_llama3_vocab_config();
  auto cfg = temp_file("dummy_config.json", config.dump());
  r = run_folio(
      "generate --device cpu --load-format dummy --model-config " + cfg + " --tokenizer " + tok, in,
      err);
  ASSERT_EQ(r.exit_code, 0) << read_file(err);
  auto got = lines_of(r.out);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["prompt_token_ids"], json({9906, 1917}));  // "Hello world"
  EXPECT_EQ(got[0]["outputs"][0]["token_ids"].size(), 2u);
}

TEST(Cli, LogLevelFromTheEnvironment) {
  const std::string model = std::string(FOLIO_TEST_DATA_DIR) + "/models/llama_gqa";
  auto in = temp_file("log.jsonl", "{\"prompt_token_ids\": [1, 2], \"max_tokens\": 1}\n");
  auto err = temp_file("log_err.txt", "");
  const std::string gen = "generate --model " + model + " --max-model-len 64";
  RunResult r = run_folio(gen, in, err, "FOLIO_LOG_LEVEL=debug");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(read_file(err).find("[folio INFO"), std::string::npos) << "debug shows info lines";
  r = run_folio(gen, in, err, "FOLIO_LOG_LEVEL=ERROR");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(lines_of(r.out).size(), 1u);
  EXPECT_EQ(read_file(err).find("[folio INFO"), std::string::npos) << read_file(err);
  r = run_folio(gen, in, err, "FOLIO_LOG_LEVEL=loud");
  EXPECT_EQ(r.exit_code, 2);
  const std::string text = read_file(err);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("FOLIO_LOG_LEVEL=loud"), std::string::npos) << text;
}

}  // namespace
}  // namespace folio
