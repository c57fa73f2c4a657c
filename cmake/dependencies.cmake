# copytask's header-only dependencies and GoogleTest: the installed packages where they
# are (Debian's libcli11-dev, nlohmann-json3-dev, libspdlog-dev, libgtest-dev), else the
# copies scripts/gpu_bundle.sh puts in COPYTASK_BUNDLED_DEPS (a GPU machine has no Debian
# packages and no network): CLI11, nlohmann/json, spdlog and fmt used header-only, and
# GoogleTest built from its sources. Nothing is downloaded. Defines:
#   copytask::cli11  copytask::json    (interface targets)
#   copytask::spdlog  spdlog and fmt, header-only: for src/util's logging library alone
#   copytask::gtest                                      (when COPYTASK_WITH_GTEST)
#   COPYTASK_DEPENDENCIES_FROM  "system packages" or "bundled copies in <folder>"
set(COPYTASK_BUNDLED_DEPS "${CMAKE_CURRENT_LIST_DIR}/../.deps" CACHE PATH
    "folder of the copies made by scripts/gpu_bundle.sh, used where the packages are absent")
option(COPYTASK_USE_BUNDLED_DEPS "use the bundled copies even where the packages are installed (to rehearse the fallback)" OFF)
get_filename_component(COPYTASK_BUNDLED_DEPS "${COPYTASK_BUNDLED_DEPS}" ABSOLUTE)

if(NOT COPYTASK_USE_BUNDLED_DEPS)
  find_package(CLI11 QUIET)
  find_package(nlohmann_json 3.9 QUIET)
  find_package(spdlog QUIET)
endif()

add_library(copytask_cli11 INTERFACE)
add_library(copytask_json INTERFACE)
add_library(copytask_spdlog INTERFACE)
add_library(copytask::cli11 ALIAS copytask_cli11)
add_library(copytask::json ALIAS copytask_json)
add_library(copytask::spdlog ALIAS copytask_spdlog)

# spdlog and fmt are compiled header-only into the one library that logs (src/util, which
# never sees LibTorch's headers): a PyTorch wheel's torch/include carries an fmt of its own
# (12 in 2.11), Debian's spdlog is built on fmt 9, and neither may be compiled against the
# other's. Header-only, no libspdlog.so or libfmt.so travels with a binary.
target_compile_definitions(copytask_spdlog INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)

if(TARGET CLI11::CLI11 AND TARGET nlohmann_json::nlohmann_json AND TARGET spdlog::spdlog_header_only)
  target_link_libraries(copytask_cli11 INTERFACE CLI11::CLI11)
  target_link_libraries(copytask_json INTERFACE nlohmann_json::nlohmann_json)
  get_target_property(spdlog_include spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
  if(spdlog_include)
    target_include_directories(copytask_spdlog SYSTEM INTERFACE ${spdlog_include})
  endif()
  set(COPYTASK_DEPENDENCIES_FROM "system packages")
else()
  if(NOT EXISTS "${COPYTASK_BUNDLED_DEPS}/include/CLI/CLI.hpp" OR
     NOT EXISTS "${COPYTASK_BUNDLED_DEPS}/logging/include/spdlog/spdlog.h")
    message(FATAL_ERROR "copytask: CLI11, nlohmann/json or spdlog is not installed, and there are no bundled "
                        "copies in ${COPYTASK_BUNDLED_DEPS} (include/ and logging/include/). Install the packages "
                        "(scripts/setup.sh), or run scripts/gpu_bundle.sh on a machine that has them and carry "
                        "its .deps/ folder here.")
  endif()
  foreach(target copytask_cli11 copytask_json)
    target_include_directories(${target} SYSTEM INTERFACE "${COPYTASK_BUNDLED_DEPS}/include")
  endforeach()
  # spdlog and fmt in a folder of their own, seen only by the logging library.
  target_include_directories(copytask_spdlog SYSTEM INTERFACE "${COPYTASK_BUNDLED_DEPS}/logging/include")
  set(COPYTASK_DEPENDENCIES_FROM "bundled copies in ${COPYTASK_BUNDLED_DEPS}")
endif()

if(COPYTASK_WITH_GTEST)
  if(NOT COPYTASK_USE_BUNDLED_DEPS)
    find_package(GTest QUIET)
  endif()
  add_library(copytask_gtest INTERFACE)
  add_library(copytask::gtest ALIAS copytask_gtest)
  if(TARGET GTest::gtest)
    target_link_libraries(copytask_gtest INTERFACE GTest::gtest)
    set(COPYTASK_GTEST_FROM "system package")
  else()
    if(NOT EXISTS "${COPYTASK_BUNDLED_DEPS}/googletest/CMakeLists.txt")
      message(FATAL_ERROR "copytask: GoogleTest is not installed and ${COPYTASK_BUNDLED_DEPS}/googletest holds no "
                          "sources; install libgtest-dev, or carry the folder scripts/gpu_bundle.sh makes")
    endif()
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory("${COPYTASK_BUNDLED_DEPS}/googletest" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
    target_link_libraries(copytask_gtest INTERFACE gtest)
    set(COPYTASK_GTEST_FROM "built from ${COPYTASK_BUNDLED_DEPS}/googletest")
  endif()
endif()
