#pragma once
// The layer forms: every choice of a block's arithmetic beside its sizes (EncoderShape) and
// its positional scheme. One list, layer_form_values(), names each key's values and the
// steps that compute each; the config's allowed values, `copytask schemes --json`, each
// step's refusal and the tests that iterate the forms all read it, so a value added to the
// list and not to a step's code fails a named test, and a step never computes a form it
// does not implement (docs/adding-a-layer-form.md).
#include <functional>
#include <string>
#include <vector>

#include "config/step_support.h"

namespace copytask {

struct Config;

// model.activation: the feed-forward's nonlinearity, hidden = f(fc1(ln2(x))).
enum class Activation {
  relu,  // max(x, 0)
  gelu,  // x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, the exact form (torch's approximate="none")
};

// One model's layer form: a value of every layer-form key. Every member of a batch has the
// same (a study puts arms of different forms into different batches).
struct LayerForm {
  Activation activation = Activation::relu;
};

// One value of a layer-form key and the steps that compute it.
struct LayerFormValue {
  std::string key;      // the config key: "model.activation"
  std::string value;    // as the config writes it: "gelu"
  std::string summary;  // one line for `copytask schemes` and the docs
  unsigned steps = kEveryStep;  // StepSupport: the autograd, device and fused CPU steps that compute it
  bool fused_gpu = false;       // the fused GPU step's kernels (src/kernels/) compute it
  std::function<bool(const LayerForm&)> chosen;  // the form takes this value
  std::function<void(LayerForm&)> choose;        // sets it
};

// Every value of every key, keys in the config's order, each key's default first.
const std::vector<LayerFormValue>& layer_form_values();

// The layer-form keys, in the list's order, and one key's values.
std::vector<std::string> layer_form_keys();
std::vector<std::string> layer_form_choices(const std::string& key);

// Every form: the default and, for each non-default value, the default with that value
// (what the tests iterate, as they iterate the schemes).
std::vector<LayerForm> layer_forms_each_value();

// The form a config asks for (its keys already checked against layer_form_choices).
LayerForm layer_form_of(const Config& config);

// The values a form takes, one per key, in the list's order.
std::vector<const LayerFormValue*> layer_form_chosen(const LayerForm& form);

// "model.activation=gelu" (every key, space-separated): for names and messages.
std::string layer_form_text(const LayerForm& form);

// Why a step cannot compute this form ("" when it can): "model.activation = gelu has no
// fused CPU step". step: one StepSupport bit.
std::string layer_form_unsupported(const LayerForm& form, unsigned step);

// Why the fused GPU step's kernels cannot compute this form ("" when they can).
std::string layer_form_fused_gpu_problem(const LayerForm& form);

}  // namespace copytask
