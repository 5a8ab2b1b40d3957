// Internal to the tokenizer: a piece of text flowing through the encode pipeline.
#pragma once

#include <cstdint>
#include <string>

namespace ree::models::tokenizer_internal {

struct Piece {
  std::string text;
  int32_t added_id = -1;   // >= 0: an added token, left alone by later stages
  bool at_origin = false;  // starts at offset 0 of the original text (Metaspace "first")
};

}  // namespace ree::models::tokenizer_internal
