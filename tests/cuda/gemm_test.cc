// cuBLASLt GEMM y = x · w^T (+ y) against a double-precision loop, bf16/fp16, odd shapes, the
// accumulate mode, the per-shape plan cache, autotuning (on/off agree; tuning never touches the
// caller's output), prepare() then CUDA-graph capture, and the refusal to plan during capture.
// These test the cuBLASLt path: every Gemm here is created with skinny_max_m 0.
#include "backend/cuda/gemm.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/cuda/gemm_autotune.h"
#include "backend/gemm_tune_cache.h"
#include "cuda_test_util.h"
#include "gemm_reference.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;
using testing::rel_error;
using testing::rounded;
constexpr auto reference = testing::gemm_reference;

class GemmTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }
  DType dt() const { return GetParam(); }
  std::mt19937 rng{42};
};

// Sets an environment variable for a scope, restoring the old value (or its absence) after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// y0 + x·w^T through `g` (accumulate) against the reference, on fresh random operands.
bool accumulate_matches(DType dt, Gemm& g, int m, int n, int k) {
  std::mt19937 rng(m * 31 + n);
  auto x = rounded(dt, testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt, testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto y0 = rounded(dt, testing::random_vec(static_cast<size_t>(m) * n, rng, -5, 5));
  auto dx = DevTensor::upload(dt, x), dw = DevTensor::upload(dt, w);
  auto y = DevTensor::upload(dt, y0);
  if (!g.matmul_nt(dt, dx.data(), dw.data(), y.data(), m, n, k, true, nullptr).ok()) return false;
  return rel_error(y.download(), reference(x, w, &y0, m, n, k)) < 1e-2;
}

TEST_P(GemmTest, MatchesReferenceOnSeveralShapes) {
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  struct Shape {
    int m, n, k;
  };
  for (Shape s : {Shape{1, 512, 1024}, Shape{37, 100, 72}, Shape{128, 384, 256}, Shape{3, 24, 8}}) {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(s.n) * s.k, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto y = DevTensor::poisoned(dt(), static_cast<size_t>(s.m) * s.n);
    FOLIO_ASSERT_OK(
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), s.m, s.n, s.k, false, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, nullptr, s.m, s.n, s.k)), 1e-2)
        << s.m << "x" << s.n << "x" << s.k;
  }
  EXPECT_EQ((*gemm)->cached_plans(), 4u);
  // Every shape has m <= 512: each was timed unless cuBLASLt offered a single algorithm.
  EXPECT_GE((*gemm)->tuned_plans(), 1u);
}

TEST_P(GemmTest, AccumulateAddsIntoOutputAndReusesPlan) {
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  const int m = 9, n = 256, k = 128;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto y0 = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * n, rng, -5, 5));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  for (int rep = 0; rep < 2; ++rep) {
    auto y = DevTensor::upload(dt(), y0);
    FOLIO_ASSERT_OK(
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, true, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, &y0, m, n, k)), 1e-2);
  }
  EXPECT_EQ((*gemm)->cached_plans(), 1u);
}

// Tuned and first-heuristic plans agree with each other and with the reference on decode-like
// skinny shapes (where tuning most often picks split-K algorithms that sum in another order).
TEST_P(GemmTest, AutotuneOnAndOffAgree) {
  auto on = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  auto off = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_TRUE((*on)->autotune_enabled());
  EXPECT_FALSE((*off)->autotune_enabled());
  struct Shape {
    int m, n, k;
  };
  for (Shape s : {Shape{1, 2048, 4096}, Shape{8, 1024, 2048}, Shape{32, 768, 1536}}) {
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(s.m) * s.k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(s.n) * s.k, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto y_on = DevTensor::poisoned(dt(), static_cast<size_t>(s.m) * s.n);
    auto y_off = DevTensor::poisoned(dt(), static_cast<size_t>(s.m) * s.n);
    FOLIO_ASSERT_OK(
        (*on)->matmul_nt(dt(), dx.data(), dw.data(), y_on.data(), s.m, s.n, s.k, false, nullptr));
    FOLIO_ASSERT_OK(
        (*off)->matmul_nt(dt(), dx.data(), dw.data(), y_off.data(), s.m, s.n, s.k, false, nullptr));
    const auto ref = reference(x, w, nullptr, s.m, s.n, s.k);
    const auto a = y_on.download(), b = y_off.download();
    EXPECT_LT(rel_error(a, ref), 1e-2) << s.m << "x" << s.n << "x" << s.k;
    EXPECT_LT(rel_error(a, b), 1e-2) << s.m << "x" << s.n << "x" << s.k;
  }
  EXPECT_EQ((*off)->tuned_plans(), 0u);
  printf("[ tuned ] %zu of 3 plans timed, %zu chose another algorithm than the heuristic's first\n",
         (*on)->tuned_plans(), (*on)->retuned_plans());
}

