// --tensor-parallel-size / -tp as users type it: the vLLM short spelling is rewritten before
// CLI11 parses, and sizes the run cannot honour are one-line errors (exit code 2), never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/engine_flags.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

TEST(TpFlag, ShortSpellingIsRewrittenToTheLongOne) {
  std::vector<std::string> in = {"folio", "bench", "-tp", "2", "-tp=4", "--tp", "-t", "x-tp"};
  std::vector<char*> argv;
  for (std::string& s : in) argv.push_back(s.data());
  const std::vector<std::string> out =
      tools::expand_short_aliases(static_cast<int>(argv.size()), argv.data());
  const std::vector<std::string> want = {
      "folio", "bench", "--tensor-parallel-size", "2", "--tensor-parallel-size=4", "--tp",
      "-t",    "x-tp"};
  EXPECT_EQ(out, want);
}

struct GenerateRun {
  int exit_code = -1;
  std::string err;
};

GenerateRun run_generate(const std::string& flags) {
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(getpid());
  const fs::path in = dir / ("folio_tp_in_" + tag), err = dir / ("folio_tp_err_" + tag);
  std::ofstream(in) << "{\"prompt_token_ids\": [1, 2], \"max_tokens\": 1}\n";
  const std::string cmd = std::string(FOLIO_BINARY) + " generate --model " + FOLIO_TEST_DATA_DIR +
                          "/models/llama_gqa " + flags + " < " + in.string() + " > /dev/null 2> " +
                          err.string();
  const int status = std::system(cmd.c_str());
  GenerateRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

TEST(TpFlag, TensorParallelOnTheCpuIsAClearError) {
  const GenerateRun r = run_generate("--device cpu -tp 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--tensor-parallel-size 2 needs --device cuda"), std::string::npos) << r.err;
}

TEST(TpFlag, ZeroIsRejectedByTheParser) {
  const GenerateRun r = run_generate("--device cpu --tensor-parallel-size 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tensor-parallel-size"), std::string::npos) << r.err;
}

TEST(TpFlag, OneIsTheSingleDeviceRun) {
  const GenerateRun r = run_generate("--device cpu -tp 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace folio
