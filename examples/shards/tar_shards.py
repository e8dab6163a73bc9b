"""TarShards: tar shards of KEY.png + KEY.cls samples (make_shards.py,
WebDataset's layout) read as streams, from a directory or an S3 bucket, as
a gaptrain.ShardedDataset: shard(i) opens shard i and yields its samples
as the tar goes by, never holding more than one image.

Where the shards are: a directory, or s3://BUCKET/PREFIX with the endpoint
in $AWS_ENDPOINT_URL (unset: AWS itself). Credentials are boto3's own
chain: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (on a cluster, from a
Secret through the pod template's env), or the pod's ServiceAccount (IRSA
on EKS: $AWS_ROLE_ARN and $AWS_WEB_IDENTITY_TOKEN_FILE)."""

import io
import logging
import os
import sys
import tarfile
import time

from PIL import Image

import gaptrain

# The store's URL and client, as examples/image_folder reads its store.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..",
                                "image_folder"))
from s3_image_folder import client as s3_client, parse_url  # noqa: E402


class TarShards(gaptrain.ShardedDataset):
    """The shards SOURCE/SPLIT-*.tar, sorted by name; sample = (transform(image), label)."""

    def __init__(self, source, split, transform=None):
        self.source, self.transform = source, transform
        self._client, self._pid = None, None
        if source.startswith("s3://"):
            self.bucket, prefix = parse_url(source)
            self.prefix = prefix + "/" if prefix else ""
            names = self._list_store(split)
        else:
            self.bucket = None
            names = os.listdir(source) if os.path.isdir(source) else []
        self.names = sorted(n for n in names if n.startswith(split + "-") and n.endswith(".tar"))
        if not self.names:
            raise FileNotFoundError("%s: no %s-*.tar shards (make_shards.py writes them)"
                                    % (source, split))
        super().__init__(len(self.names))

    def _list_store(self, split):
        """The names of SPLIT's shards in the store. A trainer started while
        the store is away (a pod replaced during an outage) waits for it,
        as running trainers do for their shards, instead of failing."""
        delay = 0.5
        while True:
            try:
                names = []
                pages = self._s3().get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=self.prefix + split + "-")
                for page in pages:
                    names += [o["Key"][len(self.prefix):] for o in page.get("Contents", [])]
                return names
            except Exception as e:  # noqa: BLE001: only a store that is away is retried
                if not gaptrain.store_unavailable(e):
                    raise
                logging.getLogger(__name__).warning(
                    "%s: the store cannot be reached (%s: %s); listing again in %.1f s",
                    self.source, type(e).__name__, e, delay)
                time.sleep(delay)
                delay = min(10.0, delay * 2)

    def _s3(self):
        # One client per process: a trainer's batches are read in a forked
        # child, and a client does not survive fork.
        if self._pid != os.getpid():
            self._client, self._pid = s3_client(), os.getpid()
        return self._client

    def _open(self, name):
        if self.bucket is None:
            return open(os.path.join(self.source, name), "rb")
        return self._s3().get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]

    def shard(self, index):
        stream = self._open(self.names[index])
        try:
            image, key = None, None
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    stem, _, kind = member.name.rpartition(".")
                    data = tar.extractfile(member).read()
                    if kind == "png":
                        image, key = Image.open(io.BytesIO(data)).convert("L"), stem
                    elif kind == "cls" and stem == key:
                        yield (self.transform(image) if self.transform else image), int(data)
                        image, key = None, None
        finally:
            stream.close()
