// ree-launch's flags: the option table (names, help, defaults) and the help text. Every value is
// read as a string and converted by cli.cpp, so that a bad value's error names its flag.
#pragma once

#include <cxxopts.hpp>
#include <string>

namespace ree::launcher {

// The flags of `ree-launch [run]`, in their help groups.
cxxopts::Options makeLaunchOptions();

// `ree-launch --help`: the groups, then the subcommands.
std::string launchHelpText(const cxxopts::Options& options);

// True for the flags that take no value (--json, --plan, ...).
bool isSwitchFlag(const std::string& name);

}  // namespace ree::launcher
