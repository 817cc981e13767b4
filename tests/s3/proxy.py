#!/usr/bin/env python3
"""proxy.py — the S3 endpoint the S3 tests talk to: a SigV4-verifying,
fault-injecting HTTP proxy in front of s3rver, on loopback.

Every request's signature is recomputed with botocore (sigcheck.py) from
the credentials in the environment; a mismatch is answered 403
SignatureDoesNotMatch (other auth failures get S3's other codes), so a
wrong signature fails the test that made it. Accepted requests go to
s3rver without their Authorization header (virtual-host requests are
turned path-style), except the calls s3rver lacks, which fakes.py does.

Fault injection, for the tests of failure handling: rules posted to the
control port fire on matching requests ("method", "op" as S3 names the
operation, "key_contains"), each "count" times (default 1; 0: until
cleared), after "delay_ms" when given:
  {"kind": "status", "status": 500, "code": "InternalError"}  an S3 error
  {"kind": "delay", "delay_ms": N}        wait, then answer normally
  {"kind": "cut", "after_bytes": N}       send the head and N body bytes, close
  {"kind": "stall", "after_bytes": N, "delay_ms": M}  ... then wait M ms, close
  {"kind": "reset"}                       close without answering
plus "refuse": the data port stops listening (connection refused) for a
while or until the faults are cleared.

Control port (JSON):
  GET  /state      counters by operation, remaining rules, switches
  GET  /requests   recent requests (method, op, key, query, status)
  POST /faults     add a rule or a list of rules; DELETE /faults clears all
  POST /refuse     {"ms": N} (0: until DELETE /faults or POST /accept)
  POST /accept     listen again
  POST /config     {"fake_upload_part_copy", "fake_abort", "fake_delete_objects",
                    "check_uploads", "fix_first_byte_range": bool}

usage: proxy.py --upstream PORT --s3rver-dir DIR --state FILE [--tls-cert F --tls-key F]
(with a certificate the data port speaks https)
environment: S3PROXY_ACCESS_KEY, S3PROXY_SECRET_KEY, S3PROXY_REGION,
S3PROXY_SESSION_TOKEN (optional), S3PROXY_FAULTS (optional JSON rules).
Writes {"port", "control_port"} to FILE once both listen.
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
import zlib
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, quote, unquote

import fakes
from sigcheck import AuthError, Verifier

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te",
               "upgrade", "authorization", "host", "expect"}
MAX_BODY = 1 << 30


class State:
    """Everything the data and control sides share, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.counts = Counter()
        self.recent = deque(maxlen=2000)
        self.config = {"fake_upload_part_copy": True, "fake_abort": True,
                       "fake_delete_objects": True, "check_uploads": True,
                       "fix_first_byte_range": True}
        self.refuse_until = None  # None: listening; 0: until cleared; else a monotonic time
        self.listener = None

    def take_rule(self, method, op, key):
        with self.lock:
            for rule in self.rules:
                if rule.get("method", method) != method or rule.get("op", op) != op:
                    continue
                if rule.get("key_contains", "") not in key:
                    continue
                if rule.get("count", 1) > 0:
                    rule["count"] = rule.get("count", 1) - 1
                    if rule["count"] == 0:
                        self.rules.remove(rule)
                return dict(rule)
        return None


STATE = State()


def operation(method, query, headers, key):
    if not key:
        if method == "GET" and "list-type" in query:
            return "ListObjectsV2"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        return "Bucket" + method.title()
    if "uploadId" in query:
        if method == "PUT":
            return "UploadPartCopy" if "x-amz-copy-source" in headers else "UploadPart"
        return {"POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload"}.get(method, "Other")
    if method == "POST" and "uploads" in query:
        return "CreateMultipartUpload"
    return {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject",
            "DELETE": "DeleteObject"}.get(method, "Other")