// The first accumulate call creates and tunes the plan; the timing runs must write scratch, so
// the caller's y ends as exactly y0 + x·w^T (once), for a fresh plan and through prepare().
TEST_P(GemmTest, TuningAnAccumulatePlanLeavesCallerOutputAlone) {
  const int m = 8, n = 2048, k = 1024;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto y0 = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * n, rng, -5, 5));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  const auto ref = reference(x, w, &y0, m, n, k);
  for (bool use_prepare : {false, true}) {
    auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
    ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
    auto y = DevTensor::upload(dt(), y0);
    if (use_prepare) {
      FOLIO_ASSERT_OK((*gemm)->prepare(dt(), dx.data(), dw.data(), m, n, k, true));
      EXPECT_TRUE((*gemm)->has_plan(dt(), m, n, k, true));
      EXPECT_FALSE((*gemm)->has_plan(dt(), m, n, k, false));
      EXPECT_EQ(y.download(), y0);  // prepare never sees y
    }
    FOLIO_ASSERT_OK(
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, true, nullptr));
    EXPECT_LT(rel_error(y.download(), ref), 1e-2) << "prepare " << use_prepare;
    EXPECT_EQ((*gemm)->cached_plans(), 1u);
  }
}

TEST_P(GemmTest, PrepareRejectsBadShapes) {
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ((*gemm)->prepare(dt(), 0, 16, 16, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*gemm)->prepare(dt(), 4, 16, -1, false).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*gemm)->prepare(dt(), nullptr, nullptr, 4, 16, 16, false).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*gemm)->cached_plans(), 0u);
}

// m values of one bucket share the first one's timed algorithm (checked by cuBLASLt for each m):
// every m still matches the reference, and only the first m of a bucket is timed anew.
TEST_P(GemmTest, BucketMatesReuseTheTunedAlgorithm) {
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  const int n = 1536, k = 1024;
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto dw = DevTensor::upload(dt(), w);
  for (int m : {17, 20, 24, 5, 6}) {  // buckets 24, 24, 24, 6, 6
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
    auto dx = DevTensor::upload(dt(), x);
    auto y = DevTensor::poisoned(dt(), static_cast<size_t>(m) * n);
    FOLIO_ASSERT_OK(
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, false, nullptr));
    EXPECT_LT(rel_error(y.download(), reference(x, w, nullptr, m, n, k)), 1e-2) << "m " << m;
  }
  EXPECT_EQ((*gemm)->cached_plans(), 5u);
}

// Owns a non-blocking stream and a graph (and its executable) for the capture tests.
struct Capture {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Capture() { EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess); }
  ~Capture() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (stream) cudaStreamDestroy(stream);
  }
};

