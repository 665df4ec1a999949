// HttpSession, the generation half: submit, drain outputs, stream SSE, notice disconnects.
#include "server/http_session.h"

#include <cstdio>
#include <span>

namespace folio {

namespace beast = boost::beast;
namespace net = boost::asio;

void HttpSession::start_generation(GenerationPlan plan) {
  const EngineClient& engine = ctx_.engine;
  TokenText token_text = [&engine](int32_t id) {
    auto r = engine.decode(std::span<const int32_t>(&id, 1), /*skip_special_tokens=*/false);
    return r.ok() ? std::move(r).value() : std::string();
  };
  std::vector<GenerateRequest> requests = plan.requests;  // Generation keeps the originals
  gen_ = std::make_unique<Generation>(std::move(plan), std::move(token_text), ctx_.metrics,
                                      ctx_.admission);
  stream_started_ = stream_done_ = false;
  channels_.clear();
  auto notify = [weak = weak_from_this(), ex = stream_.get_executor()] {
    // Runs on the engine thread: only a post, never work.
    net::post(ex, [weak] {
      if (auto self = weak.lock()) self->on_engine_output();
    });
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    auto channel = std::make_shared<OutputChannel>(ctx_.config.output_channel_capacity, notify);
    channels_.push_back(channel);
    Status st = ctx_.engine.submit(std::move(requests[i]), channel);
    if (!st.ok()) {
      channel->close();
      // The request never started; earlier sub-requests are aborted by the release below.
      release_engine_requests();
      return send_reply(error_reply(error_from_status(st)));
    }
  }
  stream_.expires_never();  // generation may take long; writes set their own deadline
  watch_disconnect();
}

void HttpSession::on_engine_output() {
  if (!gen_ || closed_) return;
  std::string events;
  for (size_t i = 0; i < channels_.size(); ++i)
    for (auto& out : channels_[i]->drain()) events += gen_->on_output(i, std::move(out));
  if (gen_->error()) return end_generation_with_error();
  if (gen_->plan().stream) {
    if (!events.empty()) queue_stream(events, /*last=*/false);
    if (gen_->finished()) {
      std::string tail = gen_->stream_tail();
      release_engine_requests();
      queue_stream(tail, /*last=*/true);
    }
  } else if (gen_->finished()) {
    std::string body = gen_->final_body();
    release_engine_requests();
    send_reply(json_reply(std::move(body)));
  }
}

void HttpSession::end_generation_with_error() {
  ApiError err = *gen_->error();
  const bool in_band = gen_->plan().stream && stream_started_;
  std::string tail = in_band ? gen_->stream_tail() : "";
  release_engine_requests();  // aborts the sibling sub-requests
  if (in_band) return queue_stream(tail, /*last=*/true);
  send_reply(error_reply(err));
}

void HttpSession::abort_generation(bool client_gone) {
  if (!gen_) return;
  if (client_gone) {
    release_engine_requests();
    return close();
  }
  // Shutdown past the grace period: answer with what exists, finish_reason "abort".
  keep_alive_ = false;
  std::string events;
  std::vector<std::string> ids = gen_->abort_unfinished(/*emit=*/true, &events);
  for (const auto& id : ids) ctx_.engine.abort(id);
  if (gen_->plan().stream) {
    std::string tail = gen_->stream_tail();
    release_engine_requests();
    queue_stream(events, false);
    return queue_stream(tail, true);
  }
  std::string body = gen_->final_body();
  release_engine_requests();
  send_reply(json_reply(std::move(body)));
}

void HttpSession::release_engine_requests() {
  if (gen_)
    for (const auto& id : gen_->abort_unfinished(/*emit=*/false, nullptr)) ctx_.engine.abort(id);
  for (auto& c : channels_) c->close();
  channels_.clear();
  gen_.reset();
}

void HttpSession::queue_stream(const std::string& data, bool last) {
  if (closed_) return;
  if (!stream_started_) {
    stream_started_ = true;
    ctx_.metrics.record_http_status(200);
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the stream is the close
    pending_ += "HTTP/1.1 200 OK\r\nServer: folio\r\nContent-Type: text/event-stream\r\n"
                "Cache-Control: no-cache\r\n";
    if (chunked_) pending_ += "Transfer-Encoding: chunked\r\n";
    pending_ += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  }
  if (!data.empty()) {
    if (chunked_) {
      char size[24];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      pending_.append(size).append(data).append("\r\n");
    } else {
      pending_ += data;
    }
  }
  if (last) {
    stream_done_ = true;
    if (chunked_) pending_ += "0\r\n\r\n";
  }
  flush();
}

void HttpSession::flush() {
  if (write_in_progress_ || pending_.empty() || closed_) return;
  writing_.swap(pending_);
  pending_.clear();
  write_in_progress_ = true;
  stream_.expires_after(std::chrono::milliseconds(ctx_.config.write_timeout_ms));
  net::async_write(stream_, net::buffer(writing_),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->on_flushed(ec);
                   });
}

void HttpSession::on_flushed(beast::error_code ec) {
  write_in_progress_ = false;
  writing_.clear();
  if (ec) {  // the client stopped reading or hung up
    abort_generation(/*client_gone=*/true);
    return close();
  }
  if (!pending_.empty()) return flush();
  if (stream_done_) {
    stream_started_ = stream_done_ = false;
    after_response();
  }
}

void HttpSession::watch_disconnect() {
  if (watching_ || closed_) return;
  watching_ = true;
  stream_.socket().async_wait(net::socket_base::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->on_watch(ec);
                              });
}

void HttpSession::on_watch(beast::error_code ec) {
  watching_ = false;
  if (closed_) return;
  if (read_after_watch_) {
    read_after_watch_ = false;
    return read_header();
  }
  if (!gen_ || ec == net::error::operation_aborted) return;
  if (ec) return abort_generation(/*client_gone=*/true);
  char c = 0;
  beast::error_code peek_ec;
  size_t n = stream_.socket().receive(net::buffer(&c, 1), net::socket_base::message_peek, peek_ec);
  if (peek_ec == net::error::would_block || peek_ec == net::error::try_again)
    return watch_disconnect();
  if (peek_ec || n == 0) return abort_generation(/*client_gone=*/true);  // EOF or reset
  // Bytes of a pipelined next request: the client is alive; they wait in the socket.
}

void HttpSession::on_grace_expired(beast::error_code ec) {
  if (ec || closed_) return;
  abort_generation(/*client_gone=*/false);
}

}  // namespace folio
