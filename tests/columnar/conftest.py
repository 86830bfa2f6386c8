"""Both twins of the columnar accessors for every test here that asks for `twin`."""

from __future__ import annotations

import pytest

from aioproducer.columnar import arrow
from tests.columnar.tables import TWINS


@pytest.fixture(params=TWINS, ids=lambda twin: twin.name)
def twin(request: pytest.FixtureRequest) -> arrow.Implementation:
    implementation: arrow.Implementation = request.param
    return implementation
