"""Ship each closed log file, and the directory's manifest, to an S3 bucket, under a prefix
per host: ``python examples/ship_to_s3.py BUCKET`` (credentials as boto3 finds them).

blog calls ``upload`` on its housekeeping thread once a file is final (compressed), at
least once per file (docs/file-sets.md, "Shipping closed files"): an upload to the same key
twice is harmless. boto3 is this example's, not a dependency of blog.
"""

import os
import socket
import sys
import time

import blog


def make_upload(bucket: str):
    try:
        import boto3
    except ImportError:
        sys.exit("this example uploads with boto3: pip install boto3")
    s3 = boto3.client("s3")
    prefix = socket.gethostname()

    def upload(path: str) -> None:
        directory, name = os.path.split(path)
        s3.upload_file(path, bucket, f"{prefix}/{name}")
        manifest = os.path.join(directory, "blog-manifest.json")
        if os.path.exists(manifest):   # lets readers of the bucket skip files by time
            s3.upload_file(manifest, bucket, f"{prefix}/blog-manifest.json")

    return upload


def main(bucket: str) -> None:
    blog.basic_config("logs/app.blog", rotate_bytes=1 << 20, compress=True, keep_days=2,
                      on_close=make_upload(bucket))
    log = blog.get_logger("shipping")
    for i in range(100_000):
        log.info("order {} filled at {}", i, 101.25)
        if i % 10_000 == 0:
            time.sleep(0.1)
    blog.shutdown()      # the last file is closed, compressed and shipped before this returns


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__))
