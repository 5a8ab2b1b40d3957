#include "stop_strings.h"

#include <algorithm>

namespace ree::server {
namespace {

// Where the text is cut: the stop string that is complete first (the smallest end), the earlier
// start on a tie. Streaming sees stop strings complete in this order, so both forms agree.
size_t firstStop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best_end = std::string::npos;
  size_t cut = std::string::npos;
  for (const std::string& stop : stops) {
    size_t at = text.find(stop);
    if (at == std::string::npos) continue;
    size_t end = at + stop.size();
    if (end < best_end || (end == best_end && at < cut)) {
      best_end = end;
      cut = at;
    }
  }
  return cut;
}

}  // namespace

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string StopScanner::feed(const std::string& piece) {
  if (stopped_) return "";
  pending_ += piece;
  size_t cut = firstStop(pending_, stops_);
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string shown = pending_.substr(0, cut);
    pending_.clear();
    return shown;
  }
  // Hold back the longest tail that is a proper prefix of a stop string. It starts where a stop
  // string would start, so the text shown ends on a UTF-8 character boundary.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, pending_.size()); n > hold; --n) {
      if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  std::string shown = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return shown;
}

std::string StopScanner::finish() {
  std::string rest = stopped_ ? "" : pending_;
  pending_.clear();
  return rest;
}

std::string applyStops(const std::string& text, const std::vector<std::string>& stops,
                       bool* stopped) {
  StopScanner scanner(stops);
  std::string shown = scanner.feed(text);
  shown += scanner.finish();
  *stopped = scanner.stopped();
  return shown;
}

}  // namespace ree::server
