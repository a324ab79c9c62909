"""Writes the .npz archives of the CLI's `run` tests, as numpy writes them.

pair.npz (numpy.savez, stored): `data`, [[1, 2], [3, 4]] as big-endian float32, and `indices`,
[1, 0, 1] as int32. pair_compressed.npz (numpy.savez_compressed, deflated): `table`,
[[0, 1, 2], [3, 4, 5]] as int16 stored in Fortran order, `ids`, [2, -1] as int8,
and `extra`, an unused float64 scalar.

Rerun (from the repository root, with the `numpy` package):
    python3 cli/tests/data/make_npz.py
"""
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
np.savez(
    HERE / "pair.npz",
    data=np.array([[1, 2], [3, 4]], dtype=">f4"),
    indices=np.array([1, 0, 1], dtype=np.int32),
)
np.savez_compressed(
    HERE / "pair_compressed.npz",
    table=np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
    ids=np.array([2, -1], dtype=np.int8),
    extra=np.float64(0.5),
)
