// The objects s3rver holds for the S3 tests run through
// tests/s3/run_with_endpoint.sh (S3_TEST_DIR, S3_BUCKET in the
// environment), read from its data directory: each object is a file
// "<key>._S3rver_object" beside its metadata; uploads in progress live
// under "._S3rver_uploads" and are not objects.
import fs from "node:fs";
import path from "node:path";

const SUFFIX = "._S3rver_object";
const bucketDir = () => path.join(process.env.S3_TEST_DIR, "data", process.env.S3_BUCKET);

// The keys of the objects under a key prefix ([] when none).
export function objectsUnder(prefix) {
  const root = bucketDir();
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith(SUFFIX) && !f.split(path.sep).some((s) => s.startsWith("._S3rver_uploads")))
    .map((f) => f.slice(0, -SUFFIX.length).split(path.sep).join("/"))
    .filter((k) => k.startsWith(prefix));
}

// The bytes of object key (throws when it does not exist).
export const objectBytes = (key) => fs.readFileSync(path.join(bucketDir(), `${key}${SUFFIX}`));

// Replaces the bytes of object key by as many others (s3rver keeps serving
// an object of the length its metadata records).
export function overwriteObject(key, bytes) {
  const file = path.join(bucketDir(), `${key}${SUFFIX}`);
  if (fs.statSync(file).size !== bytes.length) throw new Error(`${key}: not ${bytes.length} bytes long`);
  fs.writeFileSync(file, bytes);
}

// Writes an object straight into s3rver (its own port, S3_UPSTREAM, which
// takes requests without a signature): something no server wrote, such
// as an orphan a test plants.
export async function putObject(key, bytes) {
  const r = await fetch(`${process.env.S3_UPSTREAM}/${process.env.S3_BUCKET}/${key}`, {
    method: "PUT", body: bytes, signal: AbortSignal.timeout(10000),
  });
  if (!r.ok) throw new Error(`PUT ${key} into s3rver: ${r.status}`);
}
