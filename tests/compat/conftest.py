"""Fixtures shared by the compat tests. `tmp_path` is replaced by a directory removed at the end
of each test (pytest's own keeps the last runs' directories, and these tests leave nothing)."""

import pathlib
import tempfile

import pytest


@pytest.fixture
def tmp_path():
    with tempfile.TemporaryDirectory(prefix="mc_compat_") as d:
        yield pathlib.Path(d)
