// SessionRegistry: the live HTTP sessions, so stop() can reach each one. Sessions add
// themselves when they start and remove themselves in their destructor. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace folio {

class HttpSession;

class SessionRegistry {
 public:
  void add(const std::shared_ptr<HttpSession>& s) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[s.get()] = s;
  }
  void remove(const HttpSession* s) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(s);
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
  }
  // Calls `f` on every live session, outside the lock.
  void for_each(const std::function<void(const std::shared_ptr<HttpSession>&)>& f) const {
    std::vector<std::shared_ptr<HttpSession>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [ptr, weak] : sessions_)
        if (auto s = weak.lock()) live.push_back(std::move(s));
    }
    for (const auto& s : live) f(s);
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const HttpSession*, std::weak_ptr<HttpSession>> sessions_;
};

}  // namespace folio
