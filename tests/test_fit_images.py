"""vaells_jax.fit on images: shapes in and out, the networks, load, bad input."""

import dataclasses
import json

import jax
import numpy as np
import pytest

import vaells_jax
from vaells_jax.models.networks import ImageDecoder, ImageEncoder, image_layers
from vaells_jax.runs.fit import image_config
from vaells_jax.training import warm_start


def _blobs(n=48, shape=(12, 10), channels=None, seed=0):
  """``n`` images of a blob going round a circle, two classes (radii)."""
  rng = np.random.default_rng(seed)
  labels = np.arange(n) % 2
  angle = rng.uniform(0, 2 * np.pi, n)
  radius = np.where(labels == 0, 2.0, 3.5)
  rows, cols = np.mgrid[: shape[0], : shape[1]]
  centre = np.stack([radius * np.sin(angle), radius * np.cos(angle)], -1)
  centre += (np.array(shape) - 1) / 2
  gaps = (rows - centre[:, 0, None, None]) ** 2 + (cols - centre[:, 1, None, None]) ** 2
  images = np.exp(-gaps / 2.0)
  if channels:
    images = images[..., None] * np.linspace(0.5, 1.0, channels)
  return images, labels


def _config(shape):
  return dataclasses.replace(
    image_config(shape),
    num_steps=4,
    batch_size=8,
    population=1,
    conv_channels=4,
    num_ops=2,
    inference_max_iter=10,
    log_every=2,
  )


def _fit(x, labels, workdir):
  """A short, unevaluated fit of ``x`` (its image shape's config)."""
  config = _config(x.shape[1:])
  return vaells_jax.fit(
    x, labels, config=config, workdir=workdir, log=lambda _: None, evaluate=False
  )


@pytest.fixture(autouse=True)
def _short_warm_start(monkeypatch):
  monkeypatch.setattr(warm_start, "STEPS", 5)


@pytest.mark.parametrize(
  "shape, channels",
  [((12, 10), None), ((9, 9), 1), ((16, 16), 3)],
  ids=["gray_non_square", "one_channel_odd", "colour"],
)
def test_images_in_images_out(tmp_path, shape, channels):
  x, labels = _blobs(shape=shape, channels=channels)
  model = _fit(x, labels, tmp_path)
  sample = x.shape[1:]
  z = model.encode(x[:3])
  d = model.config.latent_dim
  assert z.shape == (3, d)
  assert model.decode(z).shape == (3, *sample)
  assert model.anchors.shape == (2, 3, *sample)
  assert model.sample_posterior(jax.random.PRNGKey(0), x[:2], 4).shape == (2, 4, d)
  assert model.decode(model.sample_prior(jax.random.PRNGKey(0), 5, 1)).shape == (
    5,
    *sample,
  )
  log_p, _ = model.log_likelihood(jax.random.PRNGKey(0), x[:2], labels[:2], 4)
  assert log_p.shape == (2,) and np.all(np.isfinite(log_p))
  assert model.verdict is not None  # image runs get a verdict
  loaded = vaells_jax.load(tmp_path)
  np.testing.assert_array_equal(loaded.decode(z), model.decode(z))
  saved = vaells_jax.load(model.save(tmp_path / "saved"))
  np.testing.assert_array_equal(saved.encode(x[:3]), model.encode(x[:3]))
  np.testing.assert_array_equal(saved.decode(z), model.decode(z))


