"""The safetensors format, read and written with NumPy alone: an 8-byte little-endian header size, a JSON header
naming each tensor's dtype, shape and byte range, then the bytes (https://github.com/huggingface/safetensors). Each
tensor is read on its own from a memory map, so loading a checkpoint holds one tensor at a time beside the model;
bfloat16 is ``ml_dtypes.bfloat16`` (which JAX brings)."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping

import ml_dtypes
import numpy as np

from rfa._validation import InputError

DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
NAMES = {np.dtype(dtype): name for name, dtype in DTYPES.items()}


def tensor_index(path: str) -> dict[str, dict]:
    """``{name: {"dtype", "shape", "data_offsets"}}`` of the file at ``path`` (the header's ``__metadata__`` left
    out), offsets from the start of the file.

    Example:
      >>> import tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
      >>> write_tensors(path, {"w": np.ones((2, 3), np.float32)})
      >>> tensor_index(path)["w"]["shape"]
      [2, 3]
    """
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise InputError(f"{path} is not a safetensors file: it holds {len(head)} bytes.")
        (size,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(size))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise InputError(f"{path} is not a safetensors file: its header is not JSON ({error}).") from None
    start, index = 8 + size, {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in DTYPES:
            raise InputError(f"{path}: tensor {name!r} has dtype {entry['dtype']}, which rfa does not read.")
        begin, end = entry["data_offsets"]
        index[name] = {**entry, "data_offsets": [start + begin, start + end]}
    return index


def read_tensor(path: str, entry: Mapping) -> np.ndarray:
    """One tensor of :func:`tensor_index`'s ``entry``, a copy in memory (the file's map closed)."""
    begin, end = entry["data_offsets"]
    dtype = np.dtype(DTYPES[entry["dtype"]])
    count = int(np.prod(entry["shape"], dtype=np.int64))
    if end - begin != count * dtype.itemsize:
        raise InputError(
            f"{path}: a tensor of shape {entry['shape']} and dtype {entry['dtype']} spans {end - begin} bytes."
        )
    data = np.memmap(path, dtype=dtype, mode="r", offset=begin, shape=(count,)) if count else np.zeros(0, dtype)
    return np.array(data).reshape(entry["shape"])


def iter_checkpoint(directory: str) -> Iterator[tuple[str, str, dict]]:
    """``(name, file, entry)`` of every tensor of a Hugging Face directory: ``model.safetensors``, or the shards
    that ``model.safetensors.index.json`` names."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(directory, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise InputError(f"{directory} holds neither model.safetensors nor model.safetensors.index.json.")
    for file in files:
        path = os.path.join(directory, file)
        for name, entry in tensor_index(path).items():
            yield name, path, entry


def write_tensors(path: str, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> None:
    """Writes ``tensors`` (NumPy arrays, bfloat16 included) to a safetensors file at ``path``, in name order."""
    header, offset, arrays = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        if array.dtype not in NAMES:
            raise InputError(f"tensor {name!r}: dtype {array.dtype} has no safetensors name.")
        header[name] = {
            "dtype": NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
        arrays.append(array)
    if metadata:
        header["__metadata__"] = dict(metadata)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as the safetensors writers do
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for array in arrays:
            f.write(array.tobytes())
