#!/usr/bin/env python3
"""prismd's PyTorch store against PyTorch's own TCPStore client (GPU host).

  python torch_store_selftest.py PORT

Connects to the store prismd hosts on 127.0.0.1:PORT the ways a program does
(a plain client; and is_master=True with TORCHELASTIC_USE_AGENT_STORE=True and
MASTER_PORT=PORT, which must fall back to a client because prismd holds the
port) and runs every store call PyTorch 2.11 offers. Prints one line per call:
"store <call>: ok" or "store <call>: FAILED <error>"; exit status = failures.
"""
import datetime
import os
import sys
import threading
import time

import torch.distributed as dist


def main():
    port = int(sys.argv[1])
    timeout = datetime.timedelta(seconds=10)
    results = []

    def check(name, fn):
        try:
            fn()
            results.append((name, None))
        except Exception as e:  # noqa: BLE001 - report every failure
            results.append((name, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))

    store = dist.TCPStore("127.0.0.1", port, 2, False, timeout=timeout, wait_for_workers=False)
    check("set/get", lambda: (store.set("a", b"alpha"), store.get("a") == b"alpha" or 1 / 0))
    check("add", lambda: (store.add("n", 5) == 5 and store.add("n", 2) == 7) or 1 / 0)
    check("check", lambda: (store.check(["a"]) and not store.check(["zz"])) or 1 / 0)
    check("compare_set", lambda: store.compare_set("a", b"alpha", b"beta") == b"beta" or 1 / 0)
    check("num_keys", lambda: store.num_keys() >= 2 or 1 / 0)
    check("delete_key", lambda: store.delete_key("n") or 1 / 0)
    check("multi_set/multi_get", lambda: (store.multi_set(["m1", "m2"], [b"1", b"2"]),
                                          store.multi_get(["m1", "m2"]) == [b"1", b"2"] or 1 / 0))
    check("list_keys", lambda: "a" in store.list_keys() or 1 / 0)
    check("append", lambda: (store.append("m1", b"x"), store.get("m1") == b"1x" or 1 / 0))

    def wait_then_set():
        other = dist.TCPStore("127.0.0.1", port, 2, False, timeout=timeout, wait_for_workers=False)
        time.sleep(0.3)
        other.set("late", b"here")
    t = threading.Thread(target=wait_then_set)
    t.start()
    check("wait (set by another client)", lambda: store.wait(["late"]))
    t.join()
    check("wait timeout (CANCEL_WAIT)", lambda: _expect_timeout(store))
    check("get after a timed-out wait", lambda: store.get("a") == b"beta" or 1 / 0)
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    os.environ["MASTER_PORT"] = str(port)
    check("is_master=True falls back to a client (agent store)",
          lambda: dist.TCPStore("127.0.0.1", port, 2, True, timeout=timeout).get("a") == b"beta" or 1 / 0)
    failures = 0
    for name, err in results:
        print(f"store {name}: {'ok' if err is None else 'FAILED ' + err}", flush=True)
        failures += err is not None
    sys.exit(failures)


def _expect_timeout(store):
    try:
        store.wait(["never"], datetime.timedelta(milliseconds=200))
    except Exception:  # noqa: BLE001 - a timeout is the expected outcome
        return
    raise RuntimeError("wait for an unset key returned")


if __name__ == "__main__":
    main()
