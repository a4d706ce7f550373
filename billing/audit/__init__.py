"""Contract audit: a signed, self-contained bundle of a lease's month, and its verification.

``build_bundle`` gathers everything an auditor needs to recompute the month without our
database: the lease and tenant, the period bounds in the tenant's zone, every terms version
in force, every probe run with its hash-chain link (``ledger.chain``) and the
rejudgements of those runs under corrected terms (``billing.rerate``), the hourly
rollups and traffic samples billing read, the compliance computation step by step, the SLA
credit and the lease's invoice lines. ``sign_bundle`` signs its canonical JSON with the
provider's Ed25519 key.

``verify`` is the other side and reads no database: it checks the signature, the chain,
then recomputes compliance, the credit and every invoice line's arithmetic from the bundle
alone, with the same pure rules billing uses (``gpulease_verify.samples``, ``billing.sla``'s
dataclasses, ``gpulease_verify.calculations``). docs/audit.md and verifier/README.md
document the format.

Its modules, by use case:

- ``bundle``: ``build_bundle``, the terms versions and billed window it records, and the
  stated ``FORMULAS``;
- ``runs``: the chain entries (runs, raw output, links, rejudgements, the acceptance
  attempt) and the nodes and node assignments re-reading them needs;
- ``billing_docs``: the compliance, invoice lines, credit base, SLA credit, dispute
  evidence and disputes documents;
- ``signing``: ``sign_bundle``, ``signed_bundle`` and ``published_key_info`` (the keys
  themselves are ``billing.audit_keys``);
- ``plain``: JSON without floats, as every document writes its values.
"""

from __future__ import annotations

from billing.audit_keys import key_path, signing_key
from gpulease_verify.bundle import FORMAT, canonical_bytes, verify, verify_report
from gpulease_verify.keys import fingerprint, load_public_key

from .billing_docs import ZERO
from .bundle import FORMULAS, ROLLUP_FIELDS, TERMS_FIELDS, build_bundle
from .signing import published_key_info, sign_bundle, signed_bundle

__all__ = [
    "FORMAT",
    "FORMULAS",
    "ROLLUP_FIELDS",
    "TERMS_FIELDS",
    "ZERO",
    "build_bundle",
    "canonical_bytes",
    "fingerprint",
    "key_path",
    "load_public_key",
    "published_key_info",
    "sign_bundle",
    "signed_bundle",
    "signing_key",
    "verify",
    "verify_report",
]
