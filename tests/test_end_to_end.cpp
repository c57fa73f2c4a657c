// End to end: a small study must learn. Placeholder until the config is tuned.
#include <gtest/gtest.h>
