// EngineCore: the engine loop of one model, vLLM V1's EngineCore. Each step():
//   schedule (sched/) -> swap and copy-on-write copies -> build the ForwardBatch -> execute
//   (backend) -> sample (sample/) -> stop checks and detokenization -> update the scheduler ->
//   push each request's news to its sink.
// Engine thread only: nothing here is thread-safe (AsyncEngine wraps it for the server).
//
// Requests are identified by the caller's string id; the scheduler sees a numeric GroupId.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/executor.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/parallel_sampler.h"
#include "engine/sequence_output.h"
#include "kv/kv_cache_manager.h"
#include "model/model_config.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace folio {

struct EngineCounters {
  int64_t num_requests = 0;
  int64_t prompt_tokens = 0;     // prompt tokens of finished-or-running requests
  int64_t generated_tokens = 0;  // tokens sampled
  int64_t computed_tokens = 0;   // tokens run through the model (prefill + decode + recompute)
  // Wall time of the steps that ran the model, and the part spent inside the executor (upload,
  // kernels, sampling, results back: the GPU is busy or about to be). The rest is the host loop
  // (scheduling, batch building, output processing, detokenizing), during which the GPU idles.
  int64_t model_steps = 0;
  double step_seconds = 0.0;
  double execute_seconds = 0.0;
  // The host loop's parts: schedule() and the inputs built before the executor runs (the rest of
  // it, after the executor, is output processing).
  double schedule_seconds = 0.0;
  double prepare_seconds = 0.0;
  // Steps launched asynchronously (async scheduling): their host loop ran while the device
  // still ran the step before, and execute_seconds holds the launch and the wait for results.
  int64_t async_steps = 0;
};

class EngineCore {
 public:
  // Receives a request's outputs, on the engine thread. Deltas only (streaming) or, for
  // `final_only` requests, one output with the full result when the request ends.
  using Sink = std::function<void(RequestOutput&&)>;

  // `tokenizer` may be null (token ids in and out only).
  static Result<std::unique_ptr<EngineCore>> create(const EngineConfig& config,
                                                    const ModelConfig& model,
                                                    std::unique_ptr<Executor> executor,
                                                    std::shared_ptr<const Tokenizer> tokenizer);

  ~EngineCore();

  // Validates and queues a request. Errors (bad params, ids outside the vocabulary, prompt over
  // the context) are returned and nothing is queued.
  Status add_request(GenerateRequest request, Sink sink, bool final_only);
  // Ends a live request with finish_reason "abort", freeing its KV blocks now.
  void abort(const std::string& request_id);
  // Runs one iteration. A non-ok status means the executor failed (fatal for the engine).
  // With async scheduling (EngineConfig::async_scheduling, a backend that launches steps
  // asynchronously, and every live request async-safe), a step launches the next batch before
  // the previous one's tokens are back, then processes those tokens: outputs trail the device
  // by one step, and a step with nothing new to run finishes the one in flight.
  Status step();
  bool has_unfinished() const { return !requests_.empty(); }
  bool is_live(const std::string& request_id) const { return by_id_.count(request_id) > 0; }