// prepare() for both shapes (one on the caller's operands, one on stand-ins), then a captured
// graph of two GEMMs (one accumulating), replayed twice: y1 = x·w^T each time, y2 gains x2·w2^T
// per replay.
TEST_P(GemmTest, PrepareThenCaptureAndReplay) {
  auto gemm = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
  const int m = 4, n = 1024, k = 512, n2 = 512, k2 = 1024;
  auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
  auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
  auto x2 = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k2, rng));
  auto w2 = rounded(dt(), testing::random_vec(static_cast<size_t>(n2) * k2, rng));
  auto y0 = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * n2, rng, -5, 5));
  auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
  auto dx2 = DevTensor::upload(dt(), x2), dw2 = DevTensor::upload(dt(), w2);
  auto y1 = DevTensor::poisoned(dt(), static_cast<size_t>(m) * n);
  auto y2 = DevTensor::upload(dt(), y0);
  Capture c;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // uploads/poisoning ran on the legacy stream
  FOLIO_ASSERT_OK((*gemm)->prepare(dt(), dx.data(), dw.data(), m, n, k, false, c.stream));
  FOLIO_ASSERT_OK((*gemm)->prepare(dt(), m, n2, k2, true, c.stream));
  ASSERT_EQ((*gemm)->cached_plans(), 2u);
  ASSERT_EQ(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status s1 =
      (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y1.data(), m, n, k, false, c.stream);
  const Status s2 =
      (*gemm)->matmul_nt(dt(), dx2.data(), dw2.data(), y2.data(), m, n2, k2, true, c.stream);
  ASSERT_EQ(cudaStreamEndCapture(c.stream, &c.graph), cudaSuccess);
  FOLIO_ASSERT_OK(s1);
  FOLIO_ASSERT_OK(s2);
  EXPECT_EQ((*gemm)->cached_plans(), 2u);
  ASSERT_EQ(cudaGraphInstantiate(&c.exec, c.graph, 0), cudaSuccess);
  std::vector<float> acc = y0;
  for (int replay = 1; replay <= 2; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(c.exec, c.stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(c.stream), cudaSuccess);
    EXPECT_LT(rel_error(y1.download(), reference(x, w, nullptr, m, n, k)), 1e-2) << replay;
    acc = reference(x2, w2, &acc, m, n2, k2);
    EXPECT_LT(rel_error(y2.download(), acc), 1e-2) << replay;
  }
}

// Without a plan, matmul_nt on a capturing stream fails with a message naming the cause, records
// nothing, leaves the capture valid, and works once the capture has ended.
TEST_P(GemmTest, MatmulWithoutPlanDuringCaptureFails) {
  for (GemmAutotune mode : {GemmAutotune::kOn, GemmAutotune::kOff}) {
    auto gemm = Gemm::create(32u << 20, mode, 0);
    ASSERT_TRUE(gemm.ok()) << gemm.status().to_string();
    const int m = 2, n = 256, k = 128;
    auto x = rounded(dt(), testing::random_vec(static_cast<size_t>(m) * k, rng));
    auto w = rounded(dt(), testing::random_vec(static_cast<size_t>(n) * k, rng));
    auto dx = DevTensor::upload(dt(), x), dw = DevTensor::upload(dt(), w);
    auto y = DevTensor::poisoned(dt(), static_cast<size_t>(m) * n);
    Capture c;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the poisoning ran on the legacy stream
    ASSERT_EQ(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status st =
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, false, c.stream);
    const Status prep = (*gemm)->prepare(dt(), m, n, k, false, c.stream);
    ASSERT_EQ(cudaStreamEndCapture(c.stream, &c.graph), cudaSuccess);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("capturing"), std::string::npos) << st.to_string();
    EXPECT_FALSE(prep.ok());
    EXPECT_EQ((*gemm)->cached_plans(), 0u);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    FOLIO_ASSERT_OK(
        (*gemm)->matmul_nt(dt(), dx.data(), dw.data(), y.data(), m, n, k, false, c.stream));
    ASSERT_EQ(cudaStreamSynchronize(c.stream), cudaSuccess);
    EXPECT_LT(rel_error(y.download(), reference(x, w, nullptr, m, n, k)), 1e-2);
  }
}

// FOLIO_GEMM_TUNE_LARGE_M (gemm_sustained_tune.h): the first plan of a product at m >= M is timed
// under sustained load on a transient output, so the caller's accumulate output gets exactly one
// add; a later m of the product borrows the choice; m below M keeps the heuristic's first; every
// result matches the reference.
TEST_P(GemmTest, SustainedLargeMPlansMatchReferenceAndAddOnce) {
  std::unique_ptr<Gemm> gemm;
  {
    ScopedEnv large("FOLIO_GEMM_TUNE_LARGE_M", "64");
    auto g = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    gemm = std::move(*g);
  }
  const int n = 384, k = 256;
  for (int m : {48, 96, 200}) EXPECT_TRUE(accumulate_matches(dt(), *gemm, m, n, k)) << "m " << m;
  EXPECT_EQ(gemm->cached_plans(), 3u);
  EXPECT_EQ(gemm->tuned_plans(), 2u);  // m 96 timed, m 200 borrowed; m 48 heuristic
  EXPECT_EQ(gemm->sustained_timings(), 1u);
}

