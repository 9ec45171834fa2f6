"""In a Jupyter kernel (as in a notebook): the progress bar is a widget, and interrupting the
kernel (the notebook's stop button, SIGINT) stops sampling and returns the draws so far."""

from __future__ import annotations

import time
from typing import Any

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

CELL = """
import warnings
import numpy as np
import sgmcmc
rng = np.random.default_rng(0)
x = rng.standard_normal((20_000, 3))
y = (rng.random(20_000) < 0.5).astype(float)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    idata = sgmcmc.sample(
        sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=10),
        chains=2, iterations=500_000_000, burn_in=0, thin=100, bias_check=False, quiet=True,
    )
draws = idata.posterior["theta"].values
print("draws", draws.shape[1], bool(np.isfinite(draws).all()),
      any("interrupted" in str(w.message) for w in caught))
"""


def _outputs(client: Any, msg_id: str, timeout: float) -> list[dict[str, Any]]:
    """The iopub messages of one execution, until the kernel is idle again."""
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.get_iopub_msg(timeout=deadline - time.monotonic())
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages
    raise TimeoutError("the cell did not finish")


def test_widget_progress_bar_and_interrupt_in_a_kernel() -> None:
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        msg_id = client.execute(CELL)
        # Wait until the bar is shown (sampling has started), then interrupt the kernel.
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        while not any(m["msg_type"] == "display_data" for m in seen):
            assert time.monotonic() < deadline, "no progress bar was displayed"
            msg = client.get_iopub_msg(timeout=deadline - time.monotonic())
            if msg["parent_header"].get("msg_id") == msg_id:
                seen.append(msg)
        time.sleep(2.0)
        manager.interrupt_kernel()
        seen += _outputs(client, msg_id, timeout=60)
        reply = client.get_shell_msg(timeout=10)
        errors = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert reply["content"]["status"] == "ok", errors
        widgets = [
            m
            for m in seen
            if m["msg_type"] == "display_data"
            and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
        ]
        assert widgets, "the progress bar was not a widget"
        printed = "".join(
            m["content"]["text"]
            for m in seen
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )
        _, kept, finite, warned = printed.split()
        assert int(kept) > 100, printed
        assert finite == "True" and warned == "True", printed
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