def test_an_image_fit_trains_the_operators_alone(tmp_path):
  from vaells_jax.models import saved_networks
  from vaells_jax.runs.fit import WARM_START_NAME

  x, labels = _blobs()
  model = _fit(x, labels, tmp_path)
  networks = {k: model.params[k] for k in ("encoder", "decoder")}
  like = {**networks, "psi": model.psi}
  start = saved_networks.read(tmp_path / WARM_START_NAME, like)
  start.pop("psi")
  for got, want in zip(jax.tree.leaves(networks), jax.tree.leaves(start), strict=True):
    np.testing.assert_array_equal(got, want)
  flat = x.reshape(len(x), -1)
  anchors = np.asarray(model.anchors).reshape(-1, flat.shape[1])
  nearest = np.min(np.linalg.norm(anchors[:, None] - flat[None], axis=-1), axis=1)
  assert np.all(nearest < 1e-5 * np.linalg.norm(flat, axis=1).mean())  # as chosen
  assert not np.allclose(model.psi, 0.0)


def test_uint8_images_come_back_in_pixel_units(tmp_path):
  x, labels = _blobs()
  x = np.round(x * 255).astype(np.uint8)
  model = _fit(x, labels, tmp_path)
  assert model.data.x_train.max() == 255  # the user's units
  np.testing.assert_allclose(model.input_map.shift, model.data.x_train.mean(0))
  assert model.decode(model.encode(x[:2])).dtype == np.float32


@pytest.mark.whole_run
def test_an_image_fit_draws_its_image_figures(tmp_path):
  x, labels = _blobs(shape=(12, 12))
  vaells_jax.fit(
    x, labels, config=_config(x.shape[1:]), workdir=tmp_path, log=lambda _: None
  )
  summary = (tmp_path / "summary.md").read_text()
  for name in ("orbit_strips.png", "prior_samples.png", "reconstructions.png"):
    assert (tmp_path / name).stat().st_size > 0 and name in summary
  assert "verdict" in json.loads((tmp_path / "summary.json").read_text())


@pytest.mark.parametrize(
  "x, message",
  [
    (np.zeros((10, 2, 2)), "at least 8 x 8"),
    (np.zeros((10, 12, 12, 2)), "C=2"),
    (np.zeros((10, 12, 12, 1, 1)), "vectors \\[N, D\\] or images"),
    (np.full((10, 12, 12), np.nan), "non-finite values \\(first in sample 0\\)"),
  ],
  ids=["2x2", "two_channels", "5d", "nan"],
)
def test_bad_images_get_a_one_line_error(tmp_path, x, message):
  with pytest.raises(ValueError, match=message) as raised:
    vaells_jax.fit(x, workdir=tmp_path)
  assert "\n" not in str(raised.value)
  assert not (tmp_path / "config.json").exists()


def test_a_model_of_images_refuses_other_shapes(tmp_path):
  x, labels = _blobs()
  model = _fit(x, labels, tmp_path)
  for wrong in (x[:2, :, :9], x[:2].reshape(2, -1), x[:2, ..., None]):
    with pytest.raises(ValueError, match="12, 10\\] \\(the model's image shape\\)"):
      model.encode(wrong)
  flat = model.flat()  # the metrics' view: flattened images
  assert flat.decode(flat.encode(x[:2].reshape(2, -1))).shape == (2, 120)


def test_an_image_config_must_match_the_images(tmp_path):
  x, labels = _blobs()
  with pytest.raises(ValueError, match="does not match x"):
    vaells_jax.fit(x, labels, config=_config((16, 16)), workdir=tmp_path)
  with pytest.raises(ValueError, match="does not match x \\(vectors\\)"):
    vaells_jax.fit(x.reshape(len(x), -1), labels, config=_config(x.shape[1:]))


