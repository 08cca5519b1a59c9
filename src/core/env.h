// Every environment variable the program reads, declared once in env.cpp's table with its type,
// default and meaning; `deltallm --help-env` prints that table. Reading an undeclared variable
// is a programming error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dl::env {

struct Var {
    const char* name;
    const char* type;  // "string", "int", "bool"
    const char* default_value;
    const char* meaning;
};

const std::vector<Var>& all();

std::string get_string(const char* name);
int64_t get_int(const char* name);
bool get_bool(const char* name);

// The table as text, for --help-env.
std::string describe();

}  // namespace dl::env
