"""The fit study scripts (studies/fit) run and write what the docs read."""

import importlib.util
import pathlib

import pytest

from vaells_jax.training import warm_start

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _study(name):
  spec = importlib.util.spec_from_file_location(name, ROOT / f"studies/fit/{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_the_layouts_order_a_circle_and_not_a_trefoil(tmp_path):
  out = tmp_path / "l.json"
  result = _study("layouts").main(
    ["--seeds=100", "--families=circles,knots_3d", f"--out={out}"]
  )
  assert all(r["agreement"] > 0.95 for r in result["circles"])
  trefoil, seam = result["knots_3d"]
  assert trefoil["agreement"] < 0.8 < seam["agreement"]
  assert trefoil["short_circuits"] > 10 > seam["short_circuits"]


@pytest.mark.whole_run
def test_open_curves(tmp_path, monkeypatch):
  monkeypatch.setattr(warm_start, "STEPS", 3)
  out, keep = tmp_path / "o.json", tmp_path / "keep"
  args = ["--seeds=100", f"--keep={keep}", f"--out={out}", "--warm-start=0.75"]
  for change in ("lr_net=0", "population=1", "num_steps=4", "hidden=(16,)"):
    args.append(f"--set={change}")
  (row,) = _study("open_curves").main(args).values()
  assert row["verdict"] in ("learned", "uncertain", "not learned")
  assert len(row["eigenvalues"]) == 4 and len(row["anchor_off_span"][0]) == 3
  assert (keep / "s_curve_s100" / "figure.png").stat().st_size > 0


def test_the_pieces_find_two_circles_and_one_spiral(tmp_path):
  out = tmp_path / "p.json"
  result = _study("pieces").main(
    ["--seeds=100", "--families=circles,spiral", f"--out={out}"]
  )
  assert result["circles"][0] == {"seed": 100, "pieces": 2, "curves": 2, "found": True}
  assert result["spiral"][0]["pieces"] == 1 and result["spiral"][0]["found"]
