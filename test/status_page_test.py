#!/usr/bin/env python3
"""prismd's status page (GET /) in headless Chromium.

1. Live: prismd replays examples/train-gpt-8.yaml's graph paced to the wall
   clock (no real ranks); once /status reports two iterations, Chromium loads
   / and the DOM it renders must show the emulated time, the engine lag, the
   iteration times (text and chart bars), the engine's communicator rows and
   "none yet" for real ranks and divergences, and no page error.
2. Every field: status_page_server serves a StatusBoard filled through every
   setter; the page must show each real rank and what it does, each
   communicator with its progress, the divergence and the alert.
3. Empty: the same server with an empty board; the page shows "none yet"
   everywhere and no error.
Skips (exit 77) when Chromium is absent (scripts/setup.sh installs Debian's
chromium; CI has it). Usage: status_page_test.py PRISMD GRAPHGEN STATUS_PAGE_SERVER
"""
import html.parser
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
PRISMD = GRAPHGEN = SERVER = CHROMIUM = None


def find_chromium():
    for exe in (os.environ.get("PRISM_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                shutil.which("chromium-browser")):
        if exe and os.access(exe, os.X_OK):
            return exe
    return None


class Dom(html.parser.HTMLParser):
    """Text under each element with an id, and the chart's bars."""

    def __init__(self):
        super().__init__()
        self.stack, self.text, self.bars, self.rows = [], {}, [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("meta", "br", "img", "input", "link"):
            return
        self.stack.append(a.get("id"))
        if tag == "rect" and "iteration-chart" in self.stack:
            self.bars.append(a)
        if tag == "tr":
            for owner in reversed(self.stack):
                if owner:
                    self.rows[owner] = self.rows.get(owner, 0) + 1
                    break

    def handle_endtag(self, tag):
        if tag in ("meta", "br", "img", "input", "link"):
            return
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for owner in self.stack:
            if owner:
                self.text[owner] = self.text.get(owner, "") + data

    def get(self, element_id):
        return " ".join(self.text.get(element_id, "").split())


def render(url, tmp):
    """The DOM of `url` after 4 s of the page's (virtual) time."""
    profile = tempfile.mkdtemp(dir=tmp)
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                          "--virtual-time-budget=4000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0 or "<html" not in out.stdout:
        raise AssertionError(f"chromium exit {out.returncode}: {out.stderr[-2000:]}")
    dom = Dom()
    dom.feed(out.stdout)
    return dom


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StatusPage(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.stdin:
                p.stdin.close()   # the fixture server stops when its input closes
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            if p.stdout:
                p.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_fixture(self, *args):
        p = subprocess.Popen([SERVER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        self.assertTrue(line.startswith("port "), line)
        return int(line.split()[1])

    def test_live_paced_replay(self):
        graph = os.path.join(self.tmp, "g.graph")
        subprocess.run([GRAPHGEN, "job", os.path.join(HERE, "..", "examples", "train-gpt-8.yaml"), "-o", graph],
                       check=True, capture_output=True)
        port = free_port()
        self.procs.append(subprocess.Popen(
            [PRISMD, "--graph", graph, "--listen", f"unix://{self.tmp}/prismd.sock", "--metrics-address",
             f"127.0.0.1:{port}", "--iterations", "400"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        status = {}
        deadline = time.monotonic() + 120   # a safety net for a broken daemon, not a timing check
        while status.get("iterations_done", 0) < 2:
            self.assertLess(time.monotonic(), deadline, f"prismd never reported 2 iterations: {status}")
            time.sleep(0.2)
            try:
                status = get_json(f"http://127.0.0.1:{port}/status")
            except OSError:
                pass
        dom = render(f"http://127.0.0.1:{port}/", self.tmp)
        self.assertEqual(dom.get("page-error"), "")
        self.assertRegex(dom.get("emulated-time"), r"^[0-9.]+ (s|ms|min)$")
        self.assertRegex(dom.get("engine-lag"), r"^[0-9.]+ (s|ms|µs)$|^0 s$")
        self.assertRegex(dom.get("last-iteration"), r"^[0-9.]+ (ms|s)$")
        self.assertRegex(dom.get("iteration-summary"), r"iteration\(s\) recorded; last [0-9.]+ ms")
        self.assertGreaterEqual(len(dom.bars), 2)
        for bar in dom.bars:
            self.assertGreater(float(bar["data-time-s"]), 0.1)   # train-gpt-8 iterations are ~0.3 s
        self.assertIn("all TP", dom.get("communicators"))
        self.assertIn("all DP_CP", dom.get("communicators"))
        self.assertEqual(dom.get("real-ranks-empty"), "none yet")
        self.assertEqual(dom.get("divergences-empty"), "none")
        self.assertEqual(dom.get("state"), "running")
        self.assertIn("train-gpt-8", dom.get("graph"))

    def test_every_field_rendered(self):
        port = self.start_fixture()
        dom = render(f"http://127.0.0.1:{port}/", self.tmp)
        self.assertEqual(dom.get("page-error"), "")
        self.assertEqual(dom.get("emulated-time"), "3.500 s")
        self.assertEqual(dom.get("engine-lag"), "2.500 ms")
        self.assertEqual(dom.get("iterations"), "2 / 10 (0.0% of the replay done)")
        self.assertEqual(len(dom.bars), 2)
        self.assertEqual(dom.rows.get("real-ranks"), 2)
        ranks = dom.get("real-ranks")
        self.assertIn("allreduce on tp[0], 2 MiB", ranks)
        self.assertIn("not connected yet", ranks)
        self.assertEqual(dom.rows.get("communicators"), 2)
        comms = dom.get("communicators")
        for text in ("tp[0]", "40 / 160", "64.00 MiB", "dp_cp[0]", "init: waiting for rank 5", "1.00 GiB"):
            self.assertIn(text, comms)
        self.assertIn("expected COMMSPLIT of world", dom.get("divergences"))
        self.assertEqual(dom.get("divergence-count"), "(1)")
        self.assertIn("real rank 5 has not connected", dom.get("alerts"))

    def test_empty_status_says_none_yet(self):
        port = self.start_fixture("--empty")
        dom = render(f"http://127.0.0.1:{port}/", self.tmp)
        self.assertEqual(dom.get("page-error"), "")
        for element in ("iteration-summary", "real-ranks-empty", "communicators-empty", "last-iteration",
                        "mean-iteration"):
            self.assertEqual(dom.get(element), "none yet", element)
        self.assertEqual(dom.get("divergences-empty"), "none")
        self.assertEqual(dom.bars, [])


if __name__ == "__main__":
    CHROMIUM = find_chromium()
    if not CHROMIUM:
        print("SKIP: chromium not found (apt-get install chromium, or scripts/setup.sh; PRISM_CHROMIUM=path)")
        sys.exit(SKIP)
    if len(sys.argv) < 4:
        sys.exit("usage: status_page_test.py PRISMD GRAPHGEN STATUS_PAGE_SERVER")
    PRISMD, GRAPHGEN, SERVER = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main()
