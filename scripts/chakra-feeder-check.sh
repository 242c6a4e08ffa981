#!/usr/bin/env bash
# Reads a Prism trace set (prism-graphgen chakra-export) with Chakra's own C++
# reader, ETFeeder, from a Chakra checkout of yours (not part of Prism):
# builds a small driver against the checkout's src/feeder and protoio and the
# schema's protoc output, then issues every node of every trace the way
# ASTRA-sim drives the feeder (next issuable node, free its children, remove
# it) and prints per trace the nodes issued, collectives, sends/receives and
# their bytes (compare with `prism-graphgen inspect G --ops RANK`). A trace
# whose dependencies cannot all be resolved stops with "deadlock" (exit 1).
#
# Usage: scripts/chakra-feeder-check.sh CHAKRA_CHECKOUT TRACE_DIR [NAME]   (NAME: prism)
# Needs g++, protoc and libprotobuf-dev (scripts/setup.sh installs them).
set -euo pipefail
chakra="$(cd "${1:?usage: chakra-feeder-check.sh CHAKRA_CHECKOUT TRACE_DIR [NAME]}" && pwd)"
traces="$(cd "${2:?usage: chakra-feeder-check.sh CHAKRA_CHECKOUT TRACE_DIR [NAME]}" && pwd)"
name="${3:-prism}"
[[ -f $chakra/src/feeder/et_feeder.cpp && -f $chakra/schema/protobuf/et_def.proto ]] ||
  { echo "chakra-feeder-check: $chakra is not a Chakra checkout (no src/feeder/et_feeder.cpp)" >&2; exit 2; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
protoc --proto_path="$chakra/schema/protobuf" --cpp_out="$work" "$chakra/schema/protobuf/et_def.proto"
cat > "$work/driver.cc" <<'CC'
#include <cstdio>
#include <iostream>
#include "et_feeder.h"
int main(int argc, char** argv) {
  int bad = 0;
  for (int i = 1; i < argc; ++i) {
    Chakra::ETFeeder f(argv[i]);
    unsigned long issued = 0, colls = 0, p2p = 0, bytes = 0;
    while (f.hasNodesToIssue()) {
      auto n = f.getNextIssuableNode();
      if (!n) { std::cerr << argv[i] << ": nodes left but none issuable (deadlock)\n"; bad = 1; break; }
      ++issued;
      if (n->type() == ChakraProtoMsg::COMM_COLL_NODE) ++colls, bytes += n->comm_size();
      if (n->type() == ChakraProtoMsg::COMM_SEND_NODE || n->type() == ChakraProtoMsg::COMM_RECV_NODE)
        ++p2p, bytes += n->comm_size();
      f.freeChildrenNodes(n->id());
      f.removeNode(n->id());
    }
    std::printf("%s: %lu nodes issued, %lu collectives, %lu send/recv, %lu bytes\n", argv[i], issued, colls, p2p, bytes);
  }
  return bad;
}
CC
g++ -std=c++17 -O1 -Wno-deprecated-declarations -I"$chakra/src/feeder" -I"$chakra/src/third_party/utils" -I"$work" "$work/driver.cc" \
  "$chakra/src/feeder/et_feeder.cpp" "$chakra/src/feeder/et_feeder_node.cpp" \
  "$chakra/src/third_party/utils/protoio.cc" "$work/et_def.pb.cc" -lprotobuf -lpthread -o "$work/driver"
files=()
for ((r = 0; ; r++)); do [[ -f $traces/$name.$r.et ]] || break; files+=("$traces/$name.$r.et"); done
[[ ${#files[@]} -gt 0 ]] || { echo "chakra-feeder-check: no $traces/$name.0.et" >&2; exit 2; }
"$work/driver" "${files[@]}"
