#pragma once
// What a wrong output token is, by what it copied instead (the copy family's error kinds).
// Pure C++ (no tensors), like task_kind.h. Checked in this order, the first that holds:
//
//   stop       the separator, padding or the end token: the output stopped early (or ran on)
//   neighbour  the content token next to its source in the content (index +- 1): off by one
//   content    another content token of this input
//   noise      the noise token (selective only)
//   absent     a content token id that is nowhere in this input
//
// "Neighbour" counts in content order, so that under selective the noise between two
// content tokens does not hide an off-by-one; a token that equals its neighbour's value
// and the source's both is right, not an error.
#include <array>
#include <cstdint>
#include <string>

#include "task/task_kind.h"

namespace copytask {

enum class OutputError { stop, neighbour, content, noise, absent };
constexpr int kOutputErrorKinds = 5;

// The kinds' names in results.json and the report, in the enum's order.
const std::array<std::string, kOutputErrorKinds>& output_error_names();

// The kind of a wrong `predicted` token at output j of the row whose sources are `sources`
// (output_sources of the same row). Only for a token that differs from the target.
OutputError output_error(const TaskConfig& task, const int64_t* input_row, const OutputSources& sources, int64_t j,
                         int64_t predicted);

}  // namespace copytask
