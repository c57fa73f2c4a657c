#pragma once
// How the command line shows a running study's progress (study/study_progress.h): on a
// terminal, one live line on stderr rewritten at most ten times a second, and a log line
// at the end of each batch; elsewhere (a file, a pipe, Slurm), a log line per evaluation.
#include "study/study_progress.h"

namespace copytask {

// Callbacks that print the study's progress; `terminal`: stderr is a terminal.
StudyProgress study_progress_printer(bool terminal);

}  // namespace copytask
