// copytask_report_write DIR OUT: writes the HTML report of the study in DIR to OUT. A
// stand-in for `copytask report` used by the browser test until that subcommand exists.
#include <cstdio>
#include <exception>

#include "report/html_report.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s STUDY_DIR OUT_FILE\n", argv[0]);
    return 2;
  }
  try {
    copytask::report_html_write(argv[1], argv[2]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "copytask_report_write: %s\n", error.what());
    return 1;
  }
  return 0;
}
