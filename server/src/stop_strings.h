// Stop strings over generated text that arrives in pieces: text that could still become the start
// of a stop string is held back, so a stream never shows bytes that the stop would cut. Streaming
// and non-streaming answers both go through this one scanner, so their texts are equal.
#pragma once

#include <string>
#include <vector>

namespace ree::server {

class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops);

  // Adds generated text; returns the text that may be shown now (nothing once stopped).
  std::string feed(const std::string& piece);
  // The end of the generation: the held-back text that no stop string can claim any more.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // generated text not shown yet
  bool stopped_ = false;
};

// The whole text cut at its first stop string; `stopped` says whether one was found.
std::string applyStops(const std::string& text, const std::vector<std::string>& stops,
                       bool* stopped);

}  // namespace ree::server
