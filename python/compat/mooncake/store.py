"""`mooncake.store` as upstream names it, backed by mooncake_c (see mooncake/__init__.py)."""

from mooncake_c import MooncakeDistributedStore, ReplicateConfig  # noqa: F401

__all__ = ["MooncakeDistributedStore", "ReplicateConfig"]
