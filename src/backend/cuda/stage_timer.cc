#include "backend/cuda/stage_timer.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace folio::cuda {

std::unique_ptr<StageTimer> StageTimer::from_env() {
  const char* v = std::getenv("FOLIO_CUDA_STAGE_TIMES");
  if (v == nullptr || std::strcmp(v, "1") != 0) return nullptr;
  return std::unique_ptr<StageTimer>(new StageTimer());
}

StageTimer::~StageTimer() {
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void StageTimer::begin_step(void* stream) {
  used_ = 0;
  stages_.clear();
  mark(nullptr, stream);
}

void StageTimer::mark(const char* stage, void* stream) {
  if (used_ == events_.size()) {
    cudaEvent_t e;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    events_.push_back(e);
  }
  cudaEventRecord(static_cast<cudaEvent_t>(events_[used_]), static_cast<cudaStream_t>(stream));
  if (used_ > 0) stages_.push_back(stage);
  ++used_;
}

void StageTimer::end_step() {
  if (used_ < 2) return;
  cudaEventSynchronize(static_cast<cudaEvent_t>(events_[used_ - 1]));
  std::vector<std::pair<std::string, double>> ops;
  ops.reserve(used_ - 1);
  for (size_t i = 0; i + 1 < used_; ++i) {
    float ms = 0.f;
    cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]),
                         static_cast<cudaEvent_t>(events_[i + 1]));
    ops.emplace_back(stages_[i], ms);
  }
  totals_.add_step(ops);
}

std::string StageTimer::report() const {
  return totals_.report();
}

}  // namespace folio::cuda
