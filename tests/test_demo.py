"""The demo shows only private quantities (issue #8, finding 5)."""

import dataclasses
import math

from dpnc import demo


def test_the_demo_curves_do_not_move_when_one_training_row_is_replaced(monkeypatch):
    """The demo used to print and plot the training loss: replacing one training row moved its first point
    from 0.6932 to 0.70–0.78 (perfectly separable) while the report said ε = 2. Its curves are now the
    held-out loss, so the first point (before any private step) is the same for neighbouring datasets, and
    the summary never mentions a training loss."""
    config = dataclasses.replace(demo.DemoConfig(), steps=20, eval_every=10)
    original = demo.load_data
    firsts, texts = [], []
    for replace in (False, True):
        def load(c, replace=replace):
            X, y, X_test, y_test = original(c)
            if replace:
                X, y = X.clone(), y.clone()
                X[0], y[0] = 50.0, 1 - y[0]          # an extreme row
            return X, y, X_test, y_test
        monkeypatch.setattr(demo, "load_data", load)
        result = demo.run_demo(config, progress=False)
        firsts.append(result["curves"]["DPZero"][0])
        assert [t for t, _ in result["curves"]["DPZero"]] == [0, 10, 20]
        texts.append(demo.summary(result))
    assert firsts[0] == firsts[1]
    assert firsts[0][0] == 0 and abs(firsts[0][1] - math.log(2)) < 1e-6   # the zero model: log 2 in float32
    assert all("train loss" not in text and "test loss" in text for text in texts)
