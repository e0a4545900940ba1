"""Shared fixtures of the Python test suite.

Inputs are fresh random numbers every run; the seed is printed in the pytest header and
can be fixed with DATTN_TEST_SEED=<n>. Device-parametrized tests run on the CPU always
and on CUDA when torch sees a GPU and libdattn supports it (otherwise they are skipped
there, with the library's reason).
"""

import os
import random
import sys
from pathlib import Path

import pytest
import torch

# A source checkout without an install: python/ holds the package, build/ the library.
_ROOT = Path(__file__).resolve().parents[2]
try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(_ROOT / "python"))
    import dattn  # noqa: F401

from dattn import _lib  # noqa: E402

# fp32 parity is checked at 1e-5: no TF32 anywhere (cuDNN convolutions default to it).
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False

SEED = int(os.environ.get("DATTN_TEST_SEED", random.SystemRandom().randrange(2**31)))


def pytest_report_header(config):
    return [f"dattn: seed {SEED} (DATTN_TEST_SEED={SEED} repeats this run)",
            f"dattn: {_lib.build_info()} from {_lib.library_path()}"]


def _cuda_reason():
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    ok, why = _lib.device_supported(_lib.DEVICE_CUDA, -1)
    return None if ok else f"libdattn cannot run on CUDA: {why}"


def device_params():
    why = _cuda_reason()
    cuda = pytest.param("cuda", marks=pytest.mark.skipif(why is not None, reason=why or ""))
    return ["cpu", cuda]


DEVICES = device_params()


@pytest.fixture
def seed(request):
    """A per-test seed derived from the run seed and the test id (printed on failure)."""
    s = (SEED * 1000003 + sum(map(ord, request.node.nodeid))) % (2**31)
    torch.manual_seed(s)
    print(f"seed {s}")
    return s


@pytest.fixture(autouse=True)
def _reset_dattn_state():
    from dattn import hf

    hf._logged.clear()
    hf.last_path = None
    yield
