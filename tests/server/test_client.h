// Loopback HTTP helpers for the live server tests: a small Beast client (every call bounded by
// a deadline through io_context::run_for) and a raw POSIX socket for the requests a polite
// client would never send (slow, truncated, oversized, invalid UTF-8). Only 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace folio::testing {

struct HttpResult {
  int status = -1;  // -1: no response within the deadline
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

inline HttpResult http_call(uint16_t port, const std::string& method, const std::string& target,
                            const std::string& body = "", const Headers& headers = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace net = boost::asio;
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  HttpResult result;
  stream.expires_after(timeout);
  net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), port);
  stream.async_connect(ep, [&](beast::error_code ec) {
    if (ec) return;
    http::async_write(stream, req, [&](beast::error_code ec2, size_t) {
      if (ec2) return;
      http::async_read(stream, buffer, parser, [&](beast::error_code ec3, size_t) {
        if (ec3) return;
        const auto& res = parser.get();
        result.status = static_cast<int>(res.result_int());
        result.body = res.body();
        for (const auto& f : res) {
          std::string name(f.name_string());
          for (auto& c : name) c = static_cast<char>(std::tolower(c));
          result.headers[name] = std::string(f.value());
        }
      });
    });
  });
  ioc.run_for(timeout + std::chrono::seconds(1));
  return result;
}

inline HttpResult post_json(uint16_t port, const std::string& target, const nlohmann::json& j,
                            const Headers& headers = {}) {
  return http_call(port, "POST", target, j.dump(), headers);
}

// The `data:` payloads of an SSE body, in order ("[DONE]" included verbatim).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

// The body of a raw HTTP/1.1 response with chunked transfer encoding, de-chunked. Stops at
// the terminating chunk or at the first malformed size line.
inline std::string dechunked_body(const std::string& raw) {
  size_t pos = raw.find("\r\n\r\n");
  if (pos == std::string::npos) return "";
  pos += 4;
  std::string out;
  while (pos < raw.size()) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    size_t size = std::strtoul(raw.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (size == 0 || eol + 2 + size > raw.size()) break;
    out.append(raw, eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return out;
}

// A blocking loopback socket whose every receive waits at most `recv_timeout`.
class RawConn {
 public:
  RawConn(uint16_t port, std::chrono::milliseconds recv_timeout = std::chrono::seconds(5)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{};
    tv.tv_sec = recv_timeout.count() / 1000;
    tv.tv_usec = (recv_timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConn() { close(); }
  bool connected() const { return connected_; }
  bool send(const std::string& data) {
    return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Reads until `needle` appears, the peer closes, or a receive times out. Returns all read.
  std::string recv_until(const std::string& needle, std::chrono::milliseconds budget) {
    auto deadline = std::chrono::steady_clock::now() + budget;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!needle.empty() && received_.find(needle) != std::string::npos) break;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_by_peer_ = n == 0;
        break;
      }
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  // Reads until `needle` occurs `count` times in everything received (or close / timeout).
  size_t recv_count(const std::string& needle, size_t count, std::chrono::milliseconds budget) {
    auto deadline = std::chrono::steady_clock::now() + budget;
    while (occurrences(needle) < count && std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
    }
    return occurrences(needle);
  }
  size_t occurrences(const std::string& needle) const {
    size_t n = 0;
    for (size_t p = 0; (p = received_.find(needle, p)) != std::string::npos; p += needle.size()) ++n;
    return n;
  }
  bool closed_by_peer() const { return closed_by_peer_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_peer_ = false;
  std::string received_;
};

inline std::string http_post_raw(const std::string& target, const std::string& body,
                                 const std::string& extra_headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace folio::testing
