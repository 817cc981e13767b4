// s3rver.mjs — starts s3rver 3.7.1 (the S3 implementation the S3 tests run
// against) on 127.0.0.1 at a free port, storing objects under DIR and
// creating the buckets named after it. Prints {"port": N} on one line once
// it listens, then serves until SIGTERM or SIGINT.
//
// usage: node --openssl-legacy-provider s3rver.mjs DIR BUCKET...
// (s3rver encrypts listing continuation tokens with DES, which OpenSSL 3
// keeps in its legacy provider).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const S3rver = require('s3rver');

const [dir, ...buckets] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node s3rver.mjs DIR BUCKET...');
  process.exit(2);
}
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  directory: dir,
  silent: !process.env.S3RVER_LOG, // S3RVER_LOG=1: log every request
  // The SigV4 proxy in front checks every signature and strips it.
  allowMismatchedSignatures: true,
  vhostBuckets: false,
  configureBuckets: buckets.map((name) => ({ name })),
});
const { port } = await server.run();
console.log(JSON.stringify({ port }));
const stop = async () => {
  await server.close().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
