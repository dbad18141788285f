"""README's compatibility table (between the compat-table markers) against the binding: every
method marked same, differs or added is a method of MooncakeDistributedStore, every refused one
exists (and answers an error), every not-supported one is absent, and every public method of the
class is in the table. Adding or removing a method without updating the table fails here."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
STATES = {"same", "differs", "refused", "not supported", "added"}


def _rows():
    with open(README) as f:
        text = f.read()
    m = re.search(r"<!-- compat-table-begin -->\n(.*?)<!-- compat-table-end -->", text, re.S)
    assert m, "README has no compatibility table markers"
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("upstream", "---"):
            continue
        names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
        assert names, "a row without method names: %r" % line
        assert cells[1] in STATES, "unknown state %r in %r" % (cells[1], line)
        rows.extend((n, cells[1]) for n in names)
    return rows


def test_table_matches_the_binding():
    import mooncake_c
    from mooncake_c import MooncakeDistributedStore
    rows = _rows()
    listed = [n for n, _ in rows]
    assert len(listed) == len(set(listed)), "a method listed twice"
    for name, state in rows:
        present = hasattr(MooncakeDistributedStore, name) or hasattr(mooncake_c, name)
        if state in ("same", "differs", "refused", "added"):
            assert present, "%s is marked %s but the binding has no such attribute" % (name,
                                                                                     state)
        else:
            assert not present, "%s is marked not supported but the binding has it" % name
    public = {n for n in dir(MooncakeDistributedStore)
              if not n.startswith("_") and callable(getattr(MooncakeDistributedStore, n))}
    missing = public - set(listed)
    assert not missing, "methods missing from README's table: %s" % sorted(missing)


def test_refused_methods_say_why():
    from mooncake_c import MooncakeDistributedStore, MooncakeHostMemAllocator
    assert MooncakeDistributedStore().setup_dummy(1 << 20, 1 << 20, "127.0.0.1:1") == -1012
    with pytest.raises(NotImplementedError, match="standalone mode"):
        MooncakeHostMemAllocator()


def test_replicate_config_fields():
    from mooncake_c import ReplicateConfig
    c = ReplicateConfig()
    for f in ("replica_num", "with_soft_pin", "soft_pin_action", "preferred_segment",
              "preferred_segments", "group_ids", "prefer_alloc_in_same_node"):
        assert hasattr(c, f), f
    c.group_ids = ["g"]
    with pytest.raises(AttributeError):
        c.not_a_field = 1
