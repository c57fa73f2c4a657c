#pragma once
// The program's version and the git commit it was built from (generated at build time).
namespace copytask {
const char* version_string();
const char* git_commit();
}  // namespace copytask
