#include "task/output_errors.h"

#include "task/copy_task.h"

namespace copytask {

const std::array<std::string, kOutputErrorKinds>& output_error_names() {
  static const std::array<std::string, kOutputErrorKinds> names{"stop", "neighbour", "content", "noise", "absent"};
  return names;
}

OutputError output_error(const TaskConfig& task, const int64_t* row, const OutputSources& sources, int64_t j,
                         int64_t predicted) {
  if (predicted == kPadToken || predicted == end_token(task) || predicted == copy_token(task.vocab_size))
    return OutputError::stop;
  const int64_t k = sources.length(), index = sources.content_index[j];
  for (const int64_t next : {index - 1, index + 1})
    if (next >= 0 && next < k && row[sources.content_at[next]] == predicted) return OutputError::neighbour;
  for (const int64_t at : sources.content_at)
    if (row[at] == predicted) return OutputError::content;
  if (predicted == noise_token(task)) return OutputError::noise;
  return OutputError::absent;
}

}  // namespace copytask
