"""mooncake_c: Python binding of libmooncake_client, the C client of the Mooncake-compatible
KV-cache store.

Two faces over one library:
  MooncakeDistributedStore  upstream Mooncake Store's class: same method names, arguments and
                            return conventions (int codes, b"" on a miss, integer addresses for
                            the zero-copy calls), so upstream connectors run unchanged;
  Client                    a Pythonic client: exceptions carrying the error name, buffer-protocol
                            values, a context manager.
"""

from ._batch import BufferHandle
from ._core import ReplicateConfig
from .client import Client
from .errors import MooncakeError, ObjectNotFound, error_for
from .store import MooncakeDistributedStore, MooncakeHostMemAllocator

__all__ = ["BufferHandle", "Client", "MooncakeDistributedStore", "MooncakeError",
           "MooncakeHostMemAllocator", "ObjectNotFound", "ReplicateConfig", "error_for",
           "__version__"]

try:
    from ._libpath import VERSION as __version__
except ImportError:  # the source tree, not a built or installed package
    __version__ = "0+unknown"