// FOLIO_GEMM_TUNE_CACHE: the first Gemm times the product and writes its choice; a second Gemm
// (another process, in effect) reads it back and times nothing; a malformed file fails create().
TEST_P(GemmTest, SustainedChoicesAreKeptInTheTuneCacheAndReadBack) {
  const std::string path = ::testing::TempDir() + "folio-gemm-tune-" + dtype_name(dt()) + ".json";
  std::remove(path.c_str());
  ScopedEnv large("FOLIO_GEMM_TUNE_LARGE_M", "64");
  ScopedEnv cache("FOLIO_GEMM_TUNE_CACHE", path.c_str());
  const int m = 96, n = 384, k = 256;
  auto first = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(accumulate_matches(dt(), **first, m, n, k));
  EXPECT_EQ((*first)->sustained_timings(), 1u);
  auto written = GemmTuneCache::load(path);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  ASSERT_EQ(written->entries().size(), 1u);
  EXPECT_EQ(written->entries()[0].key.n, n);
  EXPECT_EQ(written->entries()[0].key.k, k);
  EXPECT_TRUE(written->entries()[0].key.accumulate);
  auto second = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_TRUE(accumulate_matches(dt(), **second, m, n, k));
  EXPECT_EQ((*second)->sustained_timings(), 0u);
  EXPECT_EQ((*second)->tuned_plans(), 1u);
  std::ofstream(path) << "{ not json";
  auto bad = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status().to_string();
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(DTypes, GemmTest, ::testing::Values(DType::kBF16, DType::kFP16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GemmAutotuneOptions, BucketsCoverEveryM) {
  const std::pair<int, int> expect[] = {{1, 1},   {4, 4},   {5, 6},   {7, 8},     {9, 12},
                                        {13, 16}, {17, 24}, {33, 48}, {257, 384}, {500, 512}};
  for (auto [m, bucket] : expect) EXPECT_EQ(tune_bucket(m), bucket) << m;
  for (int m = 1; m <= 4096; ++m) {
    ASSERT_GE(tune_bucket(m), m);
    ASSERT_GE(tune_bucket(m), tune_bucket(m - 1 > 0 ? m - 1 : 1));
  }
}

// The switches are read strictly: a typo must not silently keep (or drop) autotuning.
TEST(GemmAutotuneOptions, ReadsAndValidatesEnvironment) {
  const char* saved = std::getenv("FOLIO_GEMM_AUTOTUNE");
  const std::string keep = saved ? saved : "";
  const char* saved_large = std::getenv("FOLIO_GEMM_TUNE_LARGE_M");
  const std::string keep_large = saved_large ? saved_large : "";
  setenv("FOLIO_GEMM_AUTOTUNE", "0", 1);
  auto o = AutotuneOptions::from_env();
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->enabled);
  setenv("FOLIO_GEMM_AUTOTUNE", "1", 1);
  o = AutotuneOptions::from_env();
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->enabled);
  EXPECT_EQ(o->max_candidates, 16);
  EXPECT_EQ(o->large_m, std::atoi(saved_large ? saved_large : "0"));
  setenv("FOLIO_GEMM_AUTOTUNE", "yes", 1);
  EXPECT_EQ(AutotuneOptions::from_env().status().code(), StatusCode::kInvalidArgument);
  setenv("FOLIO_GEMM_AUTOTUNE", "0", 1);
  setenv("FOLIO_GEMM_TUNE_LARGE_M", "4096", 1);
  o = AutotuneOptions::from_env();
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->large_m, 4096);
  setenv("FOLIO_GEMM_TUNE_LARGE_M", "big", 1);
  EXPECT_EQ(AutotuneOptions::from_env().status().code(), StatusCode::kInvalidArgument);
  if (saved_large)
    setenv("FOLIO_GEMM_TUNE_LARGE_M", keep_large.c_str(), 1);
  else
    unsetenv("FOLIO_GEMM_TUNE_LARGE_M");
  if (saved)
    setenv("FOLIO_GEMM_AUTOTUNE", keep.c_str(), 1);
  else
    unsetenv("FOLIO_GEMM_AUTOTUNE");
}

}  // namespace
}  // namespace folio::cuda
