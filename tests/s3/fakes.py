"""fakes.py — the S3 calls s3rver 3.7.1 lacks or gets wrong, done by the
test proxy on top of s3rver's own calls and data directory:

- UploadPartCopy (s3rver: 501 NotImplemented): HEAD the source, GET the
  x-amz-copy-source-range bytes of it, PUT them as the part; answers
  CopyPartResult with the part's ETag.
- AbortMultipartUpload (s3rver: 405): removes the upload's directory.
- DeleteObjects (s3rver: an occasional 500 when keys share a prefix, its
  deletes racing to remove the same empty directory): one DeleteObject per
  key, in order.
- GET with Range: bytes=0-0 (s3rver answers the whole object, taking the
  end 0 for "no end"): the first byte, 206 (proxy.py, first_byte).
- The NoSuchUpload answer s3rver never gives (it creates a part of any
  upload id): UploadPart, UploadPartCopy and CompleteMultipartUpload of an
  unknown or aborted upload get 404 NoSuchUpload.

Each fake can be switched off (proxy control POST /config) so the tests
also see s3rver's own answer.
"""
import os
import re
import shutil
import xml.etree.ElementTree as ET
from email.utils import formatdate
from urllib.parse import quote, unquote

S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3Answer(Exception):
    """An S3 error answer: status, code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def upload_dir(s3rver_dir, bucket, upload_id):
    if not re.fullmatch(r"[0-9a-f]{32}", upload_id or ""):
        return None
    return os.path.join(s3rver_dir, bucket, "._S3rver_uploads", upload_id)


def require_upload(s3rver_dir, bucket, upload_id):
    d = upload_dir(s3rver_dir, bucket, upload_id)
    if not d or not os.path.isdir(d):
        raise S3Answer(404, "NoSuchUpload", "The specified upload does not exist.")


def abort_upload(s3rver_dir, bucket, upload_id):
    require_upload(s3rver_dir, bucket, upload_id)
    shutil.rmtree(upload_dir(s3rver_dir, bucket, upload_id))


def upload_part_copy(upstream, bucket, key, query, headers):
    """upstream(method, path, headers, body) -> (status, headers, body).
    Returns the CopyPartResult XML."""
    source = headers.get("x-amz-copy-source", "")
    source = unquote(source.split("?", 1)[0]).lstrip("/")
    src_bucket, _, src_key = source.partition("/")
    if not src_bucket or not src_key:
        raise S3Answer(400, "InvalidArgument", "Copy Source must mention the source bucket and key")
    src_path = "/" + quote(src_bucket) + "/" + quote(src_key, safe="/~")
    status, head, _ = upstream("HEAD", src_path, {}, b"")
    if status == 404:
        raise S3Answer(404, "NoSuchKey", "The specified key does not exist.")
    if status != 200:
        raise S3Answer(500, "InternalError", f"source HEAD answered {status}")
    size = int(head.get("content-length", "0"))
    get_headers = {}
    wanted = headers.get("x-amz-copy-source-range")
    if wanted is not None:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", wanted.strip())
        if not m or int(m.group(1)) > int(m.group(2)) or int(m.group(2)) >= size:
            raise S3Answer(400, "InvalidArgument",
                           f"Range specified is not valid for source object of size: {size}")
        get_headers["Range"] = wanted.strip()
    status, _, data = upstream("GET", src_path, get_headers, b"")
    if status not in (200, 206):
        raise S3Answer(500, "InternalError", f"source GET answered {status}")
    part_path = (f"/{quote(bucket)}/{quote(key, safe='/~')}?partNumber={query['partNumber']}"
                 f"&uploadId={query['uploadId']}")
    status, put_head, _ = upstream("PUT", part_path, {"Content-Length": str(len(data))}, data)
    if status != 200:
        raise S3Answer(500, "InternalError", f"part PUT answered {status}")
    etag = put_head.get("etag", "")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<CopyPartResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<LastModified>{formatdate(usegmt=True)}</LastModified><ETag>{xml_escape(etag)}</ETag>"
            f"</CopyPartResult>").encode()


def delete_objects(upstream, bucket, body):
    """One DeleteObject per key of a Delete document; returns DeleteResult."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise S3Answer(400, "MalformedXML", "The XML you provided was not well-formed")
    if root.tag.replace(S3_NS, "") != "Delete":
        raise S3Answer(400, "MalformedXML", "The XML you provided was not well-formed")
    quiet = (root.findtext("Quiet") or root.findtext(S3_NS + "Quiet") or "").strip() == "true"
    keys = [o.findtext("Key") if o.find("Key") is not None else o.findtext(S3_NS + "Key")
            for o in list(root) if o.tag.replace(S3_NS, "") == "Object"]
    if not keys or len(keys) > 1000:
        raise S3Answer(400, "MalformedXML", "a Delete names 1 to 1000 objects")
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">']
    for key in keys:
        status, _, _ = upstream("DELETE", "/" + quote(bucket) + "/" + quote(key, safe="/~"), {}, b"")
        if status in (200, 204, 404):
            if not quiet:
                out.append(f"<Deleted><Key>{xml_escape(key)}</Key></Deleted>")
        else:
            out.append(f"<Error><Key>{xml_escape(key)}</Key><Code>InternalError</Code>"
                       f"<Message>delete answered {status}</Message></Error>")
    out.append("</DeleteResult>")
    return "".join(out).encode()


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))
