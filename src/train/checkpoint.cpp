#include "train/checkpoint.h"

#include <fstream>

#include <torch/serialize.h>

#include "report/files.h"

namespace copytask {

void checkpoint_save(Encoder& model, int64_t first, int64_t count, const std::string& path) {
  c10::Dict<std::string, at::Tensor> tensors;
  for (const auto& item : model->named_parameters())
    tensors.insert(item.key(), item.value().detach().narrow(0, first, count).to(torch::kCPU).clone());
  std::vector<int64_t> seeds;
  for (int64_t m = first; m < first + count; ++m) seeds.push_back(model->members()[m].seed);
  tensors.insert("meta.seeds", torch::tensor(seeds, torch::kLong));
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(tensors));
  file_write_atomic(path, std::string(bytes.begin(), bytes.end()));
}

void checkpoint_load(Encoder& model, int64_t first, const std::string& path) {
  std::ifstream probe(path);
  if (!probe) throw CheckpointError("checkpoint " + path + " does not exist or cannot be read; check --run");
  const std::string content = file_read(path);
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(content.begin(), content.end()));
  } catch (const std::exception& error) {
    throw CheckpointError("checkpoint " + path + " is corrupt or not a copytask checkpoint (" +
                          std::string(error.what()).substr(0, 200) + "); retrain or restore the file");
  }
  if (!value.isGenericDict())
    throw CheckpointError("checkpoint " + path + " is not a dict of tensors; it was not written by copytask");
  auto dict = value.toGenericDict();
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    auto found = dict.find(name);
    if (found == dict.end() || !found->value().isTensor())
      throw CheckpointError("checkpoint " + path + " has no parameter '" + name +
                            "'; it was saved with another model config");
    at::Tensor saved = found->value().toTensor();
    auto expected = item.value().sizes().vec();
    const int64_t count = saved.dim() > 0 ? saved.size(0) : 0;
    expected[0] = count;
    if (saved.sizes().vec() != expected || first + count > model->member_count())
      throw CheckpointError("checkpoint " + path + ": parameter '" + name + "' has shape " +
                            c10::str(saved.sizes()) + ", the model needs " + c10::str(c10::IntArrayRef(expected)) +
                            "; use the config the checkpoint was trained with");
    item.value().narrow(0, first, count).copy_(saved);
  }
}

}  // namespace copytask
