#!/usr/bin/env python3
"""Guards the layering of the bootstrap server's components (components.h).

Each component calls only the components below it; a call up goes through
components.h's interfaces (CommStarts, SplitEvents), which BootstrapServer
implements. So no component's .h or .cc includes the header of a component
above it, and the public API's files (bootstrap_service.*) include nothing
of the server.

Usage: bootstrap_layers_check.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# From the bottom up, as components.h lists them.
LAYERS = ["reporter", "connection_table", "comm_table", "allgather_engine",
          "root_checkin", "p2p_messages", "comm_split"]
# The server's own files, above every component.
SERVER = ["bootstrap_server"]
INCLUDE = re.compile(r'^#include "daemon/bootstrap/([a-z_]+)\.h"', re.M)


def includes(folder, name):
    found = []
    for ext in (".h", ".cc"):
        path = folder / (name + ext)
        if path.exists():
            found += [(path.name, inc) for inc in INCLUDE.findall(path.read_text())]
    return found


def problems(folder):
    found = []
    for level, name in enumerate(LAYERS):
        above = set(LAYERS[level + 1:]) | set(SERVER)
        for path, inc in includes(folder, name):
            if inc in above:
                found.append(f"{path} includes {inc}.h, a component above it: call it through an "
                             f"interface of components.h that BootstrapServer implements")
    for path, inc in includes(folder, "bootstrap_service"):
        if inc in set(LAYERS) | set(SERVER) | {"components"}:
            found.append(f"{path} (the public API) includes {inc}.h: BootstrapService's methods "
                         f"belong in bootstrap_server.cc")
    return found


def main():
    folder = pathlib.Path(sys.argv[1]) / "daemon" / "bootstrap"
    found = problems(folder)
    for p in found:
        print(p)
    if not found:
        print(f"bootstrap layers: {len(LAYERS)} components, none includes one above it")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
