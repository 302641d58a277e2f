#!/usr/bin/env python3
"""A TCP sink and sender for tests/netns_cluster_test.sh.

  tcp_probe.py sink PORT            accepts connections one after another,
                                    reading each to its end, until killed
  tcp_probe.py send HOST PORT BYTES TIMEOUT
                                    one connect (at most TIMEOUT s), then BYTES
                                    bytes; prints the seconds the send took,
                                    from connect to the peer's close. Exit 1
                                    (saying why) when the connect or the
                                    transfer fails or outlasts TIMEOUT.
"""
import socket
import sys
import time


def sink(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(8)
    while True:
        conn, _ = srv.accept()
        with conn:
            while conn.recv(1 << 16):
                pass


def send(host, port, size, timeout):
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            chunk = b"x" * (1 << 16)
            left = size
            while left > 0:
                s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
                s.sendall(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
            s.shutdown(socket.SHUT_WR)
            s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
            s.recv(1)  # the sink closes once it has read everything
    except OSError as e:
        print(f"send to {host}:{port}: {e}")
        return 1
    print(f"{time.monotonic() - start:.3f}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        sink(int(sys.argv[2]))
    else:
        sys.exit(send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])))
