// OutputChannel: the engine-to-I/O contract (order, coalescing, edge-triggered notify, close).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/engine_client.h"

namespace folio {
namespace {

RequestOutput tokens(std::vector<int32_t> ids, std::string text, bool finished = false) {
  RequestOutput o;
  CompletionDelta d;
  d.index = 0;
  d.token_ids = std::move(ids);
  d.text = std::move(text);
  if (finished) d.finish_reason = "length";
  o.deltas.push_back(std::move(d));
  o.finished = finished;
  o.num_generated_tokens = 1;
  return o;
}

TEST(OutputChannel, DrainsInOrderAndNotifiesOnEdges) {
  int notified = 0;
  OutputChannel ch(8, [&] { ++notified; });
  EXPECT_TRUE(ch.push(tokens({1}, "a")));
  EXPECT_TRUE(ch.push(tokens({2}, "b")));
  EXPECT_EQ(notified, 1);  // the second push found a wake-up pending
  auto out = ch.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].deltas[0].text, "a");
  EXPECT_EQ(out[1].deltas[0].text, "b");
  EXPECT_TRUE(ch.push(tokens({3}, "c", /*finished=*/true)));
  EXPECT_EQ(notified, 2);
  EXPECT_FALSE(ch.push(tokens({4}, "d")));  // nothing after the final output
  EXPECT_EQ(ch.drain().size(), 1u);
}

TEST(OutputChannel, CoalescesPastCapacityWithoutLosingTokens) {
  OutputChannel ch(2, nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(ch.push(tokens({i}, std::string(1, 'a' + i))));
  EXPECT_EQ(ch.size(), 2u);
  auto out = ch.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].deltas[0].text, "a");
  EXPECT_EQ(out[1].deltas[0].text, "bcdefghij");
  EXPECT_EQ(out[1].deltas[0].token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(OutputChannel, MergeKeepsSequencesApartAndTakesLaterState) {
  RequestOutput a;
  a.deltas.push_back({0, {1}, "x", {}, -1.0, std::nullopt, {}});
  RequestOutput b;
  b.deltas.push_back({1, {2}, "y", {}, -2.0, std::nullopt, {}});
  b.deltas.push_back({0, {3}, "z", {}, -3.0, "stop", std::string("z")});
  b.num_generated_tokens = 3;
  b.finished = true;
  merge_output(a, std::move(b));
  ASSERT_EQ(a.deltas.size(), 2u);
  EXPECT_EQ(a.deltas[0].text, "xz");
  EXPECT_EQ(a.deltas[0].finish_reason, "stop");
  EXPECT_EQ(std::get<std::string>(a.deltas[0].stop_reason), "z");
  EXPECT_EQ(a.deltas[0].cumulative_logprob, -3.0);
  EXPECT_EQ(a.deltas[1].text, "y");
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(a.num_generated_tokens, 3);
}

TEST(OutputChannel, CloseDropsEverythingAndSilencesNotify) {
  int notified = 0;
  OutputChannel ch(4, [&] { ++notified; });
  EXPECT_TRUE(ch.push(tokens({1}, "a")));
  ch.close();
  EXPECT_TRUE(ch.closed());
  EXPECT_FALSE(ch.push(tokens({2}, "b")));
  EXPECT_TRUE(ch.drain().empty());
  EXPECT_EQ(notified, 1);
}

TEST(OutputChannel, ConcurrentProducerAndConsumerLoseNothing) {
  std::atomic<int> wakeups{0};
  OutputChannel ch(4, [&] { wakeups.fetch_add(1); });
  constexpr int kTokens = 20000;
  std::thread engine([&] {
    for (int i = 0; i < kTokens; ++i) ch.push(tokens({i}, "t", i == kTokens - 1));
  });
  std::vector<int32_t> got;
  bool finished = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!finished && std::chrono::steady_clock::now() < deadline) {
    for (auto& o : ch.drain()) {
      for (auto& d : o.deltas) got.insert(got.end(), d.token_ids.begin(), d.token_ids.end());
      finished = finished || o.finished;
    }
  }
  engine.join();
  ASSERT_TRUE(finished);
  ASSERT_EQ(got.size(), static_cast<size_t>(kTokens));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(got[i], i);
  EXPECT_GE(wakeups.load(), 1);
}

}  // namespace
}  // namespace folio
