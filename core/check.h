// defines: zt::Error, ZT_CHECK, ZT_THROW — the two kinds of failure.
//
// Errors at the boundary (config, files, CLI, OOM) are exceptions whose message a user can act
// on: name the file, key or value and what was expected. Inside the library, ZT_CHECK states an
// invariant; it throws too (never aborts), so a test can assert that bad shapes are refused.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace zt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace zt

// ZT_THROW("file ", path, ": bad magic ", m) — throws zt::Error with the pieces concatenated.
#define ZT_THROW(...) throw ::zt::Error(::zt::detail::concat(__VA_ARGS__))

// ZT_CHECK(cond, "message pieces"...) — an invariant; the message says what was expected.
#define ZT_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::zt::Error(::zt::detail::concat(__VA_ARGS__, " [check failed: " #cond " at ", \
                                             __FILE__, ":", __LINE__, "]"));             \
  } while (0)
