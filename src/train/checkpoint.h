#pragma once
// Checkpoints of trained members: a plain dict of tensors (parameter name -> (S, ...) for
// the S members saved), written with torch::pickle_save so Python can read it too. The
// stacked parameters keep their names (tok_emb, blocks.0.attn.qkv.weight, ...); a
// member's positional scheme's parameters are positional.<name> (positional.table,
// positional.bucket_bias, ...); meta.seeds holds the seeds.
#include <stdexcept>
#include <string>

#include "model/encoder.h"

namespace copytask {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Saves members first .. first+count-1 of `model` to `path` (atomically). Members saved
// together must have schemes with the same parameters (the same scheme and options).
void checkpoint_save(Encoder& model, int64_t first, int64_t count, const std::string& path);

// Loads a checkpoint into members first .. first+S-1 of `model`. Throws CheckpointError
// naming the file and what is wrong: missing, unreadable, not a copytask checkpoint, or
// parameters whose names or shapes do not match the model's config. A checkpoint of
// copytask 0.1 before schemes owned their parameters (pos_emb for every member) loads too.
void checkpoint_load(Encoder& model, int64_t first, const std::string& path);

}  // namespace copytask
