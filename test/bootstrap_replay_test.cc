// Recording format: a session recorded with --record-wire is readable and
// replays against a fresh server.
#include <catch2/catch.hpp>
