"""Every code family refuses bad parameters and input with a clear error."""

from __future__ import annotations

import pytest

from embcompress import InputError, from_spec


faiss = pytest.importorskip("faiss")


def test_code_families_refuse_bad_input(code_data):
    D, _ = code_data
    with pytest.raises(InputError, match="pq needs at least 256 rows to fit"):
        from_spec("pq:8").fit(D[:100])
    with pytest.raises(
        InputError, match=r"pq:7 needs m to divide the width 48 .*allowed m: 1, 2, 3, 4, 6, 8, 12, 16, 24, 48"
    ):
        from_spec("pq:7").fit(D)
    with pytest.raises(InputError, match="nbits must be 4 or 8"):
        from_spec("opq:8:nbits=6").fit(D)
    with pytest.raises(InputError, match="sq bits must be one of 1, 2, 4 per dimension, got 3"):
        from_spec("sq:3").fit(D)
    with pytest.raises(InputError, match="rabitq bits must be one of 1, 2, 3, 4 per dimension, got 9"):
        from_spec("rabitq:bits=9").fit(D)
    with pytest.raises(InputError, match="itq does not take dim"):
        from_spec("itq:dim=5")
