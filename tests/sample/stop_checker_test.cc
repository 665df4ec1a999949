// StopChecker: stop strings across token boundaries (and inside multi-byte characters),
// include_stop_str_in_output, EOS lists, stop ids, min_tokens, max_tokens, and the streaming
// hold-back, checked through a simulated output processor that must never show a client text
// that is later truncated.
#include "sample/stop_checker.h"

#include <random>

#include <gtest/gtest.h>

namespace folio {
namespace {

struct Piece {
  int32_t token;
  std::string text;
};

struct Outcome {
  std::string text;      // final output text
  std::string streamed;  // what a streaming client received, in order
  StopDecision decision;
  size_t num_tokens = 0;
};

// The output-processor loop of stop_checker.h's contract.
Outcome simulate(const SamplingParams& p, std::vector<int32_t> eos, const std::vector<Piece>& pieces) {
  const StopChecker checker(p, std::move(eos));
  Outcome o;
  size_t sent = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t n = i + 1;
    o.num_tokens = n;
    StopDecision d = checker.check_token(pieces[i].token, n);
    size_t new_bytes = 0;
    if (!d.drop_token_text) {
      o.text += pieces[i].text;
      new_bytes = pieces[i].text.size();
    }
    const StopDecision t = checker.check_text(o.text, new_bytes, n);
    if (t.finished()) d = t;
    if (d.truncate_to != std::string::npos) o.text.resize(d.truncate_to);
    if (d.finished()) {
      o.decision = d;
      break;
    }
    const size_t safe = o.text.size() - checker.hold_back(o.text);
    if (safe > sent) {
      o.streamed += o.text.substr(sent, safe - sent);
      sent = safe;
    }
  }
  EXPECT_LE(sent, o.text.size());
  o.streamed += o.text.substr(sent);  // the final flush
  EXPECT_EQ(o.streamed, o.text) << "the client saw text that was later cut";
  return o;
}

std::vector<Piece> pieces_of(const std::vector<std::string>& texts, int32_t first_token = 100) {
  std::vector<Piece> out;
  for (const auto& t : texts) out.push_back({first_token++, t});
  return out;
}

TEST(StopChecker, StopStringAcrossTokenBoundaries) {
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"STOP"};
  const auto o = simulate(p, {2}, pieces_of({"Hel", "lo wo", "rld ST", "OP more", "never"}));
  EXPECT_EQ(o.text, "Hello world ");
  EXPECT_EQ(o.decision.finish_reason, FinishReason::kStop);
  EXPECT_EQ(o.decision.stop_string, "STOP");
  EXPECT_EQ(o.num_tokens, 4u);
  EXPECT_STREQ(finish_reason_name(o.decision.finish_reason), "stop");
}

TEST(StopChecker, IncludeStopStringInOutput) {
  SamplingParams p;
  p.stop = {"STOP"};
  p.include_stop_str_in_output = true;
  const auto o = simulate(p, {2}, pieces_of({"Hel", "lo ST", "OP more"}));
  EXPECT_EQ(o.text, "Hello STOP");
  EXPECT_EQ(o.decision.stop_string, "STOP");
  // A stop string at the very end needs no truncation.
  const auto o2 = simulate(p, {2}, pieces_of({"ab", "cST", "OP"}));
  EXPECT_EQ(o2.text, "abcSTOP");
  EXPECT_EQ(o2.decision.truncate_to, std::string::npos);
}

TEST(StopChecker, StopStringSplitInsideMultiByteCharacter) {
  SamplingParams p;
  p.stop = {"日本"};  // E6 97 A5 E6 9C AC
  const StopChecker c(p, {});
  EXPECT_EQ(c.hold_back("abc\xE6"), 1u);
  EXPECT_EQ(c.hold_back("abc\xE6\x97"), 2u);
  EXPECT_EQ(c.hold_back("abc\xE6\x97\xA5"), 3u);  // a whole character, still a prefix of "日本"
  EXPECT_EQ(c.hold_back("abc\xE6\x97\xA5x"), 0u);
  const auto o = simulate(p, {}, pieces_of({"abc\xE6", "\x97", "\xA5\xE6\x9C", "\xAC rest"}));
  EXPECT_EQ(o.text, "abc");
  EXPECT_EQ(o.decision.stop_string, "日本");
  // The same bytes as part of another character never match: "日" followed by "月" (E6 9C 88).
  const auto o2 = simulate(p, {}, pieces_of({"\xE6\x97", "\xA5\xE6\x9C", "\x88!"}));
  EXPECT_FALSE(o2.decision.finished());
  EXPECT_EQ(o2.text, "日月!");
}

