// How a subcommand plugs into the deltallm binary: each src/tools/<name>.cpp registers itself
// with a Registrar at static-initialisation time, giving a function that declares its options
// on a CLI11 subcommand and returns the function that runs it (returning the exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace dl::tools {

using Run = std::function<int()>;
using Setup = std::function<Run(CLI::App& sub)>;

struct ToolEntry {
    std::string name;
    std::string help;
    Setup setup;
};

std::vector<ToolEntry>& registry();

struct Registrar {
    Registrar(std::string name, std::string help, Setup setup) {
        registry().push_back({std::move(name), std::move(help), std::move(setup)});
    }
};

}  // namespace dl::tools
