// ree-launch serve: the OpenAI-compatible server (docs/serving.md; ree/server/server.h).
#pragma once

#include "ree/core/status.h"
#include "ree/server/server.h"

namespace ree::launcher {

// Parses serve's flags (argv[0] == "serve"). `help` is set for --help (nothing else is read).
// kInvalidArgument with a one-line message naming the flag on a bad value.
Status parseServeCommandLine(int argc, const char* const* argv, server::ServerOptions* out,
                             bool* help);

// The text of `ree-launch serve --help`.
std::string serveHelpText();

// ree-launch serve [flags]: exit 0 after a clean drain (SIGTERM/SIGINT), 2 on an error.
int serveCommand(int argc, const char* const* argv);

}  // namespace ree::launcher
