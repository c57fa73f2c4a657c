#include "config/layer_form.h"

#include <stdexcept>

#include "config/config_fields.h"

namespace copytask {

const std::vector<LayerFormValue>& layer_form_values() {
  static const std::vector<LayerFormValue> values = {
      {"model.activation", "relu", "max(x, 0)", kEveryStep, true,
       [](const LayerForm& f) { return f.activation == Activation::relu; },
       [](LayerForm& f) { f.activation = Activation::relu; }},
      {"model.activation", "gelu", "x Phi(x), the exact (erf) form", kEveryStep, false,
       [](const LayerForm& f) { return f.activation == Activation::gelu; },
       [](LayerForm& f) { f.activation = Activation::gelu; }},
  };
  return values;
}

std::vector<std::string> layer_form_keys() {
  std::vector<std::string> keys;
  for (const auto& value : layer_form_values())
    if (keys.empty() || keys.back() != value.key) keys.push_back(value.key);
  return keys;
}

std::vector<std::string> layer_form_choices(const std::string& key) {
  std::vector<std::string> choices;
  for (const auto& value : layer_form_values())
    if (value.key == key) choices.push_back(value.value);
  return choices;
}

std::vector<LayerForm> layer_forms_each_value() {
  std::vector<LayerForm> forms{LayerForm{}};
  for (const auto& value : layer_form_values()) {
    if (value.chosen(LayerForm{})) continue;  // the default's
    LayerForm form;
    value.choose(form);
    forms.push_back(form);
  }
  return forms;
}

LayerForm layer_form_of(const Config& config) {
  LayerForm form;
  for (const std::string& key : layer_form_keys()) {
    const ConfigField* field = config_field(key);
    if (!field) throw std::logic_error("layer form key " + key + " has no config field (src/config/config_fields.cpp)");
    const nlohmann::json given = field->get(config);
    bool found = false;
    for (const auto& value : layer_form_values())
      if (value.key == key && given == value.value) {
        value.choose(form);
        found = true;
      }
    if (!found) throw std::invalid_argument(key + " = " + given.dump() + " is not a layer form of config/layer_form.cpp");
  }
  return form;
}

std::vector<const LayerFormValue*> layer_form_chosen(const LayerForm& form) {
  std::vector<const LayerFormValue*> chosen;
  for (const auto& value : layer_form_values())
    if (value.chosen(form)) chosen.push_back(&value);
  return chosen;
}

std::string layer_form_text(const LayerForm& form) {
  std::string text;
  for (const LayerFormValue* value : layer_form_chosen(form))
    text += (text.empty() ? "" : " ") + value->key + "=" + value->value;
  return text;
}

namespace {
const char* step_name(unsigned step) {
  switch (step) {
    case kFusedCpuStep: return "fused CPU step";
    case kAutogradStep: return "autograd step";
    case kDeviceStep: return "device step";
    default: return "step";
  }
}
}  // namespace

std::string layer_form_unsupported(const LayerForm& form, unsigned step) {
  for (const LayerFormValue* value : layer_form_chosen(form))
    if (!(value->steps & step)) return value->key + " = " + value->value + " has no " + step_name(step);
  return "";
}

std::string layer_form_fused_gpu_problem(const LayerForm& form) {
  for (const LayerFormValue* value : layer_form_chosen(form))
    if (!value->fused_gpu) return value->key + " = " + value->value + " has no kernel in the fused GPU step";
  return "";
}

}  // namespace copytask
