// Precompiled header of copytask_core: the heavy third-party headers, parsed once per build.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
