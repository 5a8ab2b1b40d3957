// Opening files a user names, safely: only regular files, reads bounded before anything is
// allocated, and nothing that can block (a FIFO with no writer, a terminal, /dev/zero).
#pragma once

#include <cstdint>
#include <string>

#include "ree/core/status.h"

namespace ree {

// Checks that `path` names a regular file (symlinks followed) and returns its size. `what` names
// the file's role in the error ("config.json", "--prompt-file"): e.g. "--prompt-file '/tmp/x':
// is a directory, not a regular file [io-error]".
Status statRegularFile(const std::string& path, const char* what, uint64_t* size);

// Reads the whole regular file `path` into `out`; refuses anything larger than `max_bytes`
// (saying so, with the limit) before allocating. Never blocks: the file is opened with
// O_NONBLOCK and checked with fstat before the first read.
Status readRegularFile(const std::string& path, uint64_t max_bytes, const char* what,
                       std::string* out);

}  // namespace ree
