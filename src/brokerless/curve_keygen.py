"""Print a new CURVE key pair, or the public key of a secret key (pyzmq's ``zmq.curve_keygen``).

    python3 -m brokerless.curve_keygen [--json] [--secret SECRET]

(``python3 -m zmq.curve_keygen`` through the ``zmq`` alias, which the usage line then names.)

The keys are 40 Z85 characters each, printed as libzmq's ``curve_keygen`` tool prints them
(without its disclaimer), or as a JSON object ``{"public": ..., "secret": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys

from .curve import curve_keypair, curve_public


def _joined(argv: list[str]) -> list[str]:
    """``--secret KEY`` as ``--secret=KEY``: a Z85 key may start with "-", which argparse
    would otherwise take for an option."""
    out: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--secret":
            word = f"--secret={next(words, '')}"
        out.append(word)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=f"python3 -m {__spec__.name if __spec__ else 'brokerless.curve_keygen'}",
        description="Generate a CURVE key pair (Z85); --secret derives the public key of an "
        "existing secret key.",
    )
    parser.add_argument("--json", action="store_true", help="output keys as JSON dict")
    parser.add_argument("--secret", help="specify secret key to derive a public key")
    opts = parser.parse_args(_joined(sys.argv[1:] if argv is None else argv))
    if opts.secret is not None:
        try:
            public = curve_public(opts.secret.encode("ascii")).decode("ascii")
        except (UnicodeEncodeError, ValueError) as e:
            parser.error(f"--secret must be a secret key of 40 Z85 characters ({e})")
        secret = opts.secret
    else:
        public, secret = (key.decode("ascii") for key in curve_keypair())
    if opts.json:
        json.dump({"public": public, "secret": secret}, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print("== CURVE PUBLIC KEY ==", public, "", "== CURVE SECRET KEY ==", secret, sep="\n")


if __name__ == "__main__":
    main()
