#pragma once
// The shape every member of a batch shares (docs/design.md section 3).
// V vocab, T positions (the context), D embed, H heads, L blocks, F FF hidden.
#include <cstdint>
#include <string>

#include "config/config.h"
#include "config/layer_form.h"

namespace copytask {

struct EncoderShape {
  int64_t vocab = 11, context = 10, embed = 20, heads = 1, blocks = 2, hidden = 32;
  double dropout = 0.1;
  // The task every member of the batch learns (task.kind, task.noise): coupled position IDs
  // read each input's outputs and their sources from it (task/task_kind.h, coupled_places).
  std::string task_kind = "copy";
  double task_noise = 0.5;
  // task.format: under next-token, evaluation generates the outputs (train/evaluate.h).
  std::string task_format = "placeholders";
  // Every other choice of a block's arithmetic (model.activation, ...): each step says which
  // forms it computes and refuses the rest (config/layer_form.h).
  LayerForm form;
  int64_t head_dim() const { return embed / heads; }
  // The task's layout rules at this vocabulary and context.
  TaskConfig task() const {
    TaskConfig out;
    out.vocab_size = vocab;
    out.context = context;
    out.kind = task_kind;
    out.noise = task_noise;
    out.format = task_format;
    return out;
  }
};

// The shape a config asks for (task.vocab_size, task.context, task.kind, task.noise,
// task.format, model.*).
inline EncoderShape encoder_shape_of(const Config& c) {
  return EncoderShape{c.task.vocab_size, c.task.context, c.model.embed, c.model.heads,  c.model.blocks,
                      c.model.hidden,    c.model.dropout, c.task.kind,  c.task.noise,   c.task.format,
                      layer_form_of(c)};
}

}  // namespace copytask
