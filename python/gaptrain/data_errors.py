"""Which errors a dataset raises mean that its store is away for a while
(a connection refused or reset, a timeout, an object store's endpoint
unreachable) rather than that the data or the code is wrong. A trainer
hands its task back to the coordinator on such an error (ReleaseTask:
nothing of the task is credited, the job's status says why) and asks for a
task again after a pause, instead of failing the job."""

import errno

# errno values of a store that is away: the network, or a network file
# system (NFS, EFS) that lost its server.
_UNAVAILABLE_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED,
                       errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN, errno.ETIMEDOUT,
                       errno.EPIPE, errno.ESTALE, errno.EIO}
# Client libraries' own classes, matched by name so that none is imported:
# botocore's (boto3, s3fs) and requests/urllib3's (HTTP stores, fsspec).
_UNAVAILABLE_CLASSES = {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                        "ConnectionClosedError", "NewConnectionError", "MaxRetryError",
                        "ProtocolError"}


def store_unavailable(error):
    """True when `error` says the data's store cannot be reached now."""
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, OSError) and error.errno in _UNAVAILABLE_ERRNOS:
        return True
    return any(c.__name__ in _UNAVAILABLE_CLASSES for c in type(error).__mro__)
