// Precompiled header of the LibTorch layers (compat, model, train, study, cli, the tests):
// the heavy third-party headers, parsed once per build.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
