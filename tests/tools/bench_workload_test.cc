// Workload files: parsing, clear per-line errors, truncation, and the seeded random prompts.
#include "tools/bench_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

namespace folio::tools {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchWorkload, ParsesALine) {
  auto item = parse_workload_line(R"({"input_len": 132, "output_len": 122, "extra": 1})");
  ASSERT_TRUE(item.ok()) << item.status().to_string();
  EXPECT_EQ(item->input_len, 132);
  EXPECT_EQ(item->output_len, 122);
}

TEST(BenchWorkload, MaxTokensMarksAnOutputThatStopsEarly) {
  auto plain = parse_workload_line(R"({"input_len": 10, "output_len": 20})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->max_tokens, 0);  // certain: max_tokens = output_len, EOS ignored
  auto early = parse_workload_line(R"({"input_len": 10, "output_len": 20, "max_tokens": 2048})");
  ASSERT_TRUE(early.ok()) << early.status().to_string();
  EXPECT_EQ(early->output_len, 20);
  EXPECT_EQ(early->max_tokens, 2048);
  auto capped = parse_workload_line(R"({"input_len": 10, "output_len": 20, "max_tokens": 20})");
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->max_tokens, 20);
  for (const char* bad : {R"({"input_len": 10, "output_len": 20, "max_tokens": 19})",
                          R"({"input_len": 10, "output_len": 20, "max_tokens": 0})",
                          R"({"input_len": 10, "output_len": 20, "max_tokens": "2048"})"}) {
    auto item = parse_workload_line(bad);
    ASSERT_FALSE(item.ok()) << bad;
    EXPECT_NE(item.status().message().find("\"max_tokens\""), std::string::npos)
        << item.status().message();
  }
}

TEST(BenchWorkload, BadLinesGiveClearErrors) {
  struct Case {
    const char* line;
    const char* expect;
  };
  for (const Case& c : {Case{"{\"input_len\": 3", "not valid JSON"},
                        Case{"[1, 2]", "expected a JSON object"},
                        Case{"{\"output_len\": 3}", "missing field \"input_len\""},
                        Case{"{\"input_len\": 3}", "missing field \"output_len\""},
                        Case{"{\"input_len\": \"3\", \"output_len\": 3}", "\"input_len\" must be an integer"},
                        Case{"{\"input_len\": 2.5, \"output_len\": 3}", "\"input_len\" must be an integer"},
                        Case{"{\"input_len\": 3, \"output_len\": 0}", "\"output_len\" must be in [1"},
                        Case{"{\"input_len\": -4, \"output_len\": 3}", "\"input_len\" must be in [1"}}) {
    auto item = parse_workload_line(c.line);
    ASSERT_FALSE(item.ok()) << c.line;
    EXPECT_NE(item.status().message().find(c.expect), std::string::npos)
        << c.line << " -> " << item.status().message();
  }
}

TEST(BenchWorkload, FileErrorsNameTheLine) {
  const std::string path = write_temp(
      "wl_bad.jsonl", "{\"input_len\": 1, \"output_len\": 2}\n\n{\"input_len\": 1}\n");
  auto items = load_workload(path, 0);
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().message().find(path + ":3: missing field \"output_len\""),
            std::string::npos)
      << items.status().message();
  EXPECT_FALSE(load_workload(::testing::TempDir() + "/no_such.jsonl", 0).ok());
  EXPECT_FALSE(load_workload(write_temp("wl_empty.jsonl", "\n  \n"), 0).ok());
}

TEST(BenchWorkload, LoadsAndTruncates) {
  const std::string path = write_temp(
      "wl_ok.jsonl",
      "{\"input_len\": 5, \"output_len\": 7}\r\n\n{\"input_len\": 6, \"output_len\": 8}\n"
      "{\"input_len\": 9, \"output_len\": 1}\n");
  auto all = load_workload(path, 0);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(total_input_tokens(*all), 20);
  EXPECT_EQ(total_output_tokens(*all), 16);
  auto two = load_workload(path, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].input_len, 6);
  auto too_many = load_workload(path, 4);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("has only 3 requests"), std::string::npos);
}

