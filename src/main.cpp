// copytask: how do positional encodings compare on the copy task? The program is the
// library's (cli/program.cpp); the work is in src/*/.
#include "cli/program.h"

int main(int argc, char** argv) { return copytask::program_main(argc, argv); }
