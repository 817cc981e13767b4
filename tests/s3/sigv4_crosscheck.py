#!/usr/bin/env python3
"""Cross-checks Runnel's SigV4 signer (src/tiers/s3/sigv4.c, through the
test-only CLI runnel-sigv4) against botocore's S3SigV4Auth, byte for byte,
over many generated S3 requests: odd keys (spaces, unicode, ~ + = & % ? #,
empty and dot segments), queries with repeated, empty and odd values,
ranges, UploadPartCopy headers, odd header spacing and case, repeated
headers, session tokens, signed and unsigned payloads, several regions.

Botocore gets the path as S3 clients send it (the key percent-encoded with
'/' and '~' kept) and the query as parameters it encodes itself; runnel-sigv4
gets the raw path and raw parameters, so the encoding is checked too.

usage: sigv4_crosscheck.py --cli build/tests/runnel-sigv4 [--count N] [--seed S]
Ends with "N passed, M failed"; exits 1 on any mismatch.
"""
import argparse
import hashlib
import json
import random
import subprocess
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials
from botocore.utils import percent_encode

KEY_PIECES = ["a", "Z", "0", " ", "  ", "~", "+", "=", "&", "%", "%20", "?", "#", "*", "'",
              "(", ")", "!", "$", "@", ":", ";", ",", "é", "日本", "🎉", "/", "//", ".", "..",
              "-", "_", "[", "]", "{", "}", "|", "^", "`", "\\", '"', "<", ">", "\u00a0"]
QUERY_NAMES = ["prefix", "list-type", "continuation-token", "max-keys", "uploadId",
               "partNumber", "delete", "uploads", "start-after", "x", "a b", "é", "k~", "k+"]
REGIONS = ["us-east-1", "eu-west-3", "auto", "us-gov-west-1", "ap-southeast-2"]


def odd_text(rng, n_max=8):
    return "".join(rng.choice(KEY_PIECES) for _ in range(rng.randint(1, n_max)))


def odd_spacing(rng, value):
    pad = lambda: rng.choice(["", " ", "  ", "\t", " \t "])
    inner = value.replace(" ", rng.choice([" ", "  ", "\t", " \t"]))
    return pad() + inner + pad()


def case(rng, name):
    return "".join(c.upper() if rng.random() < 0.3 else c for c in name)


