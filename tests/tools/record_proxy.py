#!/usr/bin/env python3
"""A recording TCP proxy for tests: listens on 127.0.0.1 (a free port,
written to PORT_FILE once listening), forwards every connection to
127.0.0.1:TARGET_PORT, and appends every byte that passes, both ways, to
CAPTURE_FILE. With CLIENT_PREFIX, what the client of the N-th connection
sent (its first 64 KiB) also goes to CLIENT_PREFIX.N, as it comes: frames a
test can replay (tests/tools/attacker.py). Exits after MAX_SECONDS whatever
happens (tests must end).

Usage: record_proxy.py TARGET_PORT PORT_FILE CAPTURE_FILE [MAX_SECONDS [CLIENT_PREFIX]]
"""
import os
import selectors
import socket
import sys
import time


def main():
    target_port = int(sys.argv[1])
    port_file, capture_file = sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + (float(sys.argv[4]) if len(sys.argv) > 4 else 120.0)
    client_prefix = sys.argv[5] if len(sys.argv) > 5 else None
    client_files = {}  # client socket -> [file, bytes recorded]
    connections = 0
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.getsockname()[1]))
    os.rename(tmp, port_file)  # readers never see a half-written port

    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ, None)
    peer = {}  # socket -> the socket its bytes go to
    with open(capture_file, "ab", buffering=0) as capture:
        while time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.2):
                sock = key.fileobj
                if sock is server:
                    client, _ = server.accept()
                    upstream = socket.create_connection(("127.0.0.1", target_port), timeout=5)
                    for s in (client, upstream):
                        s.setblocking(True)
                        s.settimeout(5)
                    peer[client], peer[upstream] = upstream, client
                    if client_prefix and connections < 1000:
                        client_files[client] = [open(f"{client_prefix}.{connections}", "ab",
                                                     buffering=0), 0]
                    connections += 1
                    sel.register(client, selectors.EVENT_READ, None)
                    sel.register(upstream, selectors.EVENT_READ, None)
                    continue
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                other = peer.get(sock)
                if data and other is not None:
                    capture.write(data)
                    record = client_files.get(sock)
                    if record and record[1] < 65536:
                        record[0].write(data[:65536 - record[1]])
                        record[1] += len(data)
                    try:
                        other.sendall(data)
                        continue
                    except OSError:
                        pass
                # One side closed: close both.
                for s in (sock, other):
                    if s is None or s not in peer:
                        continue
                    sel.unregister(s)
                    peer.pop(s, None)
                    if s in client_files:
                        client_files.pop(s)[0].close()
                    s.close()


if __name__ == "__main__":
    main()
