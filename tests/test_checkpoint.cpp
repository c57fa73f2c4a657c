// Checkpoints: a saved member reloads to the same outputs; bad files get clear errors.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "test_util.h"
#include "train/checkpoint.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("copytask_test_" + std::to_string(::getpid()) + "_" + name);
}

TEST(Checkpoint, ReloadedMembersGiveTheSameLogits) {
  const std::vector<MemberSpec> members = {{"a", 1, "rope", false}, {"b", 2, "learned", false}, {"b", 3, "learned", false}};
  Encoder trained(test::small_shape(), members, torch::kCPU);
  const auto path = temp_path("b.pt");
  checkpoint_save(trained, 1, 2, path.string());  // members 1 and 2 (scheme "b")
  // The same two members alone (a member's parameters depend on its seed only): the
  // reloaded model's twin in layout, so the same kernels run and the logits agree exactly.
  Encoder twin(test::small_shape(), std::vector<MemberSpec>{members[1], members[2]}, torch::kCPU);

  Encoder fresh(test::small_shape(), std::vector<MemberSpec>{{"b", 7, "learned", false}, {"b", 8, "learned", false}}, torch::kCPU);
  auto tokens = test::random_tokens(2, 3, fresh->shape(), 1);
  torch::NoGradGuard no_grad;
  fresh->eval();
  trained->eval();
  twin->eval();
  auto before = fresh->forward(tokens);
  checkpoint_load(fresh, 0, path.string());
  auto after = fresh->forward(tokens);
  EXPECT_GT(test::max_abs_diff(before, twin->forward(tokens)), 1e-3);
  EXPECT_EQ(test::max_abs_diff(after, twin->forward(tokens)), 0.0);
  // Beside another member, the same parameters may take another kernel path (the wheel's
  // LibTorch uses MKL, Debian's OpenBLAS): equal up to float rounding.
  auto in_batch = trained->forward(torch::cat({tokens.narrow(0, 0, 1), tokens}, 0)).narrow(0, 1, 2);
  EXPECT_LT(test::max_abs_diff(after, in_batch), 1e-5);
  fs::remove(path);
}

TEST(Checkpoint, MissingCorruptAndMismatchedFilesAreRefusedClearly) {
  Encoder model(test::small_shape(), std::vector<MemberSpec>{{"a", 1, "none", false}}, torch::kCPU);
  try {
    checkpoint_load(model, 0, "/nonexistent/x.pt");
    FAIL() << "a missing file must throw";
  } catch (const CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("does not exist"), std::string::npos) << error.what();
  }
  const auto corrupt = temp_path("corrupt.pt");
  std::ofstream(corrupt) << "this is not a checkpoint";
  try {
    checkpoint_load(model, 0, corrupt.string());
    FAIL() << "a corrupt file must throw";
  } catch (const CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("corrupt"), std::string::npos) << error.what();
  }
  fs::remove(corrupt);

  auto wide_shape = test::small_shape();
  wide_shape.hidden = 16;
  Encoder wide(wide_shape, std::vector<MemberSpec>{{"a", 1, "none", false}}, torch::kCPU);
  const auto other = temp_path("other.pt");
  checkpoint_save(wide, 0, 1, other.string());
  try {
    checkpoint_load(model, 0, other.string());
    FAIL() << "a checkpoint of another shape must throw";
  } catch (const CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("shape"), std::string::npos) << error.what();
  }
  fs::remove(other);
}

}  // namespace
}  // namespace copytask
