// copytask schemes [--json]: the registry of positional schemes and options, and the layer
// forms (config/layer_form.h), as Markdown tables or JSON. The Python reference's modules
// and the fixtures are checked against this output (ctest python_reference_registry),
// docs/schemes.md against the registry itself (tests/test_scheme_docs.cpp), so the registry
// (src/model/schemes/registry.cpp) is the one place a scheme is named.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "config/layer_form.h"
#include "model/positional.h"

namespace copytask {

namespace {
std::vector<std::string> step_names(unsigned steps) {
  std::vector<std::string> names;
  if (steps & kFusedCpuStep) names.push_back("fused_cpu");
  if (steps & kAutogradStep) names.push_back("autograd");
  if (steps & kDeviceStep) names.push_back("device");
  return names;
}

// A layer form's steps: the StepSupport ones, and the fused GPU kernels where they compute it.
std::vector<std::string> layer_form_step_names(const LayerFormValue& value) {
  std::vector<std::string> names = step_names(value.steps);
  if (value.fused_gpu) names.push_back("fused_gpu");
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

ModelConfig model_of(const std::string& scheme, bool causal) {
  ModelConfig model;
  model.positional = scheme;
  model.causal = causal;
  return model;
}

// A scheme that refuses the bidirectional model (xpos) and takes the causal one.
bool causal_only(const SchemeEntry& entry) {
  return !entry.incompatibility(model_of(entry.name, false)).empty() &&
         entry.incompatibility(model_of(entry.name, true)).empty();
}

// The schemes an option can attach to: its rule accepts the scheme under a causal flag the
// scheme itself takes.
std::vector<std::string> option_schemes(const OptionEntry& option) {
  std::vector<std::string> names;
  for (const auto& entry : positional_registry()) {
    const bool causal = causal_only(entry);
    if (option.incompatibility(model_of(entry.name, causal)).empty()) names.push_back(entry.name);
  }
  return names;
}

nlohmann::json registry_json() {
  nlohmann::json schemes = nlohmann::json::array(), options = nlohmann::json::array();
  for (const auto& entry : positional_registry())
    schemes.push_back({{"name", entry.name},
                       {"summary", entry.summary},
                       {"causal_only", causal_only(entry)},
                       {"steps", step_names(entry.steps)}});
  for (const auto& option : positional_option_registry())
    options.push_back({{"key", option.key},
                       {"summary", option.summary},
                       {"steps", step_names(option.steps)},
                       {"schemes", option_schemes(option)}});
  nlohmann::json forms = nlohmann::json::array();
  for (const auto& value : layer_form_values())
    forms.push_back({{"key", value.key}, {"value", value.value}, {"summary", value.summary},
                     {"steps", layer_form_step_names(value)}});
  return {{"schemes", schemes}, {"options", options}, {"layer_forms", forms}};
}

// A table cell: a '|' in the text (KERPLE's |i - j|) would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string registry_markdown() {
  std::string out = "| scheme | what it is | causal only | steps |\n|---|---|---|---|\n";
  for (const auto& entry : positional_registry())
    out += "| `" + entry.name + "` | " + cell(entry.summary) + " | " + (causal_only(entry) ? "yes" : "no") + " | " +
           joined(step_names(entry.steps)) + " |\n";
  out += "\n| option | what it is | attaches to | steps |\n|---|---|---|---|\n";
  for (const auto& option : positional_option_registry())
    out += "| `model." + option.key + "` | " + cell(option.summary) + " | " + joined(option_schemes(option)) + " | " +
           joined(step_names(option.steps)) + " |\n";
  out += "\n| layer form | what it is | steps |\n|---|---|---|\n";
  for (const auto& value : layer_form_values())
    out += "| `" + value.key + "=" + value.value + "` | " + cell(value.summary) + " | " +
           joined(layer_form_step_names(value)) + " |\n";
  return out;
}
}  // namespace

CLI::App* schemes_command_add(CLI::App& app, SchemesCommandOptions& options) {
  CLI::App& command = *app.add_subcommand("schemes", "every positional scheme and option of the registry, with the steps that run it");
  command.add_flag("--json", options.json, "print the registry as JSON (for scripts and the tests)");
  return &command;
}

int schemes_command_run(const SchemesCommandOptions& options) {
  if (options.json)
    std::printf("%s\n", registry_json().dump(2).c_str());
  else
    std::printf("%s", registry_markdown().c_str());
  return kExitOk;
}

}  // namespace copytask
