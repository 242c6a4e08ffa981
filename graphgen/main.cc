// prism-graphgen: thin entry point; everything lives in the prism_graphgen
// library (graphgen/cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "graphgen/cli.h"
#include "graphgen/signal_cleanup.h"

int main(int argc, char** argv) {
  prism::graphgen::InstallSignalCleanup();  // an interrupted write leaves no temporary file
  std::vector<std::string> args(argv, argv + argc);
  return prism::graphgen::RunGraphgenCli(args, std::cout, std::cerr);
}
