"""How this gateway authenticates, why, and how to change it, in one sentence for the start-up log
and the `tollgate keys` commands. Open mode (no key needed) is the embedded default's convenience
and ends for good once any key exists; saying so where an operator looks is what keeps the switch
from surprising them."""

from __future__ import annotations

from gateway.config.schema import Config

WAY_BACK = (
    "to return to open mode, delete every key (`tollgate keys delete --all`) and restart; "
    "set TOLLGATE_ADMIN_KEY to read every team's spend"
)


def open_eligible(config: Config) -> bool:
    """No admin key and no teams: the gateway is open until the first virtual key exists."""
    return config.auth.admin_key is None and not config.teams


def describe(config: Config, *, keys_exist: bool) -> tuple[bool, str]:
    """(open, sentence). Open is the loud case: anyone who reaches the port can spend."""
    if not open_eligible(config):
        why = " and ".join(
            part
            for part, present in (
                ("an admin key", config.auth.admin_key is not None),
                ("teams", bool(config.teams)),
            )
            if present
        )
        return False, f"KEYS REQUIRED: the config sets {why}, so every request needs a key"
    if keys_exist:
        return False, (
            "KEYS REQUIRED: virtual keys exist in the ledger database (revoked ones count), so every "
            f"request needs a key; {WAY_BACK}"
        )
    return True, (
        "OPEN MODE: no admin key, no teams and no virtual keys, so requests need no key and anyone who "
        "can reach this port can spend; the first `tollgate keys create` ends open mode"
    )


def after_first_key(config: Config) -> str | None:
    """What `tollgate keys create` says when its key just ended open mode; None when it did not."""
    if not open_eligible(config):
        return None
    return f"Open mode is now off: within seconds every request to this gateway needs a key; {WAY_BACK}."
