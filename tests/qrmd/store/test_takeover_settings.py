"""``--katalyst-checkpoint`` and ``--import-katalyst-if-present``
(``qrmd.store.takeover_settings``)."""

from __future__ import annotations

import pytest

from qrmd.config import ConfigError, load_config
from qrmd.store.takeover_settings import DEFAULT_KATALYST_CHECKPOINT, TakeoverSettings


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param({}, TakeoverSettings(DEFAULT_KATALYST_CHECKPOINT, False),
                     id="by default katalyst-agent's default file is looked for"),
        pytest.param({"katalyst-checkpoint": "ignore"}, TakeoverSettings(None, False),
                     id="ignore looks for nothing"),
        pytest.param({"katalyst-checkpoint": "IGNORE"}, TakeoverSettings(None, False),
                     id="ignore in any case"),
        pytest.param({"katalyst-checkpoint": "/srv/k/cpu_plugin_state",
                      "import-katalyst-if-present": True},
                     TakeoverSettings("/srv/k/cpu_plugin_state", True),
                     id="another path, imported if present"),
    ],
)  # fmt: skip
def test_the_settings(flags: dict[str, object], want: TakeoverSettings) -> None:
    assert load_config(flags).takeover == want


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        pytest.param({"katalyst-checkpoint": "cpu_plugin_state"},
                     "--katalyst-checkpoint: 'cpu_plugin_state' is neither an absolute path",
                     id="a relative path is refused"),
        pytest.param({"katalyst-checkpoint": "ignore", "import-katalyst-if-present": "true"},
                     "there is no file to import",
                     id="importing an ignored file is refused"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused(flags: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config(flags)
