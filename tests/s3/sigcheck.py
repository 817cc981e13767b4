"""sigcheck.py — verifies the AWS SigV4 Authorization header of a request
the test proxy received, with botocore's own S3 signer (S3SigV4Auth)
recomputing the signature from the same credentials.

S3's rules as checked here: the credential scope names the expected access
key, the request's date, the expected region and "s3"; host, x-amz-date,
x-amz-content-sha256 and every x-amz-* header sent are signed; the payload
hash is the body's SHA-256 (or UNSIGNED-PAYLOAD); a session token, when the
proxy expects one, is sent and signed; the request time is within 15
minutes of now; the signature equals botocore's over the canonical request
S3 would build (the path decoded to the key and encoded again, the query
decoded and canonicalized by botocore).
"""
import calendar
import hashlib
import hmac
import re
import time
from urllib.parse import unquote_to_bytes

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials
from botocore.utils import percent_encode

AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;\-]+),\s*Signature=([0-9a-f]{64})$")
UNSIGNED = "UNSIGNED-PAYLOAD"


class AuthError(Exception):
    """A request the proxy refuses: HTTP status, S3 error code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Verifier:
    def __init__(self, access_key, secret_key, region, token=None):
        self.creds = Credentials(access_key, secret_key, token)
        self.access_key, self.region, self.token = access_key, region, token

    def verify(self, method, raw_path, raw_query, headers, body):
        """headers: list of (name, value) as received. Raises AuthError."""
        lower = [(n.lower(), v) for n, v in headers]
        auth = [v for n, v in lower if n == "authorization"]
        if len(auth) != 1:
            raise AuthError(403, "AccessDenied", "Access Denied (no Authorization header)")
        m = AUTH_RE.match(auth[0].strip())
        if not m:
            raise AuthError(400, "AuthorizationHeaderMalformed", "The authorization header is malformed")
        key, date, region, service, signed, signature = m.groups()
        if key != self.access_key:
            raise AuthError(403, "InvalidAccessKeyId",
                            "The AWS Access Key Id you provided does not exist in our records.")
        if region != self.region or service != "s3":
            raise AuthError(400, "AuthorizationHeaderMalformed",
                            f"the region '{region}' is wrong; expecting '{self.region}'")
        amz_date = self._one(lower, "x-amz-date")
        if not amz_date or not re.fullmatch(r"\d{8}T\d{6}Z", amz_date) or amz_date[:8] != date:
            raise AuthError(403, "AccessDenied", "x-amz-date is missing or does not match the scope")
        skew = abs(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")) - time.time())
        if skew > 900:
            raise AuthError(403, "RequestTimeTooSkewed",
                            "The difference between the request time and the current time is too large.")
        signed_names = signed.split(";")
        must_sign = {"host", "x-amz-date", "x-amz-content-sha256"}
        must_sign |= {n for n, _ in lower if n.startswith("x-amz-")}
        missing = sorted(must_sign - set(signed_names))
        if missing:
            raise AuthError(403, "AccessDenied", f"headers not signed: {', '.join(missing)}")
        payload = self._one(lower, "x-amz-content-sha256")
        if payload != UNSIGNED and payload != hashlib.sha256(body).hexdigest():
            raise AuthError(400, "XAmzContentSHA256Mismatch",
                            "The provided 'x-amz-content-sha256' header does not match what was computed.")
        if self.token is not None and self._one(lower, "x-amz-security-token") != self.token:
            raise AuthError(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        want = self._signature(method, raw_path, raw_query, lower, signed_names, body, amz_date)
        if not hmac.compare_digest(want, signature):
            raise AuthError(403, "SignatureDoesNotMatch",
                            "The request signature we calculated does not match the signature you "
                            "provided. Check your key and signing method.")

    @staticmethod
    def _one(lower, name):
        values = [v for n, v in lower if n == name]
        return values[0].strip() if len(values) == 1 else None

    def _signature(self, method, raw_path, raw_query, lower, signed_names, body, amz_date):
        try:
            key_path = unquote_to_bytes(raw_path).decode("utf-8")
        except UnicodeDecodeError:
            raise AuthError(400, "InvalidURI", "Couldn't parse the specified URI.")
        host = self._one(lower, "host") or ""
        request = AWSRequest(method=method, url="http://" + host + percent_encode(key_path, safe="/~"),
                             data=body)
        request.headers = HTTPHeaders()
        for name in signed_names:
            values = [v for n, v in lower if n == name]
            if not values:
                raise AuthError(403, "SignatureDoesNotMatch", f"signed header {name} is missing")
            for v in values:
                request.headers[name] = v
        params = []
        for part in raw_query.split("&") if raw_query else []:
            name, _, value = part.partition("=")
            params.append((unquote_to_bytes(name).decode("utf-8", "replace"),
                           unquote_to_bytes(value).decode("utf-8", "replace")))
        request.params = params
        request.context["timestamp"] = amz_date
        signer = S3SigV4Auth(self.creds, "s3", self.region)
        canonical = signer.canonical_request(request)
        return signer.signature(signer.string_to_sign(request, canonical), request)
