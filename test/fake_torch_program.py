#!/usr/bin/env python3
"""A stand-in for a PyTorch rank in the launcher tests (no torch on CI).

It does what PyTorch 2.11's env:// start-up does in the store before NCCL:
connects to MASTER_ADDR:MASTER_PORT as a TCPStore client (VALIDATE), and for
the default group's first communicator either WAITs for and GETs the NCCL id
(rank != 0) or would set it (rank 0: it only prints). It speaks the TCPStore
protocol itself (daemon/store/tcp_store_protocol.h).

  fake_torch_program.py [--fail-rank R --code N] [--absent-rank R] [--linger S]
                        [--group K --give-up S]

--group K: after the world's id, wait (at most --give-up seconds, then print
"gave up" and go on) for the NCCL id of PyTorch group K, as a lazy new_group
at its first collective does.
"""
import argparse
import os
import socket
import struct
import sys
import time

VALIDATE, GET, WAIT = 0, 3, 6
MAGIC = 0x3C85F7CE


def string(b):
    return struct.pack("<Q", len(b)) + b


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise SystemExit("store closed the connection")
        out += chunk
    return out


def get_id(s, key):
    k = ("/" + key).encode()
    s.sendall(bytes([WAIT]) + struct.pack("<Q", 1) + string(k))
    if recv_exact(s, 1) != b"\x00":
        raise SystemExit("WAIT: unexpected reply")
    s.sendall(bytes([GET]) + string(k))
    n = struct.unpack("<Q", recv_exact(s, 8))[0]
    return recv_exact(s, n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--code", type=int, default=3)
    ap.add_argument("--absent-rank", type=int, default=-1, help="this rank sleeps instead of starting")
    ap.add_argument("--linger", type=float, default=0, help="seconds to stay connected after the id")
    ap.add_argument("--group", type=int, default=0, help="then wait for PyTorch group K's first NCCL id")
    ap.add_argument("--give-up", type=float, default=10, help="seconds to wait for --group's id")
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} starting", flush=True)
    if rank == args.fail_rank:
        print(f"rank {rank} fails with status {args.code}", flush=True)
        sys.exit(args.code)
    if rank == args.absent_rank:
        time.sleep(3600)
    s = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
    s.sendall(bytes([VALIDATE]) + struct.pack("<I", MAGIC))
    if rank != 0:
        uid = get_id(s, "default_pg/0//cuda//0")
        family, port = struct.unpack("<H", uid[8:10])[0], struct.unpack(">H", uid[10:12])[0]
        ip = socket.inet_ntoa(uid[12:16])
        print(f"got the world's NCCL id: {len(uid)} bytes, root {ip}:{port} (family {family})", flush=True)
    if args.group:
        s.settimeout(args.give_up)
        try:
            get_id(s, f"default_pg/0//{args.group}//cuda//0")
            print(f"got group {args.group}'s NCCL id", flush=True)
        except socket.timeout:
            print(f"gave up waiting for group {args.group}'s NCCL id", flush=True)
            sys.exit(0)
    time.sleep(args.linger)
    s.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
