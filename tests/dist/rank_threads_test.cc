// RankThreads runs each rank's call on that rank's own, persistent thread and reports the
// failing rank; RankAgreement returns the minimum over ranks and turns any rank's failure into
// an error on every rank instead of a wait that never ends.
#include "dist/rank_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

namespace folio {
namespace {

TEST(RankThreads, EachRankRunsOnItsOwnPersistentThread) {
  RankThreads t(4);
  std::vector<std::thread::id> first(4), second(4);
  ASSERT_TRUE(t.run([&](int r) {
                 first[r] = std::this_thread::get_id();
                 return Status();
               }).ok());
  ASSERT_TRUE(t.run([&](int r) {
                 second[r] = std::this_thread::get_id();
                 return Status();
               }).ok());
  EXPECT_EQ(first, second);
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 4u);
  EXPECT_EQ(first[0] == std::this_thread::get_id(), false);
}

TEST(RankThreads, RunWaitsForEveryRankAndNamesTheFailingOne) {
  RankThreads t(3);
  std::atomic<int> done{0};
  Status st = t.run([&](int r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * r));
    ++done;
    return r == 2 ? invalid_argument("bad shard") : Status();
  });
  EXPECT_EQ(done.load(), 3);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "tensor-parallel rank 2: bad shard");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(t.run([](int) { return Status(); }).ok());
}

TEST(RankAgreement, ReturnsTheMinimumOverRanksRoundAfterRound) {
  RankThreads t(4);
  RankAgreement a(4);
  std::vector<int64_t> got(4);
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(t.run([&](int r) -> Status {
                   FOLIO_ASSIGN_OR_RETURN(got[r], a.agree(Status(), 100 + (r + round) % 4));
                   return Status();
                 }).ok());
    for (int64_t v : got) EXPECT_EQ(v, 100);
  }
}

TEST(RankAgreement, AFailingRankReleasesTheOthers) {
  RankThreads t(3);
  RankAgreement a(3);
  // Rank 1 gives up before reaching the agreement (as a rank whose load failed does).
  Status st = t.run([&](int r) -> Status {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      Status err = resource_exhausted("out of memory");
      a.fail(err);
      return err;
    }
    auto v = a.agree(Status(), 7);
    return v.ok() ? internal_error("agreed without rank 1") : v.status();
  });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("out of memory"), std::string::npos) << st.message();
  // Later agreements fail at once.
  EXPECT_FALSE(a.agree(Status(), 1).ok());
}

TEST(RankAgreement, AnErrorPassedToAgreeReachesEveryRank) {
  RankThreads t(2);
  RankAgreement a(2);
  std::vector<Status> seen(2);
  (void)t.run([&](int r) {
    seen[r] = a.agree(r == 0 ? invalid_argument("rank 0 is unhappy") : Status(), 1).status();
    return Status();
  });
  EXPECT_FALSE(seen[0].ok());
  EXPECT_FALSE(seen[1].ok());
  EXPECT_NE(seen[1].message().find("rank 0 is unhappy"), std::string::npos);
}

}  // namespace
}  // namespace folio
