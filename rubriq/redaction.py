"""Secrets in text: the provider-token variables, and redaction of their values.

Every file and log line of the hardware pipeline, and every error of the endpoint client (with
its ``--api-key-env`` added to the names), goes through :func:`redact`; nothing RubriQ writes or
prints holds a token's value.  A value shorter than 4 characters is not treated as a secret
(it would blank ordinary text).

>>> import os
>>> os.environ["IONQ_API_KEY"] = "s3cr3t-key"
>>> redact("Authorization: apiKey s3cr3t-key"), contains_secret("no key here")
('Authorization: apiKey ***', False)
>>> del os.environ["IONQ_API_KEY"]
"""

from __future__ import annotations

import os
from collections.abc import Sequence

TOKEN_VARIABLES = ("IBM_QUANTUM_TOKEN", "QISKIT_IBM_TOKEN", "IONQ_API_KEY")


def secrets(names: Sequence[str] = TOKEN_VARIABLES) -> list[str]:
    """The values of the token variables ``names`` set in the environment (never written
    anywhere; the endpoint client adds its ``--api-key-env`` to the provider tokens)."""
    return [v for v in (os.environ.get(k) for k in names) if v and len(v) >= 4]


def contains_secret(text: str, names: Sequence[str] = TOKEN_VARIABLES) -> bool:
    """Whether ``text`` holds the value of a token variable."""
    return any(secret in text for secret in secrets(names))


def redact(text: str, names: Sequence[str] = TOKEN_VARIABLES) -> str:
    """``text`` with the value of every token variable of ``names`` replaced by a placeholder."""
    for secret in secrets(names):
        text = text.replace(secret, "***")
    return text
