#include "backend/cuda/cuda_graph.h"

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = o.exec_;
    o.exec_ = nullptr;
  }
  return *this;
}

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Result<CudaGraph> CudaGraph::capture(const std::function<Status(void* stream)>& body) {
  cudaStream_t s = nullptr;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Status st = cuda_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                          "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  if (st.ok()) {
    st = body(s);
    // End the capture whatever the body said, or the stream stays unusable.
    const Status end = cuda_status(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    if (st.ok()) st = end;
  }
  CudaGraph out;
  if (st.ok()) {
    cudaGraphExec_t exec = nullptr;
    st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    out.exec_ = exec;
  }
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  if (!st.ok()) return st;
  return out;
}

Status CudaGraph::launch(void* stream) const {
  if (!exec_) return internal_error("CudaGraph: launch of an empty graph");
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream)),
                     "cudaGraphLaunch");
}

}  // namespace folio::cuda
