// A fresh folder for one test, named after the test and the process, removed when the object
// goes: for tests that write model folders, configs or checkpoints to load them back.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace folio::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("folio_") + (test ? test->name() : "scratch");
    for (char& c : name)
      if (c == '/') c = '_';  // parameterised test names
    path_ = std::filesystem::temp_directory_path() /
            (name + "_" + std::to_string(::getpid()) + "_" + std::to_string(count_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `bytes` to the file `name` in the folder and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return file(name);
  }

 private:
  static inline int count_ = 0;  // several folders in one test
  std::filesystem::path path_;
};

}  // namespace folio::testing
