"""Upstream Mooncake's import path (`mooncake.store`) served by mooncake_c, so a connector that
does `from mooncake.store import MooncakeDistributedStore` runs without any change.

Not installed by default (it would shadow upstream's own `mooncake` package): configure with
-DMC_PYTHON_UPSTREAM_ALIAS=ON, or put <build>/python-compat on PYTHONPATH.
"""