def generate(rng, i):
    bucket = rng.choice(["runnel-test", "b", "my.bucket-1"])
    vhost = rng.random() < 0.5
    host = rng.choice([f"{bucket}.s3.amazonaws.com", f"{bucket}.localhost:9000"]) if vhost \
        else rng.choice(["s3.amazonaws.com", "127.0.0.1:4568", "[::1]:9000"])
    key = odd_text(rng, 12)
    path = "/" + key if vhost else f"/{bucket}/{key}"
    kind = rng.choice(["get", "put", "list", "copy", "multi", "delete", "head"])
    method = {"get": "GET", "put": "PUT", "list": "GET", "copy": "PUT", "multi": "POST",
              "delete": "POST", "head": "HEAD"}[kind]
    query, headers = [], []
    body = b""
    if kind == "get":
        a = rng.randint(0, 1 << 40)
        headers.append(["Range", f"bytes={a}-{a + rng.randint(0, 1 << 24)}"])
    elif kind == "put":
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        headers.append(["Content-Type", rng.choice(["application/octet-stream", "text/plain; charset=utf-8"])])
    elif kind == "list":
        path = "/" if vhost else f"/{bucket}"
        query += [["list-type", "2"], ["prefix", odd_text(rng)]]
        if rng.random() < 0.5:
            query.append(["continuation-token", "1" + odd_text(rng) + "+/=="])
        if rng.random() < 0.5:
            query.append(["max-keys", str(rng.randint(1, 1000))])
    elif kind == "copy":
        query += [["partNumber", str(rng.randint(1, 10000))], ["uploadId", odd_text(rng) + "~.-_"]]
        src = percent_encode(f"/{bucket}/{odd_text(rng)}", safe="/~")
        a = rng.randint(0, 1 << 30)
        headers += [["x-amz-copy-source", src],
                    ["x-amz-copy-source-range", f"bytes={a}-{a + rng.randint(0, 1 << 26)}"]]
    elif kind == "multi":
        query.append(["uploads", None if rng.random() < 0.5 else ""])
    elif kind == "delete":
        path = "/" if vhost else f"/{bucket}"
        query.append(["delete", ""])
        body = b"<Delete><Object><Key>" + key.encode() + b"</Key></Object></Delete>"
        headers.append(["Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="])
    for _ in range(rng.randint(0, 3)):  # random extra parameters, repeats and empties
        name = rng.choice(QUERY_NAMES)
        query.append([name, rng.choice([None, "", odd_text(rng), "v"])])
    for _ in range(rng.randint(0, 2)):  # repeated and oddly spaced headers
        name = rng.choice(["x-amz-meta-a", "x-amz-meta-b c", "X-Amz-Meta-Long"])
        headers.append([name.replace(" ", "-"), odd_spacing(rng, rng.choice(["v", "two words", "a  b   c"]))])
    unsigned = method == "PUT" and rng.random() < 0.3
    payload = "UNSIGNED-PAYLOAD" if unsigned else hashlib.sha256(body).hexdigest()
    amz_date = f"20{rng.randint(13, 39):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}T" \
               f"{rng.randint(0, 23):02d}{rng.randint(0, 59):02d}{rng.randint(0, 59):02d}Z"
    headers += [["Host", host], ["x-amz-date", amz_date], ["X-Amz-Content-SHA256", payload]]
    token = None
    if rng.random() < 0.3:
        token = "FwoGZXIvYXdzE" + "".join(rng.choice("AZaz09+/=") for _ in range(40))
        headers.append(["x-amz-security-token", token])
    rng.shuffle(headers)
    secret = "".join(rng.choice("ABCxyz0189+/") for _ in range(40))
    return {"method": method, "path": path, "query": query, "headers": [[case(rng, n), v] for n, v in headers],
            "payload_hash": payload, "amz_date": amz_date, "access_key": f"AKIA{i:016d}",
            "secret_key": secret, "region": rng.choice(REGIONS), "service": "s3",
            "_token": token, "_body": body.hex()}


def botocore_sign(r):
    creds = Credentials(r["access_key"], r["secret_key"], r["_token"])
    host = next(v for n, v in r["headers"] if n.lower() == "host")
    url = "http://" + host + percent_encode(r["path"], safe="/~")
    req = AWSRequest(method=r["method"], url=url, data=bytes.fromhex(r["_body"]))
    req.headers = HTTPHeaders()
    for name, value in r["headers"]:
        req.headers[name] = value  # appends: repeated headers stay repeated
    req.params = [(n, "" if v is None else v) for n, v in r["query"]]
    req.context["timestamp"] = r["amz_date"]
    auth = S3SigV4Auth(creds, "s3", r["region"])
    canonical = auth.canonical_request(req)
    signature = auth.signature(auth.string_to_sign(req, canonical), req)
    signed = auth.signed_headers(auth.headers_to_sign(req))
    scope = f"{r['access_key']}/{r['amz_date'][:8]}/{r['region']}/s3/aws4_request"
    return (f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={signed}, Signature={signature}",
            canonical)


def run_cli(cli, requests, flag=None):
    lines = "".join(json.dumps({k: v for k, v in r.items() if not k.startswith("_")}) + "\n"
                    for r in requests)
    out = subprocess.run([cli] + ([flag] if flag else []), input=lines.encode(),
                         capture_output=True, check=True, timeout=120)
    return out.stdout.decode().splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    print(f"seed {seed}")
    requests = [generate(rng, i) for i in range(args.count)]
    ours = run_cli(args.cli, requests)
    passed = failed = 0
    for i, r in enumerate(requests):
        want, canonical = botocore_sign(r)
        if ours[i] == want:
            passed += 1
            continue
        failed += 1
        if failed <= 3:
            mine = json.loads(run_cli(args.cli, [r], "-c")[0])
            print(f"MISMATCH request {i}: {json.dumps(r, ensure_ascii=False)}\n"
                  f"  botocore: {want}\n  runnel:   {ours[i]}\n"
                  f"  botocore canonical:\n{canonical}\n  runnel canonical:\n{mine}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
