"""A tiny TCP proxy for tests: forwards connections to memd, remembers each request's head, and
cuts every open connection on demand (a dropped network, as a client sees it)."""

from __future__ import annotations

import socket
import threading


class CuttingProxy:
    def __init__(self, upstream_url: str) -> None:
        host, port = upstream_url.split("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.heads: list[str] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, request: bool) -> None:
        head = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if request and b"\r\n\r\n" not in head:
                    head += data
                    if b"\r\n\r\n" in head:
                        with self._lock:
                            self.heads.append(head.split(b"\r\n\r\n")[0].decode("latin-1"))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Closes every open connection, both sides, at once."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def header(self, head: str, name: str) -> str | None:
        for line in head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name.lower():
                return v.strip()
        return None

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        self.cut()