class Upstream:
    """A keep-alive connection to s3rver (one per proxy thread)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def request(self, method, path, headers, body):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                self.conn.request(method, path, body=body or None, headers=headers)
                return self.conn.getresponse()
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def call(self, method, path, headers, body):
        """A whole small exchange: (status, lowercase headers, body)."""
        resp = self.request(method, path, headers, body)
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "runnel-s3-test-proxy"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.serve()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    # ---- answers ----
    def send_error_xml(self, status, code, message, extra_headers=()):
        body = b"" if self.command == "HEAD" else (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            "<Resource>%s</Resource><RequestId>proxy</RequestId></Error>"
            % (code, fakes.xml_escape(message), fakes.xml_escape(self.raw_path))).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.status = status

    def send_body(self, status, body, content_type="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.status = status

    def cut_here(self):
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- the request ----
    def serve(self):
        self.status = 0
        self.raw_path, _, self.raw_query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding") or length > MAX_BODY:
            self.close_connection = True
            return self.send_error_xml(501, "NotImplemented", "chunked or huge bodies are not supported here")
        body = self.rfile.read(length) if length else b""
        bucket, key = self.bucket_and_key()
        query = dict(parse_qsl(self.raw_query, keep_blank_values=True))
        lower = {k.lower(): v for k, v in self.headers.items()}
        op = operation(self.command, query, lower, key)
        with STATE.lock:
            STATE.counts[op] += 1
        rule = STATE.take_rule(self.command, op, key or "")
        try:
            if rule and self.apply_fault_before(rule):
                return
            try:
                STATE.verifier.verify(self.command, self.raw_path, self.raw_query,
                                      list(self.headers.items()), body)
            except AuthError as e:
                return self.send_error_xml(e.status, e.code, e.message)
            try:
                self.route(op, bucket, key, query, lower, body, rule)
            except fakes.S3Answer as e:
                self.send_error_xml(e.status, e.code, e.message)
            except (ConnectionError, OSError, http.client.HTTPException) as e:
                if self.status == 0:
                    self.send_error_xml(503, "ServiceUnavailable", f"s3rver unreachable: {e}")
        finally:
            with STATE.lock:
                STATE.recent.append({"method": self.command, "op": op, "bucket": bucket, "key": key,
                                     "query": self.raw_query, "status": self.status,
                                     "fault": rule["kind"] if rule else None,
                                     "unsigned": lower.get("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"})

    def bucket_and_key(self):
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        path = unquote(self.raw_path)
        self.vhost = host.endswith(".localhost")
        if self.vhost:  # virtual-host addressing
            return host[: -len(".localhost")], path[1:]
        bucket, _, key = path[1:].partition("/")
        return bucket, key

    def apply_fault_before(self, rule):
        """Faults that act before the answer; True when the request is done."""
        time.sleep(rule.get("delay_ms", 0) / 1000.0)
        kind = rule["kind"]
        if kind == "status":
            headers = [("Retry-After", str(rule["retry_after"]))] if "retry_after" in rule else []
            self.send_error_xml(rule.get("status", 500), rule.get("code", "InternalError"),
                                rule.get("message", "injected by the test proxy"), headers)
            return True
        if kind == "reset":
            self.cut_here()
            return True
        return False

    def route(self, op, bucket, key, query, lower, body, rule):
        cfg = STATE.config
        up = self.server.upstream()
        if op in ("UploadPart", "UploadPartCopy", "CompleteMultipartUpload") and cfg["check_uploads"]:
            fakes.require_upload(STATE.s3rver_dir, bucket, query.get("uploadId"))
        if op == "DeleteObjects":
            self.check_content_md5(lower, body)
        if op == "UploadPartCopy" and cfg["fake_upload_part_copy"]:
            return self.send_body(200, fakes.upload_part_copy(up.call, bucket, key, query, lower))
        if op == "AbortMultipartUpload" and cfg["fake_abort"]:
            fakes.abort_upload(STATE.s3rver_dir, bucket, query.get("uploadId"))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.status = 204
            return
        if op == "DeleteObjects" and cfg["fake_delete_objects"]:
            return self.send_body(200, fakes.delete_objects(up.call, bucket, body))
        if op == "GetObject" and cfg["fix_first_byte_range"] and \
                lower.get("range", "").replace(" ", "") == "bytes=0-0":
            return self.first_byte(up, bucket, key)
        self.forward(up, bucket, key, lower, body, rule)

    def first_byte(self, up, bucket, key):
        """GET Range: bytes=0-0, which s3rver answers with the whole object."""
        status, head, data = up.call("GET", "/" + bucket + "/" + quote(key, safe="/~"), {}, b"")
        if status != 200:
            raise fakes.S3Answer(404 if status == 404 else 500,
                                 "NoSuchKey" if status == 404 else "InternalError", "the GET failed")
        if not data:
            raise fakes.S3Answer(416, "InvalidRange", "The requested range is not satisfiable")
        self.send_response(206)
        self.send_header("Content-Range", f"bytes 0-0/{len(data)}")
        self.send_header("ETag", head.get("etag", ""))
        self.send_header("Content-Length", "1")
        self.end_headers()
        self.wfile.write(data[:1])
        self.status = 206

    def check_content_md5(self, lower, body):
        """S3 wants DeleteObjects' body checked: Content-MD5 or a checksum."""
        b64 = lambda digest: base64.b64encode(digest).decode()
        if "content-md5" in lower:
            ok = lower["content-md5"] == b64(hashlib.md5(body).digest())
        elif "x-amz-checksum-crc32" in lower:
            ok = lower["x-amz-checksum-crc32"] == b64(zlib.crc32(body).to_bytes(4, "big"))
        elif "x-amz-checksum-sha256" in lower:
            ok = lower["x-amz-checksum-sha256"] == b64(hashlib.sha256(body).digest())
        else:
            raise fakes.S3Answer(400, "InvalidRequest", "Missing required header for this request: Content-Md5")
        if not ok:
            raise fakes.S3Answer(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")

    def forward(self, up, bucket, key, lower, body, rule):
        path = self.raw_path
        if self.vhost:  # s3rver is asked path-style
            path = "/" + bucket + (self.raw_path if key else "")
        if self.raw_query:
            path += "?" + self.raw_query
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        resp = up.request(self.command, path, headers, body)
        self.send_response(resp.status)
        length = resp.getheader("Content-Length")
        chunked = length is None and self.command != "HEAD" and resp.status not in (204, 304)
        data = resp.read() if chunked else None
        for k, v in resp.getheaders():
            if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
                self.send_header(k, v)
        total = len(data) if chunked else int(length or 0)
        self.send_header("Content-Length", str(total))
        self.end_headers()
        self.status = resp.status
        cut_at = None
        if rule and rule["kind"] in ("cut", "stall"):
            cut_at = rule.get("after_bytes", total // 2)
        sent = 0
        while self.command != "HEAD":
            piece = data[sent:] if chunked else resp.read(256 * 1024)
            if not piece:
                break
            if cut_at is not None and sent + len(piece) >= cut_at:
                self.wfile.write(piece[: cut_at - sent])
                self.wfile.flush()
                if rule["kind"] == "stall":
                    time.sleep(rule.get("delay_ms", 5000) / 1000.0)
                resp.read()  # leave the upstream connection clean
                return self.cut_here()
            self.wfile.write(piece)
            sent += len(piece)
            if chunked:
                break
        if cut_at is not None and self.command != "HEAD":
            self.cut_here()  # the body was shorter than the cut point: cut after it


class DataServer:
    """The data port: accepts connections (one thread each) unless refusing.
    Refusing closes the listening socket and every open connection, so
    neither new nor kept-alive connections reach the proxy until it listens
    again on the same port."""

    def __init__(self, upstream_port, tls=None):
        self.upstream_port = upstream_port
        self.tls = tls  # an ssl.SSLContext for https, or None
        self.local = threading.local()
        self.sock = self.listen(0)
        self.port = self.sock.getsockname()[1]
        self.conns = set()
        self.closed = threading.Event()
        self.listening = threading.Event()
        self.listening.set()

    def upstream(self):
        if not hasattr(self.local, "up"):
            self.local.up = Upstream(self.upstream_port)
        return self.local.up

    def listen(self, port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(128)
        s.settimeout(0.05)
        return s

    def refuse(self, ms):
        """Returns once nothing listens and every connection is closed."""
        self.closed.clear()
        with STATE.lock:
            STATE.refuse_until = 0 if not ms else time.monotonic() + ms / 1000.0
            for conn in list(self.conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.closed.wait(5)

    def accept_again(self):
        """Returns once the data port listens again."""
        with STATE.lock:
            refusing = STATE.refuse_until is not None
            STATE.refuse_until = None
            if refusing:
                self.listening.clear()
        self.listening.wait(5)

    def serve_forever(self):
        while True:
            with STATE.lock:
                until = STATE.refuse_until
                if until and time.monotonic() >= until:
                    STATE.refuse_until = until = None
            if until is not None:
                if self.sock is not None:
                    self.sock.close()
                    self.sock = None
                self.closed.set()
                time.sleep(0.02)
                continue
            if self.sock is None:
                self.sock = self.listen(self.port)
                self.listening.set()
            try:
                conn, addr = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            conn.settimeout(None)
            threading.Thread(target=self.handle, args=(conn, addr), daemon=True).start()

    def handle(self, conn, addr):
        try:
            if self.tls:
                conn.settimeout(10)
                conn = self.tls.wrap_socket(conn, server_side=True)
                conn.settimeout(None)
            with STATE.lock:
                self.conns.add(conn)
            Handler(conn, addr, self)
        except (ConnectionError, OSError):  # ssl.SSLError is an OSError
            pass
        finally:
            with STATE.lock:
                self.conns.discard(conn)
            conn.close()


def control_handler(data_server):
    class Control(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            pass

        def answer(self, obj, status=200):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def read_json(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"null")

        def do_GET(self):
            with STATE.lock:
                if self.path == "/state":
                    return self.answer({"counts": dict(STATE.counts), "faults": STATE.rules,
                                        "config": STATE.config,
                                        "refusing": STATE.refuse_until is not None})
                if self.path == "/requests":
                    return self.answer(list(STATE.recent))
            self.answer({"error": "not found"}, 404)

        def do_POST(self):
            body = self.read_json()
            if self.path == "/faults":
                rules = body if isinstance(body, list) else [body]
                with STATE.lock:
                    STATE.rules.extend(rules)
                return self.answer({"faults": len(STATE.rules)})
            if self.path == "/refuse":
                data_server.refuse((body or {}).get("ms", 0))
                return self.answer({"refusing": True})
            if self.path == "/accept":
                data_server.accept_again()
                return self.answer({"refusing": False})
            if self.path == "/config":
                with STATE.lock:
                    unknown = set(body) - set(STATE.config)
                    if unknown:
                        return self.answer({"error": f"unknown switches {sorted(unknown)}"}, 400)
                    STATE.config.update(body)
                    return self.answer(STATE.config)
            self.answer({"error": "not found"}, 404)

        def do_DELETE(self):
            if self.path == "/faults":
                with STATE.lock:
                    STATE.rules.clear()
                data_server.accept_again()
                return self.answer({"faults": 0})
            if self.path == "/requests":
                with STATE.lock:
                    STATE.recent.clear()
                    STATE.counts.clear()
                return self.answer({})
            self.answer({"error": "not found"}, 404)

    return Control


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", type=int, required=True)
    ap.add_argument("--s3rver-dir", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    args = ap.parse_args()
    env = os.environ
    STATE.verifier = Verifier(env["S3PROXY_ACCESS_KEY"], env["S3PROXY_SECRET_KEY"],
                              env.get("S3PROXY_REGION", "us-east-1"),
                              env.get("S3PROXY_SESSION_TOKEN") or None)
    STATE.s3rver_dir = args.s3rver_dir
    if env.get("S3PROXY_FAULTS"):
        STATE.rules.extend(json.loads(env["S3PROXY_FAULTS"]))
    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    data = DataServer(args.upstream, tls)
    control = ThreadingHTTPServer(("127.0.0.1", 0), control_handler(data))
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    tmp = args.state + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"port": data.port, "control_port": control.server_address[1]}, f)
    os.rename(tmp, args.state)
    data.serve_forever()


if __name__ == "__main__":
    main()
