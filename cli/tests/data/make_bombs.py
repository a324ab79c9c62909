"""Writes bomb.npz, the archive bomb of the CLI's file-policy tests (tests/special_files.rs):
a member `data.npy` whose .npy header announces 96 bytes ([4, 6] <f4) but which inflates to
2,000,000,000 bytes (deflated to about 1.9 MB), declared honestly in the archive; and `ids.npy`,
valid ([1] <i8). The tests also make its lying twin, whose archive declares the 224 bytes the
header announces, by patching the two size fields (`lying_bomb` there).

Rerun (from the repository root; Python's standard library only):
    python3 cli/tests/data/make_bombs.py
"""
import struct
import zipfile
import zlib
from pathlib import Path

HERE = Path(__file__).parent
INFLATED = 2_000_000_000


def npy_header(descr, shape):
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    text += " " * (64 - (10 + len(text) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode()


def bomb_member():
    """The deflated member and its CRC: the header, then INFLATED - 128 zero bytes."""
    header = npy_header("<f4", "(4, 6)")
    assert len(header) == 128
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = zlib.crc32(header)
    out = [compressor.compress(header)]
    chunk = bytes(1 << 24)
    left = INFLATED - len(header)
    while left:
        piece = chunk[: min(left, len(chunk))]
        crc = zlib.crc32(piece, crc)
        out.append(compressor.compress(piece))
        left -= len(piece)
    out.append(compressor.flush())
    return b"".join(out), crc & 0xFFFFFFFF


def write(path, deflated, crc, declared):
    """A zip of `data.npy` (the deflated bytes, `declared` bytes inflated) and `ids.npy`."""
    ids = npy_header("<i8", "(1,)") + struct.pack("<q", 0)
    name = b"data.npy"
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), declared, len(name), 0
    )
    body = local + name + deflated
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), declared, len(name), 0, 0, 0, 0, 0, 0,
    ) + name
    # ids.npy, stored, after data.npy.
    ids_name = b"ids.npy"
    ids_crc = zlib.crc32(ids) & 0xFFFFFFFF
    ids_at = len(body)
    body += struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, ids_crc, len(ids), len(ids), len(ids_name), 0
    ) + ids_name + ids
    central += struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50, 20, 20, 0, 0, 0, 0, ids_crc, len(ids), len(ids), len(ids_name), 0, 0, 0, 0, 0,
        ids_at,
    ) + ids_name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(central), len(body), 0)
    path.write_bytes(body + central + end)
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ["data.npy", "ids.npy"]


deflated, crc = bomb_member()
write(HERE / "bomb.npz", deflated, crc, INFLATED)
