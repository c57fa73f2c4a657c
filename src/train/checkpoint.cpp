#include "train/checkpoint.h"

#include <fstream>

#include <torch/serialize.h>

#include "util/atomic_files.h"

namespace copytask {

void checkpoint_save(Encoder& model, int64_t first, int64_t count, const std::string& path) {
  c10::Dict<std::string, at::Tensor> tensors;
  for (const auto& [name, value] : model->stacked_parameters())
    tensors.insert(name, value.detach().narrow(0, first, count).to(torch::kCPU).clone());
  // The schemes' parameters, stacked over the saved members: (count, ...).
  for (const auto& item : model->scheme(first).named_parameters()) {
    std::vector<torch::Tensor> per_member;
    for (int64_t m = first; m < first + count; ++m) {
      const auto& params = model->scheme(m).named_parameters();
      TORCH_CHECK(params.contains(item.key()) && params[item.key()].sizes() == item.value().sizes(),
                  "checkpoint_save: members ", first, "..", first + count - 1, " have different positional schemes");
      per_member.push_back(params[item.key()].detach().to(torch::kCPU));
    }
    tensors.insert("positional." + item.key(), torch::stack(per_member).clone());
  }
  std::vector<int64_t> seeds;
  for (int64_t m = first; m < first + count; ++m) seeds.push_back(model->members()[m].seed);
  tensors.insert("meta.seeds", torch::tensor(seeds, torch::kLong));
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(tensors));
  file_write_atomic(path, std::string(bytes.begin(), bytes.end()));
}

namespace {

// Copies the saved (S, ...) tensor `name` into members first .. first+S-1 of `slots`
// ((M, ...) stacked, or one member's scheme parameter, unstacked, when `member` >= 0).
void copy_saved(const c10::impl::GenericDict& dict, const std::string& path, const std::string& name,
                const std::string& legacy_name, const torch::Tensor& slot, int64_t first, int64_t member,
                int64_t member_count) {
  auto found = dict.find(name);
  if ((found == dict.end() || !found->value().isTensor()) && !legacy_name.empty()) found = dict.find(legacy_name);
  if (found == dict.end() || !found->value().isTensor())
    throw CheckpointError("checkpoint " + path + " has no parameter '" + name + "'; it was saved with another model config");
  const at::Tensor saved = found->value().toTensor();
  const int64_t count = saved.dim() > 0 ? saved.size(0) : 0;
  std::vector<int64_t> expected = slot.sizes().vec();
  if (member < 0) expected[0] = count;
  else expected.insert(expected.begin(), count);
  if (saved.sizes().vec() != expected || first + count > member_count)
    throw CheckpointError("checkpoint " + path + ": parameter '" + name + "' has shape " + c10::str(saved.sizes()) +
                          ", the model needs " + c10::str(c10::IntArrayRef(expected)) +
                          "; use the config the checkpoint was trained with");
  if (member < 0) slot.narrow(0, first, count).copy_(saved);
  else slot.copy_(saved[member - first]);
}

}  // namespace

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
  const auto dict = value.toGenericDict();
  const int64_t M = model->member_count();
  torch::NoGradGuard no_grad;
  for (const auto& [name, slot] : model->stacked_parameters()) copy_saved(dict, path, name, "", slot, first, -1, M);
  auto seeds = dict.find("meta.seeds");
  const int64_t saved_members = seeds != dict.end() && seeds->value().isTensor() ? seeds->value().toTensor().size(0) : 1;
  for (int64_t m = first; m < first + saved_members && m < M; ++m)
    for (const auto& item : model->scheme(m).named_parameters())
      // Before schemes owned their parameters, every member carried its learned rows as pos_emb.
      copy_saved(dict, path, "positional." + item.key(), item.key() == "table" ? "pos_emb" : "", item.value(), first, m,
                 M);
}

}  // namespace copytask
