#!/usr/bin/env python3
"""Hostile peers for the live attack test (tests/attack_test.sh).

  attacker.py attack --ports P1,P2,... --replay FILE[,FILE...] --seconds S
                     --pids PID,... --out RESULT.json
      While S seconds pass, against every port: floods of connections
      sending random bytes, fixed headers announcing huge headers and
      payloads, truncated frames left open, slowloris peers (one byte a
      second), and the recorded bytes replayed. Meanwhile samples the RSS of
      every PID. Writes what it saw (max RSS per pid, how long slowloris
      connections lived, counts) as JSON. FILE is a CLIENT_PREFIX of
      tests/tools/record_proxy.py: FILE.0, FILE.1, ... are replayed.

  attacker.py reset --ports P1,P2,... [--http PORT] --seconds S --out RESULT.json
      While S seconds pass, from several threads per port: connections reset
      (SO_LINGER 0, so the close sends RST) right after the node's first
      write, right after a frame that makes it answer (its own AuthHello
      sent back, which it refuses with an Error), and, on the HTTP port,
      right after a GET of /metrics or /status with a receive window too
      small for the reply, so the node is mid-reply when the RST comes. A
      node that writes to a reset socket without ignoring SIGPIPE dies.
      Writes the counts as JSON.

Every loop is bounded in count and time; only 127.0.0.1 is contacted.
"""
import json
import os
import random
import select
import socket
import struct
import sys
import threading
import time

MAGIC = b"PSTR"
VERSION = 1
HOST = "127.0.0.1"


def fixed_header(header_len, payload_len, version=VERSION, flags=0):
    return MAGIC + struct.pack("<HHIQ", version, flags, header_len, payload_len)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def connect(port, timeout=2.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def send_quietly(s, data):
    try:
        s.sendall(data)
        return True
    except OSError:
        return False


def closed_by_peer(s):
    """True when the peer has closed (EOF or reset), without blocking."""
    try:
        r, _, _ = select.select([s], [], [], 0)
        if not r:
            return False
        return s.recv(65536) == b""
    except OSError:
        return True


class Attack:
    def __init__(self, ports, replays, seconds, pids):
        self.ports = ports
        self.replays = replays
        self.deadline = time.monotonic() + seconds
        self.pids = pids
        self.max_rss = {pid: 0 for pid in pids}
        self.counts = {}
        self.slowloris_lifetimes = []
        self.lock = threading.Lock()
        self.rng = random.Random(13)

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def running(self):
        return time.monotonic() < self.deadline

    def sample_rss(self):
        while self.running():
            for pid in self.pids:
                kib = rss_kib(pid)
                if kib is not None:
                    self.max_rss[pid] = max(self.max_rss[pid], kib)
            time.sleep(0.1)

    def flood(self, port):
        """Bursts of 100 connections: random bytes, or wrong fixed headers."""
        rng = random.Random(port)
        for _burst in range(1000):
            if not self.running():
                return
            socks = []
            for i in range(100):
                try:
                    s = connect(port)
                except OSError:
                    self.count("connect refused or failed")
                    continue
                kind = i % 4
                if kind == 0:
                    data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2048)))
                elif kind == 1:  # a 1 MiB header announced, 20 bytes sent
                    data = fixed_header(1 << 20, 0)
                elif kind == 2:  # a 2 GiB payload announced
                    data = fixed_header(64, 2 << 30) + bytes(64)
                else:  # lengths at their limits, a wrong version, wrong flags
                    data = rng.choice([fixed_header(0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF),
                                       fixed_header(16, 0, version=99),
                                       fixed_header(16, 0, flags=1)])
                send_quietly(s, data)
                socks.append(s)
            self.count("flood connections", len(socks))
            time.sleep(0.5)
            for s in socks:
                s.close()

    def truncated(self, port):
        """Frames cut short and left open: the node must drop them."""
        socks = []
        for _ in range(20):
            try:
                s = connect(port)
            except OSError:
                continue
            send_quietly(s, fixed_header(200, 0) + b"\x10\x00\x00\x00")
            socks.append(s)
        self.count("truncated frames", len(socks))
        while self.running() and any(not closed_by_peer(s) for s in socks):
            time.sleep(0.5)
        for s in socks:
            s.close()

    def slowloris(self, port):
        """Ten peers sending a plausible header one byte a second."""
        frame = fixed_header(40, 0) + bytes(40)
        socks = []
        for _ in range(10):
            try:
                socks.append((connect(port), time.monotonic()))
            except OSError:
                pass
        self.count("slowloris connections", len(socks))
        alive = list(socks)
        i = 0
        while alive and self.running() and i < 600:
            still = []
            for s, born in alive:
                if closed_by_peer(s) or not send_quietly(s, frame[i % len(frame):i % len(frame) + 1]):
                    with self.lock:
                        self.slowloris_lifetimes.append(time.monotonic() - born)
                    s.close()
                else:
                    still.append((s, born))
            alive = still
            i += 1
            time.sleep(1.0)
        for s, born in alive:
            with self.lock:
                self.slowloris_lifetimes.append(-1.0)  # never dropped while we watched
            s.close()

    def replay(self, port):
        """Recorded bytes of real connections, sent again, whole and cut."""
        for _round in range(200):
            if not self.running():
                return
            for blob in self.replays:
                try:
                    s = connect(port)
                except OSError:
                    continue
                cut = len(blob) if _round % 2 == 0 else self.rng.randint(1, max(1, len(blob)))
                send_quietly(s, blob[:cut])
                time.sleep(0.05)
                s.close()
                self.count("replays")
            time.sleep(0.2)

    def run(self):
        threads = [threading.Thread(target=self.sample_rss)]
        for port in self.ports:
            for fn in (self.flood, self.truncated, self.slowloris, self.replay):
                threads.append(threading.Thread(target=fn, args=(port,)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, self.deadline - time.monotonic() + 30))
        return {
            "max_rss_kib": {str(p): v for p, v in self.max_rss.items()},
            "counts": self.counts,
            "slowloris_lifetimes_s": sorted(round(x, 1) for x in self.slowloris_lifetimes),
        }