@pytest.mark.parametrize("shape", [(8, 8, 1), (28, 28, 1), (20, 36, 3), (64, 64, 3)])
def test_the_image_networks_follow_the_shape(shape):
  layers, grid = image_layers(*shape[:2])
  assert max(grid) <= 7 and (layers == 0 or max(-(-np.array(shape[:2]) // 2)) > 0)
  encoder, decoder = ImageEncoder(3, shape, 4), ImageDecoder(shape, 4)
  x = np.zeros((2, int(np.prod(shape))), np.float32)
  params = encoder.init(jax.random.PRNGKey(0), x)
  z = encoder.apply(params, x)
  assert z.shape == (2, 3)
  out = decoder.apply(decoder.init(jax.random.PRNGKey(1), z), z)
  assert out.shape == x.shape


def test_the_layout_tells_loops_from_open_curves():
  # a loop and an open curve, 200 random points each, in 50-D
  rng = np.random.default_rng(0)
  mapping = rng.standard_normal((4, 50))
  angle = rng.uniform(0, 2 * np.pi, 200)
  loop = np.c_[np.cos(angle), np.sin(angle), np.cos(2 * angle), np.sin(2 * angle)]
  t = rng.uniform(-1, 1, 200)
  line = np.c_[t, t**2, np.sin(3 * t), 0 * t]
  x = np.concatenate([loop, line]) @ mapping
  labels = np.repeat([0, 1], 200)
  index, codes, closed = warm_start.layout(x, labels, seed=0)
  assert closed == [True, False]
  ring = codes[labels[index] == 0]
  np.testing.assert_allclose(np.linalg.norm(ring, axis=1), 0.7, rtol=1e-5)
  # the layout's angle is the true one, turned (or mirrored)
  theta = np.arctan2(ring[:, 1], ring[:, 0])
  truth = angle[index[labels[index] == 0]]
  agree = max(abs(np.mean(np.exp(1j * (theta - s * truth)))) for s in (1, -1))
  assert agree > 0.95
  segment = codes[labels[index] == 1]
  np.testing.assert_allclose(segment[:, 1], 1.0)
  assert (
    abs(np.corrcoef(segment[:, 0], t[index[labels[index] == 1] - 200])[0, 1]) > 0.99
  )
  # with a third latent axis: unit curves, each class at its own height
  _, codes3, _ = warm_start.layout(x, labels, seed=0, latent_dim=4)
  assert codes3.shape == (len(index), 4)
  np.testing.assert_allclose(np.linalg.norm(codes3[labels[index] == 0, :2], axis=1), 1)
  np.testing.assert_allclose(codes3[:, 2], labels[index] - 0.5)
  np.testing.assert_allclose(codes3[:, 3], 0)
  # open_arc: the open curve on three quarters of its class's circle instead
  index_a, arc, on_circles = warm_start.layout(x, labels, seed=0, open_arc=0.75)
  assert on_circles == [True, True]
  np.testing.assert_array_equal(index_a, index)
  np.testing.assert_allclose(arc[labels[index] == 0], ring)
  bent = arc[labels[index] == 1]
  np.testing.assert_allclose(np.linalg.norm(bent, axis=1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(
    np.arctan2(bent[:, 1], bent[:, 0]), 0.75 * np.pi * segment[:, 0], atol=1e-5
  )


@dataclasses.dataclass
class _Sheared:
  """A model whose strongest operator is a shear (eigenvalues 0) moving
  codes ``(x, 1)``, x in [-1, 1], along x; it decodes a code to itself."""

  psi = np.array([[[0.0, 0.5], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.01]]])
  anchors_latent = np.array([[[0.0, 1.0]]])

  def flat(self):
    return self

  def encode(self, x):
    return np.asarray(x)

  def decode(self, z):
    return np.asarray(z)


def test_orbit_strips_follow_an_open_flow_as_far_as_a_turn():
  from vaells_jax.evaluation.image_fit_figures import FRAMES, _orbit_strips

  codes = np.c_[np.linspace(-1, 1, 20), np.ones(20)]
  strip = _orbit_strips(_Sheared(), codes)[0]  # the shear's row: [FRAMES, 2]
  shown = np.all(np.isfinite(strip), axis=-1)
  assert shown[FRAMES // 2] and np.allclose(strip[FRAMES // 2], [0.0, 1.0])
  assert shown.sum() >= 3, strip  # not only the anchor: the frames move along x
  assert np.allclose(strip[shown, 1], 1.0) and np.ptp(strip[shown, 0]) > 1.0