  const Scheduler& scheduler() const { return *scheduler_; }
  const KvCacheManager& kv() const { return *kv_; }
  const EngineCounters& counters() const { return counters_; }
  const EngineConfig& config() const { return config_; }
  const ModelConfig& model_config() const { return model_; }
  const Executor& executor() const { return *executor_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  int max_model_len() const { return config_.sched.max_model_len; }
  int64_t kv_capacity_tokens() const;

 private:
  struct RequestState;
  EngineCore(const EngineConfig& config, const ModelConfig& model,
             std::unique_ptr<Executor> executor, std::shared_ptr<const Tokenizer> tokenizer,
             std::unique_ptr<KvCacheManager> kv);

  void apply_defaults(SamplingParams& p) const;
  // The two kinds of step (engine_step.cc, engine_async_step.cc) and their shared parts.
  Status step_sync();
  Status step_async();
  // Collects and processes the step launched by step_async() and not yet collected, if any;
  // `in_step`: called inside a timed step (else the wait is added to the step time here).
  Status finish_launched(bool in_step = false);
  void report_failed(const SchedulerOutput& so);
  // vLLM's warning when the cache is too small for the batch: at the first preemption and every
  // 50th, with what to change.
  void warn_preemptions(const SchedulerOutput& so) const;
  void issue_block_copies(const SchedulerOutput& so);  // swaps and copy-on-write, in order
  void note_first_schedule(const SchedulerOutput& so);
  // A sequence whose token is being drawn this step, and where the result goes.
  struct PendingSample {
    RequestState* request;
    SeqId seq;
    SequenceOutput* output;
  };
  // Queues one draw per sequence the entry's logits row feeds (n siblings at the end of a
  // prompt, else the sequence itself); the draws run together, then apply_samples records them.
  void plan_samples(const ScheduledSeq& entry, int logits_row,
                    std::vector<ParallelSampler::Job>& jobs, std::vector<PendingSample>& pending);
  void apply_samples(const std::vector<PendingSample>& pending,
                     const std::vector<TokenLogprobs>& drawn, StepResult& result);
  void record_prompt_logprobs(RequestState& r, const ScheduledSeq& entry,
                              std::span<const float> logits);
  void emit(RequestState& r, bool final_output);
  // Beam search (engine_beam.cc): one search step per request once all its beams have rows;
  // forks for extra children run after the scheduler's update.
  struct BeamFork {
    GroupId group;
    int beam_index;  // position in the new beam order
    SeqId parent;
    TokenId token;
  };
  // `groups`: the beam requests that got logits rows this step (not every live request: with
  // a thousand sampling requests the walk over all of them cost the host loop ~2%).
  Status step_beams(std::span<const float> logits, const std::vector<GroupId>& groups,
                    StepResult& result, std::vector<BeamFork>& forks, std::vector<GroupId>& done);
  void apply_beam_forks(const std::vector<BeamFork>& forks);
  void beam_final_output(RequestState& r, RequestOutput& out) const;
  void finish_request(GroupId gid);
  // Ends the groups the scheduler finished (length limits, or every sequence stopped), after
  // the step's tokens were added: marks the rest "length", emits, forgets the request.
  void end_finished(const UpdateResult& upd);
  // The streaming (non-final) output of each live request in `touched`, once per request.
  void emit_step_outputs(std::vector<GroupId>& touched);
  void log_summary_every_n_steps() const;  // the scheduler's summary, per log_every_steps
  RequestState* find_by_seq(SeqId seq);

  EngineConfig config_;
  ModelConfig model_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  ParallelSampler sampler_;

  std::unordered_map<GroupId, std::unique_ptr<RequestState>> requests_;
  std::unordered_map<std::string, GroupId> by_id_;
  std::unordered_map<SeqId, GroupId> seq_owner_;
  GroupId next_group_ = 1;
  EngineCounters counters_;
  // Step scratch.
  ForwardBatch batch_;
  std::vector<float> logits_;
  DeviceSamplingBatch device_batch_;
  std::vector<DeviceSample> device_samples_;
  PenaltyWorkspace penalty_ws_;  // builds the device rows' penalty ops

  // Async scheduling: on when the config asks and the executor can; live requests that are not
  // async-safe (request_state.h) make steps synchronous while they live.
  bool async_enabled_ = false;
  int num_sync_only_ = 0;
  // The step launched and not yet collected: per device sample row, whose token it is.
  struct LaunchedSample {
    GroupId group;
    SeqId seq;
    int output;  // index into RequestState::outputs
  };
  struct LaunchedStep {
    std::vector<LaunchedSample> samples;
    UpdateResult advanced;  // what the scheduler finished at advance (length limits)
  };
  std::optional<LaunchedStep> launched_;
};

// Creates the KV manager the config asks for, sized to `num_blocks` device blocks (slots in
// token mode) and `num_host_blocks` swap blocks; with config.sched.sliding_window > 0 the paged
// manager frees what falls out of the window.
std::unique_ptr<KvCacheManager> make_kv_cache_manager(const EngineConfig& config, int num_blocks,
                                                      int num_host_blocks);

}  // namespace folio
