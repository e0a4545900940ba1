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


# --- gradients on a device whose backend has no backward yet --------------------------
# Tests compare forward outputs everywhere; where the library cannot run the backward on
# the device (the CUDA backward is the training issue's), the gradient part is not run and
# a test whose forward checks passed is reported as SKIPPED with the reason (see
# pytest_runtest_makereport), never as passed.

_current_item = None


def backward_unsupported(device) -> "str | None":
    """None when libdattn runs the backward on `device`, else the library's reason."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    from dattn import ops

    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    return ops.probe("cuda", idx, torch.float32, 2, 32, 3, 256, 512, False, True, False)


def gradients_checkable(device) -> bool:
    """False (and the running test is marked 'gradients not checked') when the backend
    cannot run the backward on `device`."""
    why = backward_unsupported(device)
    if why is not None and _current_item is not None:
        _current_item._dattn_grads_unchecked = why
    return why is None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    why = getattr(item, "_dattn_grads_unchecked", None)
    if why and rep.when == "call" and rep.passed:
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0,
                        f"Skipped: forward checked; gradients not checked: {why}")


@pytest.fixture(autouse=True)
def _reset_dattn_state(request):
    global _current_item
    _current_item = request.node
    from dattn import hf

    hf._logged.clear()
    hf.last_path = None
    yield
