"""kpatch's schema reader against torch's own (torch._C.parse_schema) on vLLM's Kimi-K3 MLA schemas."""

from __future__ import annotations

import pytest
import torch

from kpatch.verify.contract import schema
from kpatch.verify.contract.schema import Alias
from tests.support.kimi_schemas import KIMI, kimi


@pytest.mark.parametrize("name", sorted(KIMI))
def test_kimi_schema_parses_like_torch(name: str) -> None:
    mine = schema.parse(kimi(name))
    theirs = torch._C.parse_schema(kimi(name))
    assert mine.name == name and mine.returns == ()
    assert [a.name for a in mine.args] == [a.name for a in theirs.arguments]
    assert [a.default is not None for a in mine.args] == [a.has_default_value() for a in theirs.arguments]
    assert [a.alias is Alias.WRITE for a in mine.args] == [bool(a.alias_info and a.alias_info.is_write)
                                                           for a in theirs.arguments]
    assert [a.optional for a in mine.args] == [str(a.type).startswith("Optional") for a in theirs.arguments]
    assert schema.parse(mine.text()) == mine  # the canonical text reads back the same
