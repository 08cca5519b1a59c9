// The binary operators of the template language (see operators.cpp).
#pragma once

#include <string>

#include "template/value.h"

namespace dl::tmpl {

// a op b for op in == != < > <= >= in "not in" ~ + - * / // % **; dl::Error for operand types
// Python refuses, division by zero, integers past int64, or a string longer than `cap` bytes.
Value binary_operator(const std::string& op, const Value& a, const Value& b, size_t cap);

}  // namespace dl::tmpl
