"""`mooncake.store` as upstream names it, backed by mooncake_c (see mooncake/__init__.py)."""

from mooncake_c import (BufferHandle, MooncakeDistributedStore,  # noqa: F401
                        MooncakeHostMemAllocator, ReplicateConfig)

__all__ = ["BufferHandle", "MooncakeDistributedStore", "MooncakeHostMemAllocator",
           "ReplicateConfig"]
