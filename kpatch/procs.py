"""What upstream code kpatch starts on this host (a build, a test suite) may see of kpatch's own environment.

Upstream code is not kpatch's: an upstream `setup.py` or test runs with an allowlisted environment (the search
path, locale, proxy and package-index settings, the compiler toolchain's variables, `KPATCH_*`) plus what kpatch and
the upstream's `env` in kpatch.toml give it. A variable whose name marks a secret (`*TOKEN*`, `*SECRET*`,
`*PASSWORD*`, `*KEY*`, credentials) never reaches it, whatever its prefix, and its value is blanked in everything
kpatch prints, logs or posts (`register_secrets`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kpatch.output.redact import add_secret

# A name that marks a secret: never passed to upstream code, its value blanked in output.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|KEY|AUTH_?HEADER|COOKIE", re.IGNORECASE)
_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "SOURCE_DATE_EPOCH", "NO_COLOR", "FORCE_COLOR",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # the compiler toolchain (oneAPI's setvars.sh sets these) and build parallelism
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH",
    "CMAKE_PREFIX_PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS", "OCL_ICD_FILENAMES",
    "OCL_ICD_VENDORS",
})
_ALLOWED_PREFIXES = ("LC_", "PIP_", "UV_", "KPATCH_", "ONEAPI_", "CMPLR_", "SYCL_", "ZE_", "SCCACHE_")
_MIN_SECRET = 8  # shorter values ("1", "true") of secret-named variables would blank ordinary words


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a credential (by its name: the value is never looked at)."""
    return bool(_SECRET_NAME.search(name))


def _allowed(name: str) -> bool:
    # KPATCH_URL_<NAME> may carry credentials in its URL, and an upstream's build never needs kpatch's fetch URLs
    return (name in _ALLOWED or name.startswith(_ALLOWED_PREFIXES) or name.endswith("ROOT")) and \
        not is_secret_name(name) and not name.startswith("KPATCH_URL_")


def upstream_env(environ: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The environment for upstream code: the allowlisted part of `environ`, then `given` (kpatch's and the
    upstream's own settings, which win)."""
    return {**{k: v for k, v in environ.items() if _allowed(k)}, **given}


def register_secrets(environ: Mapping[str, str]) -> None:
    """Blank the value of every secret-named variable in all that kpatch prints, logs, writes or posts."""
    for name, value in environ.items():
        if is_secret_name(name) and len(value) >= _MIN_SECRET:
            add_secret(value)
