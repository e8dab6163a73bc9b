"""ImageFolder's layout in an S3 bucket: PREFIX/<class>/<name>.png, read
with boto3 (the AWS SDK; any S3-compatible store). A map-style Dataset:
the keys are listed once, sorted, when it is made (the classes are the
folder names, sorted, as ImageFolder's), and sample i is fetched when it
is asked for.

Where the store is: the URL s3://BUCKET/PREFIX, and the endpoint in
$AWS_ENDPOINT_URL (unset: AWS itself). Credentials are boto3's own chain:
$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (on a cluster, from a Secret
through the pod template's env), or the pod's ServiceAccount (IRSA on EKS:
$AWS_ROLE_ARN and $AWS_WEB_IDENTITY_TOKEN_FILE, which EKS injects)."""

import io
import os
import urllib.parse

import boto3
import botocore.config
from PIL import Image


def parse_url(url):
    """(bucket, prefix without a trailing slash) of s3://BUCKET/PREFIX."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError("%r is not an s3://BUCKET/PREFIX URL" % (url,))
    return parts.netloc, parts.path.strip("/")


def client():
    """A boto3 S3 client for $AWS_ENDPOINT_URL (path-style addressing, as
    S3-compatible stores on one host need)."""
    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
                        config=botocore.config.Config(s3={"addressing_style": "path"},
                                                      retries={"max_attempts": 3}))


class S3ImageFolder:
    def __init__(self, url, transform=None):
        self.bucket, self.prefix = parse_url(url)
        self.transform = transform
        keys = []
        pages = client().get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix + "/")
        for page in pages:
            keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(".png")]
        if not keys:
            raise FileNotFoundError("%s: no .png objects" % url)
        keys.sort()
        self.classes = sorted({k[len(self.prefix) + 1:].split("/")[0] for k in keys})
        index = {c: i for i, c in enumerate(self.classes)}
        self.samples = [(k, index[k[len(self.prefix) + 1:].split("/")[0]]) for k in keys]
        self._client, self._pid = None, None

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        # One client per process: a trainer's batches are read in a forked
        # child, and a client does not survive fork.
        if self._pid != os.getpid():
            self._client, self._pid = client(), os.getpid()
        key, label = self.samples[i]
        body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        image = Image.open(io.BytesIO(body)).convert("RGB")  # as ImageFolder's loader
        return (self.transform(image) if self.transform else image), label
