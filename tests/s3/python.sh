#!/usr/bin/env bash
# Runs Python with botocore: Debian's python3 (package python3-botocore)
# when it has it, else the first python3 on PATH that does.
#
# usage: tests/s3/python.sh SCRIPT [ARG...]
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import botocore' 2>/dev/null; then
    exec "$py" "$@"
  fi
done
echo "python.sh: no python3 with botocore (apt-get install python3-botocore)" >&2
exit 1