TEST(StopChecker, IncompleteUtf8IsHeldBackWithoutStopStrings) {
  SamplingParams p;
  const StopChecker c(p, {});
  EXPECT_EQ(c.hold_back("ab\xC3"), 1u);
  EXPECT_EQ(c.hold_back("ab\xC3\xA9"), 0u);
  EXPECT_EQ(c.hold_back("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(c.hold_back(""), 0u);
}

TEST(StopChecker, EarliestStopStringWins) {
  SamplingParams p;
  p.stop = {"b", "a"};
  const auto o = simulate(p, {}, pieces_of({"xx", "xab"}));
  EXPECT_EQ(o.text, "xxx");
  EXPECT_EQ(o.decision.stop_string, "a");
}

TEST(StopChecker, HoldBackIsTheLongestStopPrefix) {
  SamplingParams p;
  p.stop = {"STOP", "SToa"};
  const StopChecker c(p, {});
  EXPECT_EQ(c.hold_back("Hello S"), 1u);
  EXPECT_EQ(c.hold_back("Hello STO"), 3u);
  EXPECT_EQ(c.hold_back("Hello STX"), 0u);
  EXPECT_EQ(c.hold_back("ST"), 2u);
  p.include_stop_str_in_output = true;
  EXPECT_EQ(StopChecker(p, {}).hold_back("Hello STO"), 0u);
}

TEST(StopChecker, MaxTokensOne) {
  SamplingParams p;
  p.max_tokens = 1;
  const StopChecker c(p, {2});
  const StopDecision d = c.check_token(50, 1);
  EXPECT_EQ(d.finish_reason, FinishReason::kLength);
  EXPECT_FALSE(d.drop_token_text);
  EXPECT_EQ(c.check_token(2, 1).finish_reason, FinishReason::kStop);  // EOS before length (vLLM)
  const auto o = simulate(p, {2}, pieces_of({"only", "never"}));
  EXPECT_EQ(o.text, "only");
  EXPECT_EQ(o.num_tokens, 1u);
}

TEST(StopChecker, EosListsAndStopTokenIds) {
  SamplingParams p;
  p.stop_token_ids = {9};
  const StopChecker c(p, {2, 7, 2});
  StopDecision d = c.check_token(2, 3);
  EXPECT_EQ(d.finish_reason, FinishReason::kStop);
  EXPECT_FALSE(d.stop_token_id.has_value());  // the primary EOS has no stop_reason
  EXPECT_TRUE(d.drop_token_text);
  d = c.check_token(7, 3);
  EXPECT_EQ(d.finish_reason, FinishReason::kStop);
  EXPECT_EQ(d.stop_token_id, 7);  // an extra generation_config EOS acts as a stop id
  d = c.check_token(9, 3);
  EXPECT_EQ(d.stop_token_id, 9);
  EXPECT_FALSE(c.check_token(8, 3).finished());

  p.ignore_eos = true;
  const StopChecker ig(p, {2, 7});
  EXPECT_FALSE(ig.check_token(2, 3).finished());
  EXPECT_FALSE(ig.check_token(7, 3).finished());
  EXPECT_EQ(ig.check_token(9, 3).stop_token_id, 9);

  p.ignore_eos = false;
  p.include_stop_str_in_output = true;  // the stop token's text is then kept
  EXPECT_FALSE(StopChecker(p, {2}).check_token(2, 1).drop_token_text);
  // The dropped token text never reaches the output.
  p.include_stop_str_in_output = false;
  const auto o = simulate(p, {2}, {{100, "hi"}, {2, "</s>"}});
  EXPECT_EQ(o.text, "hi");
}

TEST(StopChecker, MinTokensDefersEveryStop) {
  SamplingParams p;
  p.min_tokens = 3;
  p.max_tokens = 10;
  p.stop = {"X"};
  p.stop_token_ids = {9};
  const StopChecker c(p, {2});
  EXPECT_FALSE(c.check_token(2, 1).finished());
  EXPECT_FALSE(c.check_token(9, 2).finished());
  EXPECT_TRUE(c.check_token(2, 3).finished());
  // A stop string in the text of the first min_tokens tokens does not stop (vLLM: only once
  // the output is longer than min_tokens).
  const auto o = simulate(p, {2}, pieces_of({"aXb", "c", "d", "eXf", "g"}));
  EXPECT_EQ(o.text, "aXbcde");
  EXPECT_EQ(o.num_tokens, 4u);
}

TEST(StopChecker, LengthWhenNothingElseStops) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"zz"};
  const auto o = simulate(p, {2}, pieces_of({"a", "z", "b", "c"}));
  EXPECT_EQ(o.decision.finish_reason, FinishReason::kLength);
  EXPECT_EQ(o.text, "azb");
  // A stop string completed by the last allowed token wins over length.
  const auto o2 = simulate(p, {2}, pieces_of({"a", "z", "zb"}));
  EXPECT_EQ(o2.decision.finish_reason, FinishReason::kStop);
  EXPECT_EQ(o2.text, "a");
}

// Random splits of texts holding a stop string somewhere: the output is always the text up to
// the first stop occurrence, and the streamed text is never ahead of it.
TEST(StopChecker, RandomSplitsNeverLeak) {
  std::mt19937 gen(7);
  const std::vector<std::string> alphabet = {"a", "b", "S", "T", "O", "P", "é", "日"};
  SamplingParams p;
  p.max_tokens = 1000;
  p.stop = {"STOP", "é日"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string full;
    const int len = 5 + static_cast<int>(gen() % 40);
    for (int i = 0; i < len; ++i) full += alphabet[gen() % alphabet.size()];
    if (gen() % 2) full.insert(gen() % full.size(), "STOP");
    std::vector<std::string> texts;
    for (size_t i = 0; i < full.size();) {
      const size_t n = 1 + gen() % 5;
      texts.push_back(full.substr(i, n));
      i += n;
    }
    const auto o = simulate(p, {}, pieces_of(texts));
    size_t first = std::string::npos;
    for (const auto& s : p.stop) first = std::min(first, full.find(s));
    EXPECT_EQ(o.text, full.substr(0, first)) << full;
    EXPECT_EQ(o.decision.finished(), first != std::string::npos);
  }
}

}  // namespace
}  // namespace folio
