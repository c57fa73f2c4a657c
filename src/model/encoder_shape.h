#pragma once
// The shape every member of a batch shares (docs/design.md section 3).
// V vocab, T positions (the context), D embed, H heads, L blocks, F FF hidden.
#include <cstdint>

#include "config/config.h"

namespace copytask {

struct EncoderShape {
  int64_t vocab = 11, context = 10, embed = 20, heads = 1, blocks = 2, hidden = 32;
  double dropout = 0.1;
  int64_t head_dim() const { return embed / heads; }
};

// The shape a config asks for (task.vocab_size, task.context, model.*).
inline EncoderShape encoder_shape_of(const Config& c) {
  return EncoderShape{c.task.vocab_size, c.task.context, c.model.embed, c.model.heads,
                      c.model.blocks,    c.model.hidden,  c.model.dropout};
}

}  // namespace copytask