def reset_now(s):
    """Closes with RST instead of FIN: SO_LINGER on, with a zero timeout."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    except OSError:
        pass


def read_some(s, n, timeout):
    """Up to n bytes, whatever came within timeout seconds (b"" if none)."""
    try:
        r, _, _ = select.select([s], [], [], timeout)
        return s.recv(n) if r else b""
    except OSError:
        return b""


class Resetter:
    """Resets connections in the middle of what a node writes."""

    def __init__(self, ports, http_port, seconds):
        self.ports = ports
        self.http_port = http_port
        self.deadline = time.monotonic() + seconds
        self.counts = {}
        self.lock = threading.Lock()

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def running(self):
        return time.monotonic() < self.deadline

    def open(self, port, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # set before connecting: it bounds the window offered
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(2.0)
        s.connect((HOST, port))
        return s

    def node_port(self, port, seed):
        rng = random.Random(seed)
        for i in range(200000):
            if not self.running():
                return
            try:
                s = self.open(port, rcvbuf=1024)
            except OSError:
                self.count("connect failed")
                time.sleep(0.01)
                continue
            kind = i % 3
            if kind == 0:  # reset as the node sends its AuthHello
                reset_now(s)
                self.count("reset at accept")
                continue
            hello = read_some(s, 4096, 1.0)
            if kind == 1 and hello:  # its own Hello back: refused with an Error
                send_quietly(s, hello)
            else:  # a fixed header the node refuses, with junk after it
                send_quietly(s, fixed_header(16, 0, version=99) + bytes(rng.getrandbits(8)
                                                                        for _ in range(64)))
            reset_now(s)
            self.count("reset after a request")

    def http(self, seed):
        rng = random.Random(seed)
        for i in range(200000):
            if not self.running():
                return
            try:
                s = self.open(self.http_port, rcvbuf=1024)
            except OSError:
                self.count("http connect failed")
                time.sleep(0.01)
                continue
            path = "/metrics" if i % 2 == 0 else "/status"
            send_quietly(s, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            if rng.random() < 0.5:
                read_some(s, 100, 0.5)  # the reply has begun
            reset_now(s)
            self.count("http reset mid-reply")

    def run(self):
        threads = []
        for port in self.ports:
            for k in range(3):
                threads.append(threading.Thread(target=self.node_port, args=(port, port * 10 + k)))
        if self.http_port:
            for k in range(3):
                threads.append(threading.Thread(target=self.http, args=(k,)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, self.deadline - time.monotonic() + 30))
        return {"counts": self.counts}


def read_records(prefix):
    """The recordings of every proxied connection: PREFIX.0, PREFIX.1, ..."""
    blobs = []
    for i in range(1000):
        path = f"{prefix}.{i}"
        if not os.path.exists(path):
            break
        with open(path, "rb") as f:
            blobs.append(f.read())
    return [b for b in blobs if b]


def main(argv):
    if len(argv) >= 2 and argv[1] == "attack":
        args = dict(zip(argv[2::2], argv[3::2]))
        ports = [int(p) for p in args["--ports"].split(",") if p]
        replays = []
        for prefix in args.get("--replay", "").split(","):
            if prefix:
                replays += read_records(prefix)
        pids = [int(p) for p in args.get("--pids", "").split(",") if p]
        result = Attack(ports, replays, float(args.get("--seconds", "20")), pids).run()
        result["replayed_blobs"] = len(replays)
        with open(args["--out"], "w") as f:
            json.dump(result, f, indent=1)
        return 0
    if len(argv) >= 2 and argv[1] == "reset":
        args = dict(zip(argv[2::2], argv[3::2]))
        ports = [int(p) for p in args["--ports"].split(",") if p]
        http_port = int(args.get("--http", "0"))
        result = Resetter(ports, http_port, float(args.get("--seconds", "10"))).run()
        with open(args["--out"], "w") as f:
            json.dump(result, f, indent=1)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
