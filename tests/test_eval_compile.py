"""The synthetic evaluation compiles few programs
(docs/studies/benchmarks-evaluation.md).

On a CPU with an empty compilation cache, compiling is most of the
evaluation's time; each program more costs 0.03-4 s. An untrained
concentric model is evaluated in a fresh process with the persistent cache
off, and its compiled programs counted (``jax.monitoring``).
"""

import json
import subprocess
import sys
import textwrap

import pytest

from tests.test_experiments import ROOT

# Measured: 36 programs (111 at commit 3ca55dc, before fixed shapes).
MAX_PROGRAMS = 45
# One solve program: the log-likelihood's, shared with the posterior contour
# and with the paths (their 16 restarts solved as its pairs).
MAX_SOLVER_PROGRAMS = 1

CHILD = textwrap.dedent(
  """
  import json, sys, tempfile
  import jax
  jax.config.update("jax_enable_compilation_cache", False)
  from vaells_jax.experiments.concentric import get_config
  from vaells_jax.api import MODELS
  from vaells_jax.data.synthetic import make_concentric
  from vaells_jax.evaluation import synthetic_report
  import dataclasses
  config = dataclasses.replace(get_config(), population=1, hidden=(32,))
  data = make_concentric(seed=config.seed)
  entry = MODELS[config.model]
  trained = entry.trained(config, entry.init(jax.random.PRNGKey(0), config, data), data)
  names = []
  jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: names.append(kw.get("fun_name"))
    if event == "/jax/core/compile/backend_compile_duration" else None
  )
  with tempfile.TemporaryDirectory() as out:
    synthetic_report.evaluate_and_report(trained, out, {})
  print(json.dumps(names))
  """
)


@pytest.mark.whole_run
def test_evaluation_compiles_few_programs():
  done = subprocess.run(
    [sys.executable, "-c", CHILD],
    capture_output=True,
    text=True,
    timeout=300,
    cwd=ROOT,
    env={"PYTHONPATH": str(ROOT), "PATH": ""},
  )
  assert done.returncode == 0, done.stderr[-3000:]
  names = json.loads(done.stdout.strip().splitlines()[-1])
  assert len(names) <= MAX_PROGRAMS, sorted(names)
  assert names.count("jit(_infer_flat)") <= MAX_SOLVER_PROGRAMS, sorted(names)
