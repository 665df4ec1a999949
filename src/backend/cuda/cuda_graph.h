// CudaGraph: a captured and instantiated CUDA graph. capture() runs `body` with a fresh stream in
// capture mode (thread-local, so other threads, such as tensor-parallel ranks capturing their
// own graphs, are unaffected); every op the body enqueues must go to that stream. Launching
// replays the same kernels with the same arguments (pointers included) on any stream, the legacy
// default stream too, ordered with the work already there. Move-only; frees the graph.
#pragma once

#include <functional>

#include "base/status.h"

namespace folio::cuda {

class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(CudaGraph&& o) noexcept : exec_(o.exec_) { o.exec_ = nullptr; }
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  static Result<CudaGraph> capture(const std::function<Status(void* stream)>& body);
  Status launch(void* stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
};

}  // namespace folio::cuda
