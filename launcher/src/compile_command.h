// ree-launch compile: ONNX model -> compiled graph (docs/compiler.md), optionally run on .npy
// inputs.
#pragma once

namespace ree::launcher {

// ree-launch compile MODEL.onnx [flags] (argv[0] == "compile"): exit 0 on success, 2 on an error
// (one line on stderr naming the flag, file, node or tensor).
int compileCommand(int argc, const char* const* argv);

}  // namespace ree::launcher
