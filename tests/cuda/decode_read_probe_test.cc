// The read probe (backend/cuda/decode_read_probe.h): it must read exactly the K/V rows tc reads
// (each warp's XOR checked against the host's over the rows of that warp's chunks), and its bench,
// AttentionBench.K1ReadCeiling (FOLIO_CUDA_BENCH=1), prints the rate at which that access pattern
// can be read on this GPU beside the plain copy's: tc's ceiling on each K1 shape.
#include "backend/cuda/decode_read_probe.h"

#include <cstring>

#include "attention_bench_util.h"

namespace folio::cuda {
namespace {

using namespace attention_bench;  // NOLINT: the benchmarks' own helpers

// The XOR of the 32-bit words of `bytes` bytes at p (a multiple of 4).
uint32_t xor_words(const uint8_t* p, size_t bytes) {
  uint32_t x = 0;
  for (size_t i = 0; i < bytes; i += 4) {
    uint32_t w;
    std::memcpy(&w, p + i, 4);
    x ^= w;
  }
  return x;
}

struct ProbeCase {
  bool fp8;
  int block_size;
  std::vector<int> lens;
};

const char* staging_name(ReadProbeStaging s) {
  switch (s) {
    case ReadProbeStaging::kRegisters:
      return "registers";
    case ReadProbeStaging::kCpAsync:
      return "cp.async";
    default:
      return "bulk rows";
  }
}

constexpr ReadProbeStaging kStagings[] = {ReadProbeStaging::kRegisters, ReadProbeStaging::kCpAsync,
                                          ReadProbeStaging::kBulkRows};

void check_probe(const ProbeCase& c, ReadProbeStaging staging, int depth, std::mt19937& rng) {
  const int kv_heads = 2, heads = 8, D = 128, W = kReadProbeWarps;
  const size_t elem = c.fp8 ? 1 : 2, row = D * elem, slot_bytes = kv_heads * row;
  Batch b;
  int pages = 0;
  for (int n : c.lens) pages += (n + c.block_size - 1) / c.block_size;
  pages += 3;  // pages no sequence owns: a read past a table would show in the XOR
  std::vector<int32_t> phys(pages);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  int used = 0;
  for (int n : c.lens) {
    b.qs.push_back(b.qs.back() + 1);
    b.ctx.push_back(n);
    for (int i = 0; i < (n + c.block_size - 1) / c.block_size; ++i) b.bt.push_back(phys[used++]);
    b.bts.push_back(static_cast<int32_t>(b.bt.size()));
  }
  b.d_qs = testing::upload_raw(b.qs);
  b.d_ctx = testing::upload_raw(b.ctx);
  b.d_bts = testing::upload_raw(b.bts);
  b.d_bt = testing::upload_raw(b.bt);
  const size_t cache_bytes = static_cast<size_t>(pages) * c.block_size * slot_bytes;
  std::vector<uint8_t> k(cache_bytes), v(cache_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& x : k) x = static_cast<uint8_t>(byte(rng));
  for (auto& x : v) x = static_cast<uint8_t>(byte(rng));
  DeviceBuffer dk = testing::upload_raw(k), dv = testing::upload_raw(v);
  const int S = static_cast<int>(c.lens.size());
  std::vector<uint32_t> poison(static_cast<size_t>(S) * kv_heads * W, 0xDEADBEEFu);
  DeviceBuffer sink = testing::upload_raw(poison);
  PagedAttentionParams p = params(b, c.block_size, nullptr, dk.data(), dv.data(), nullptr);
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  if (c.fp8) p.kv_dtype = KvCacheDtype::kFp8E4m3;
  const Status st = decode_read_probe(p, staging, depth, 0, sink.as<uint32_t>(), nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<uint32_t> got(poison.size());
  ASSERT_TRUE(copy(got.data(), sink.data(), got.size() * 4).ok());
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < kv_heads; ++h)
      for (int w = 0; w < W; ++w) {
        uint32_t want = 0;
        for (int tok = 0; tok < c.lens[s]; ++tok) {
          if ((tok / 16) % W != w) continue;  // warp w takes chunks w, w + W, ...
          const int32_t page = b.bt[b.bts[s] + tok / c.block_size];
          const size_t off =
              (static_cast<size_t>(page) * c.block_size + tok % c.block_size) * slot_bytes +
              h * row;
          want ^= xor_words(&k[off], row) ^ xor_words(&v[off], row);
        }
        EXPECT_EQ(got[(static_cast<size_t>(s) * kv_heads + h) * W + w], want)
            << staging_name(staging) << " fp8 " << c.fp8 << " page " << c.block_size << " depth "
            << depth << " seq " << s << " (length " << c.lens[s] << ") head " << h << " warp " << w;
      }
}

TEST(DecodeReadProbe, FoldsExactlyTheRowsTcReads) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (ReadProbeStaging staging : kStagings)
    for (bool fp8 : {false, true})
      for (int bs : {16, 1, 7})
        for (int depth = 1; depth <= read_probe_max_depth(staging); ++depth)
          check_probe({fp8, bs, {1, 15, 16, 17, 64, 65, 100, 2049}}, staging, depth, rng);
}

TEST(DecodeReadProbe, RejectsBadArguments) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(5);
  Batch b = make_batch(2, 32, 1, 16, rng);
  auto sink = DeviceBuffer::allocate(2 * kKvHeads * kReadProbeWarps * 4);
  ASSERT_TRUE(sink.ok());
  auto p = params(b, 16, nullptr, nullptr, nullptr, nullptr);
  uint32_t* out = static_cast<uint32_t*>(sink->data());
  const auto regs = ReadProbeStaging::kRegisters, bulk = ReadProbeStaging::kBulkRows;
  auto code = [&](ReadProbeStaging staging, int depth, int bps, uint32_t* sink_ptr) {
    return decode_read_probe(p, staging, depth, bps, sink_ptr, nullptr).code();
  };
  EXPECT_EQ(code(regs, 0, 0, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(regs, 4, 0, out), StatusCode::kInvalidArgument);  // 4-6: staged forms only
  EXPECT_EQ(code(bulk, 7, 0, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(ReadProbeStaging::kCpAsync, 0, 0, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(static_cast<ReadProbeStaging>(7), 2, 0, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(regs, 2, 9, out), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(bulk, 2, 0, nullptr), StatusCode::kInvalidArgument);
  p.head_dim = 64;
  EXPECT_EQ(code(bulk, 2, 0, out), StatusCode::kInvalidArgument);
}

// tc's ceiling per K1 shape (k1_shapes, k1_pages): the probe queued behind an L2 eviction, as
// K1Decode's "queued" figures, at tc's depth and residency and at others.
TEST(AttentionBench, K1ReadCeiling) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the read probe";
  auto info = device_info();
  ASSERT_TRUE(info.ok());
  std::mt19937 rng(3);
  const size_t slot_bytes = size_t{kKvHeads} * kDim * 2;
  const size_t max_tokens = size_t{128} * 8192;
  AttentionBuffers buf(max_tokens, 1);
  ASSERT_TRUE(buf.ok());
  fill_random(buf.kc->data(), buf.kc->bytes(), rng);
  fill_random(buf.vc->data(), buf.vc->bytes(), rng);
  const L2Evictor evictor;
  ASSERT_TRUE(evictor.ok());
  const std::function<void()> evict_l2 = evictor.before();
  const size_t copy_bytes = size_t{1} << 30;
  const double copy_q_us = median_us(
      [&] {
        (void)cudaMemcpyAsync(buf.vc->data(), buf.kc->data(), copy_bytes, cudaMemcpyDeviceToDevice);
      },
      evict_l2);
  const double copy_q_tbps = 2.0 * copy_bytes / copy_q_us / 1e6;
  std::printf("K1 read ceiling: %s, %d SMs; copy d2d 1 GiB, queued: %.1f us, %.2f TB/s\n",
              info->name.c_str(), info->num_sms, copy_q_us, copy_q_tbps);
  auto sink = DeviceBuffer::allocate(size_t{128} * kKvHeads * kReadProbeWarps * 4);
  ASSERT_TRUE(sink.ok());
  for (K1Shape c : k1_shapes()) {
    for (int bs : k1_pages()) {
      if (static_cast<size_t>(c.batch) * ((c.ctx + bs - 1) / bs) * bs > max_tokens) continue;
      Batch b = make_batch(c.batch, c.ctx, 1, bs, rng);
      for (bool fp8 : {false, true}) {
        auto p = params(b, bs, nullptr, buf.kc->data(), buf.vc->data(), nullptr);
        if (fp8) p.kv_dtype = KvCacheDtype::kFp8E4m3;  // the same buffers read as e4m3 bytes
        const double bytes = 2.0 * c.batch * c.ctx * slot_bytes / (fp8 ? 2 : 1);
        for (ReadProbeStaging staging : kStagings) {
          // Registers: tc's depths at capped residencies (padding shrinks L1: NOTES.md); staged:
          // the shared memory decides, or at most 2 blocks per SM.
          const bool regs = staging == ReadProbeStaging::kRegisters;
          const std::vector<int> depths =
              regs ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 2, 3, 4, 6};
          const std::vector<int> caps = regs ? std::vector<int>{2, 3, 0} : std::vector<int>{0, 2};
          std::string line;
          for (int depth : depths)
            for (int bps : caps) {
              int resident = 0;
              Status st;
              const double us = median_us(
                  [&] {
                    st =
                        decode_read_probe(p, staging, depth, bps,
                                          static_cast<uint32_t*>(sink->data()), nullptr, &resident);
                  },
                  evict_l2);
              EXPECT_TRUE(st.ok()) << st.to_string();
              char item[96];
              std::snprintf(item, sizeof(item), " | d%d x%d: %.1f us %.0f%%", depth, resident, us,
                            100.0 * bytes / us / 1e6 / copy_q_tbps);
              line += item;
            }
          std::printf(
              "K1 read ceiling b%d L%d page %d%s %s (depth x blocks per SM, queued, %% of "
              "queued copy)%s\n",
              c.batch, c.ctx, bs, fp8 ? " fp8" : "", staging_name(staging), line.c_str());
        }
      }
    }
  }
}

}  // namespace
}  // namespace folio::cuda
