// defines: bench::median, bench::loadavg — the two helpers every benchmark program here shares.
#pragma once
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

// The median of v (the mean of the two middle values for an even count; 0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The machine's load average (1, 5, 15 minutes) from /proc/loadavg, printed beside a benchmark's
// numbers: a measurement on a shared machine means nothing without it.
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  return (f >> a >> b >> c) ? a + " " + b + " " + c : "unknown";
}

}  // namespace bench