TEST(BenchWorkload, BundledShareGptLikeWorkloadLoads) {
  auto items = load_workload(std::string(FOLIO_SOURCE_DIR) + "/bench/workloads/sharegpt_like_1000.jsonl", 0);
  ASSERT_TRUE(items.ok()) << items.status().to_string();
  EXPECT_EQ(items->size(), 1000u);
  EXPECT_EQ((*items)[0].input_len, 132);
  EXPECT_EQ((*items)[0].output_len, 122);
}

TEST(BenchWorkload, RandomPromptsAreSeededAndInRange) {
  auto items = fixed_workload(50, 4, 3);
  ASSERT_EQ(items.size(), 3u);
  auto a = make_random_prompts(items, 97, 1);
  auto b = make_random_prompts(items, 97, 1);
  auto c = make_random_prompts(items, 97, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<int32_t> distinct;
  for (const auto& p : a) {
    ASSERT_EQ(p.size(), 50u);
    for (int32_t id : p) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 97);
      distinct.insert(id);
    }
  }
  EXPECT_GT(distinct.size(), 60u);  // 150 draws over 97 ids: a real spread
  EXPECT_NE(a[0], a[1]);            // requests do not share a prompt
}

TEST(BenchWorkload, PrefixGroupsShareTheirFirstTokens) {
  auto item = parse_workload_line(
      R"({"input_len": 40, "output_len": 4, "prefix_group": 3, "prefix_len": 32})");
  ASSERT_TRUE(item.ok()) << item.status().to_string();
  EXPECT_EQ(item->prefix_group, 3);
  EXPECT_EQ(item->prefix_len, 32);
  for (const char* bad :
       {R"({"input_len": 40, "output_len": 4, "prefix_group": 3})",
        R"({"input_len": 40, "output_len": 4, "prefix_len": 8})",
        R"({"input_len": 40, "output_len": 4, "prefix_group": -1, "prefix_len": 8})",
        R"({"input_len": 40, "output_len": 4, "prefix_group": 1, "prefix_len": 41})",
        R"({"input_len": 40, "output_len": 4, "prefix_group": 1, "prefix_len": 0})",
        R"({"input_len": 40, "output_len": 4, "prefix_group": "a", "prefix_len": 8})"}) {
    auto r = parse_workload_line(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("prefix_"), std::string::npos) << r.status().message();
  }

  // Groups 0 and 1 (lengths 30 and 20 in group 0: the shorter is a prefix of the longer), and
  // a request of its own between them.
  std::vector<WorkloadItem> items = {{40, 4, 0, 0, 30},
                                     {50, 4, 0, 1, 20},
                                     {40, 4, 0, -1, 0},
                                     {35, 4, 0, 0, 20},
                                     {30, 4, 0, 1, 20}};
  auto p = make_random_prompts(items, 1000, 7);
  ASSERT_EQ(p.size(), 5u);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(p[i].size(), size_t(items[i].input_len));
  auto same = [&](size_t a, size_t b, size_t from, size_t to) {
    return std::equal(p[a].begin() + from, p[a].begin() + to, p[b].begin() + from);
  };
  EXPECT_TRUE(same(0, 3, 0, 20));    // group 0 at its shorter length
  EXPECT_FALSE(same(0, 3, 20, 30));  // past request 3's prefix_len its tokens are its own
  EXPECT_TRUE(same(1, 4, 0, 20));    // group 1
  EXPECT_FALSE(same(0, 1, 0, 20));   // the groups differ
  EXPECT_FALSE(same(1, 4, 20, 30));  // own tokens after the prefix differ
  EXPECT_FALSE(same(0, 2, 0, 20));   // a request without a group shares nothing
  EXPECT_EQ(p, make_random_prompts(items, 1000, 7));
  EXPECT_NE(make_random_prompts(items, 1000, 8)[0], p[0]);  // the seed moves the prefixes too

  // Items without a group get exactly the ids they got before groups existed.
  std::vector<WorkloadItem> plain = {{40, 4}, {35, 4}};
  auto q = make_random_prompts(plain, 1000, 7);
  std::vector<WorkloadItem> mixed = {{40, 4, 0, 0, 40}, {40, 4}, {35, 4}};
  auto m = make_random_prompts(mixed, 1000, 7);
  EXPECT_EQ(m[1], q[0]);  // a whole-prompt prefix draws nothing from the main stream
  EXPECT_EQ(m[2], q[1]);
}

}  // namespace
}  // namespace folio::tools
