"""A trained model's files without its training data: ``model.save(path)``.

The folder holds plain files that load on any machine with ``vaells_jax``:

- ``config.json``: the :class:`~vaells_jax.config.Config`, as a run's;
- ``params.npz``: the parameters (network, anchors, ``psi``), one array per
  leaf, named by its path in the nested dict (``encoder/Dense_0/kernel``);
- ``input_map.json``: the map between the user's units and the training
  units (:class:`~vaells_jax.data.conditioning.InputMap`), when there is one;
- ``model.json``, written last: the format and its version, the model kind,
  the input width ``D``, the verdict, and the SHA-256 of each file above.

No ``dataset.npz`` and no training checkpoint (no optimiser state). The
folder is written whole into a temporary folder beside it and renamed into
place, so a reader sees the old folder or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from vaells_jax.config import CONFIG_NAME, Config, config_from_json
from vaells_jax.data.conditioning import INPUT_MAP_NAME, InputMap
from vaells_jax.data.files import atomic_write, atomic_write_text, refuse_symlink

__all__ = [
  "MODEL_NAME",
  "PARAMS_NAME",
  "NoTrainingData",
  "SavedModel",
  "is_saved_model",
  "read_saved_model",
  "write_saved_model",
]

MODEL_NAME = "model.json"  # marks a folder that model.save wrote; written last
PARAMS_NAME = "params.npz"
FORMAT = "vaells_jax saved model"
VERSION = 1


class SavedModel(NamedTuple):
  """What a saved model's folder holds.

  Attributes:
    config: the training configuration.
    params: nested dicts of NumPy arrays (as the model's ``params``).
    data_dim: the input width ``D``.
    input_map: the map to the training units, or None.
    verdict: the run's verdict (VAELLS), or None.
  """

  config: Config
  params: dict[str, Any]
  data_dim: int
  input_map: InputMap | None = None
  verdict: dict[str, Any] | None = None


class NoTrainingData:
  """The ``data`` of a model loaded from a folder ``model.save`` wrote.

  Such a folder holds the model without its training data: ``data_dim`` is
  known, and reading anything else (``data.x_train``, or an evaluation
  that needs the data) raises a ``ValueError`` that says so.
  """

  def __init__(self, data_dim: int, folder: str | os.PathLike[str]):
    self.data_dim = data_dim
    self.folder = str(folder)

  def __getattr__(self, name: str) -> Any:
    if name.startswith("__") or name in ("data_dim", "folder"):
      raise AttributeError(name)  # probes of copy and pickle; not yet set
    raise ValueError(
      f"the model loaded from {self.folder} (saved by model.save) has no "
      f"training data, so data.{name} is not there: load the run's workdir "
      "(vaells_jax.load(workdir)) for what needs the data."
    )

  def __repr__(self) -> str:
    return f"NoTrainingData(data_dim={self.data_dim}, folder={self.folder!r})"


def is_saved_model(folder: str | os.PathLike[str]) -> bool:
  """Whether ``folder`` holds (or held part of) a model that ``save`` wrote."""
  folder = pathlib.Path(folder)
  return (folder / MODEL_NAME).exists() or (folder / PARAMS_NAME).exists()


def write_saved_model(
  path: str | os.PathLike[str], saved: SavedModel, *, overwrite: bool = False
) -> pathlib.Path:
  """Writes ``saved`` to the folder ``path`` (see the module docstring).

  Args:
    path: the folder; it must not exist, be empty, or (with ``overwrite``)
      hold a saved model, which is replaced.
    saved: the model.
    overwrite: replace a saved model already in ``path``.

  Returns:
    ``path``, a ``pathlib.Path``.

  Raises:
    ValueError: ``path`` is a file, a link, a folder holding anything but a
      saved model, or a saved model without ``overwrite``; or a parameter's
      name holds a ``/``.
  """
  path = pathlib.Path(path)
  _check_target(path, overwrite)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
  try:
    config = json.dumps(dataclasses.asdict(saved.config), indent=2)
    atomic_write_text(tmp / CONFIG_NAME, config)
    with atomic_write(tmp / PARAMS_NAME) as f:
      f.write(_params_bytes(saved.params))
    if saved.input_map is not None:
      saved.input_map.save(tmp / INPUT_MAP_NAME)
    record = {
      "format": FORMAT,
      "version": VERSION,
      "model": saved.config.model,
      "data_dim": int(saved.data_dim),
      "verdict": saved.verdict,
      "sha256": {f.name: _sha256(f) for f in sorted(tmp.iterdir())},
    }
    with atomic_write(tmp / MODEL_NAME, "w") as f:
      f.write(json.dumps(record, indent=2))
    _move_into_place(tmp, path)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return path


def read_saved_model(folder: str | os.PathLike[str]) -> SavedModel:
  """Reads the model that :func:`write_saved_model` wrote to ``folder``.

  Every file is checked against the SHA-256 that ``model.json`` records.

  Raises:
    FileNotFoundError: a file of the saved model is missing (one line).
    ValueError: a file is unreadable or not what was saved (one line).
  """
  folder = pathlib.Path(folder)
  record = _read_record(folder)
  for name, digest in record["sha256"].items():
    file = folder / name
    if not file.is_file():
      raise FileNotFoundError(
        f"{file} is missing: the saved model in {folder} is incomplete."
      )
    if _sha256(file) != digest:
      raise ValueError(
        f"{file} is corrupt: its SHA-256 is not the one {MODEL_NAME} "
        "records; save the model again."
      )
  config = config_from_json(folder / CONFIG_NAME)
  if config.model != record["model"]:
    raise ValueError(
      f"{folder / MODEL_NAME} says {record['model']!r}, config.json {config.model!r}."
    )
  has_map = INPUT_MAP_NAME in record["sha256"]
  input_map = InputMap.load(folder / INPUT_MAP_NAME) if has_map else None
  if input_map is not None and input_map.shift.shape != (record["data_dim"],):
    raise ValueError(
      f"{folder / INPUT_MAP_NAME} maps {input_map.shift.shape[0]} features; "
      f"{MODEL_NAME} says {record['data_dim']}."
    )
  return SavedModel(
    config,
    _read_params(folder / PARAMS_NAME),
    record["data_dim"],
    input_map,
    record.get("verdict"),
  )


def _sha256(path: pathlib.Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_target(path: pathlib.Path, overwrite: bool) -> None:
  refuse_symlink(path)
  if not path.exists():
    return
  if not path.is_dir():
    raise ValueError(f"{path} is a file; save a model to a folder.")
  if not any(path.iterdir()):
    return
  if not (path / MODEL_NAME).exists():
    raise ValueError(
      f"{path} holds files but no saved model ({MODEL_NAME}); save to a new "
      "or empty folder."
    )
  if not overwrite:
    raise ValueError(
      f"{path} holds a saved model already; pass overwrite=True to replace it."
    )


def _move_into_place(tmp: pathlib.Path, path: pathlib.Path) -> None:
  """Renames the folder ``tmp`` to ``path``; an old ``path`` is renamed
  aside first and removed after."""
  if path.exists() and any(path.iterdir()):
    old = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
    os.replace(path, old)  # onto the empty folder just made
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
  else:
    with contextlib.suppress(FileNotFoundError):
      path.rmdir()  # empty
    os.replace(tmp, path)


def _params_bytes(params: dict[str, Any]) -> bytes:
  """``params`` (nested dicts of arrays) as ``.npz`` bytes, one array per leaf."""
  flat = {}

  def walk(tree, prefix):
    for key, value in tree.items():
      if not isinstance(key, str) or "/" in key or not key:
        raise ValueError(f"parameter name {key!r} under {prefix!r} cannot be saved.")
      if isinstance(value, dict):
        walk(value, f"{prefix}{key}/")
      else:
        flat[prefix + key] = np.asarray(value)

  walk(params, "")
  buffer = io.BytesIO()
  savez: Callable[..., None] = np.savez  # keywords: the arrays' names
  savez(buffer, **flat)
  return buffer.getvalue()


def _read_params(path: pathlib.Path) -> dict[str, Any]:
  try:
    with np.load(path, allow_pickle=False) as saved:
      flat = {name: saved[name] for name in saved.files}
  except (OSError, ValueError, EOFError) as e:
    reason = " ".join(str(e).split()) or type(e).__name__
    raise ValueError(f"{path} is not a parameter file ({reason}).") from None
  params: dict[str, Any] = {}
  for name, value in flat.items():
    *parents, leaf = name.split("/")
    node = params
    for part in parents:
      node = node.setdefault(part, {})
    node[leaf] = value
  return params


def _read_record(folder: pathlib.Path) -> dict[str, Any]:
  path = folder / MODEL_NAME
  if not path.exists():
    raise FileNotFoundError(
      f"{path} is missing: {folder} holds {PARAMS_NAME} but not the record "
      "of a saved model; save the model again."
    )
  try:
    record = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, ValueError) as e:
    reason = " ".join(str(e).split()) or type(e).__name__
    raise ValueError(f"{path} is not a readable JSON file ({reason}).") from None
  if not isinstance(record, dict) or record.get("format") != FORMAT:
    raise ValueError(f"{path} is not the record of a vaells_jax saved model.")
  if record.get("version") != VERSION:
    raise ValueError(
      f"{path} is format version {record.get('version')!r}; this vaells_jax "
      f"reads version {VERSION}."
    )
  sums, dim = record.get("sha256"), record.get("data_dim")
  if not isinstance(sums, dict) or not {CONFIG_NAME, PARAMS_NAME} <= set(sums):
    raise ValueError(f"{path} lists no checksums of {CONFIG_NAME}, {PARAMS_NAME}.")
  if not isinstance(dim, int) or dim < 1:
    raise ValueError(f"{path} has no valid data_dim (got {dim!r}).")
  return record
