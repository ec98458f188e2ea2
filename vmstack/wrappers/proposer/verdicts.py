"""Signature verdicts of a batch of post-fork envelopes, computed ahead in worker processes.

The costly part of parsing a signed envelope is its signature check (a P-256 or RSA verify
over the sha256 of its :class:`~vmstack.wrappers.proposer.envelope.Header`), and it depends on
nothing but the envelope's certificate, header and signature. A batched parse hands these
checks to a :class:`~vmstack.parsepool.ParsePool` (:func:`start_signature_checks`) before
it parses the inner blocks, then verifies the envelopes in its usual serial order with
:meth:`PostForkBlock.verify <vmstack.wrappers.proposer.envelope.PostForkBlock.verify>`,
whose signature check asks :meth:`SignatureVerdicts.check`: a verdict computed ahead for
exactly these bytes is used (the same function gave it, so the same answer), anything else
is checked on the spot. The rule stays in one place (``verify`` and
:meth:`~vmstack.wrappers.proposer.certificate.Certificate.check_signature`); only where the
arithmetic runs changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vmstack.errors import InvalidSignature
from vmstack.wrappers.proposer.certificate import Certificate

if TYPE_CHECKING:  # a worker imports this module: it needs only the certificates
    from vmstack.parsepool import ParsePool, PendingResults
    from vmstack.wrappers.proposer.envelope import PostForkBlock

__all__ = ["SignatureJob", "SignatureVerdicts", "signature_verdict", "start_signature_checks"]

#: What a worker needs for one check: certificate DER, signed message, signature.
SignatureJob = tuple[bytes, bytes, bytes]


def signature_verdict(job: SignatureJob) -> str | None:
    """What a worker runs for one envelope: ``None`` when the signature verifies, else the
    reason :class:`~vmstack.errors.InvalidSignature` gives.

    The certificate was parsed when the envelope was decoded, so it parses here too (each
    worker keeps the parsed certificates in :meth:`Certificate.parse`'s cache). The check
    runs uncached: the process that asked keeps the verdicts that verified.
    """
    certificate, message, signature = job
    try:
        Certificate.parse(certificate).check_signature(message, signature, cached=False)
    except InvalidSignature as error:
        return error.reason
    return None


class SignatureVerdicts:
    """Verdicts computed ahead, by the bytes they were computed for; :meth:`check` is a
    drop-in for :meth:`Certificate.check_signature
    <vmstack.wrappers.proposer.certificate.Certificate.check_signature>`."""

    __slots__ = ("_pending", "_verdicts")

    def __init__(
        self, jobs: Sequence[SignatureJob], pending: PendingResults[str | None] | None
    ) -> None:
        self._pending: tuple[Sequence[SignatureJob], PendingResults[str | None]] | None = (
            None if pending is None else (jobs, pending)
        )
        self._verdicts: dict[SignatureJob, str | None] = {}

    def check(self, certificate: Certificate, message: bytes, signature: bytes) -> None:
        """Raise ``InvalidSignature`` exactly when ``certificate.check_signature(message,
        signature)`` would: from the verdict computed ahead when there is one, else by
        checking now. A verdict from ahead that verified enters the process's cache of
        verified signatures, as a check made here would."""
        self._settle()
        key = (certificate.raw, message, signature)
        if key not in self._verdicts:
            certificate.check_signature(message, signature)
            return
        reason = self._verdicts[key]
        if reason is not None:
            raise InvalidSignature(reason)
        certificate.remember_verified(message, signature)

    def cancel(self) -> None:
        """Give the checks up if they were never read (the batch failed before needing
        them): the pool is free for the next batch. No effect once read."""
        if self._pending is not None:
            self._pending[1].cancel()
            self._pending = None

    def _settle(self) -> None:
        """Wait for the workers' verdicts once; a pool that failed leaves none (every
        check then runs here)."""
        if self._pending is None:
            return
        jobs, pending = self._pending
        self._pending = None
        results = pending.results()
        if results is not None:
            self._verdicts = dict(zip(jobs, results, strict=True))


def start_signature_checks(
    pool: ParsePool | None, envelopes: Sequence[PostForkBlock | None], chain_id: bytes
) -> SignatureVerdicts:
    """Hand the signature checks of the signed ``envelopes`` (``None`` entries skipped) to
    ``pool`` and return their verdicts-to-be; with no pool, or a batch the pool leaves
    serial (asked before any check is prepared: :meth:`ParsePool.takes_now`), every check
    runs when :meth:`SignatureVerdicts.check` is asked. A signature
    the process has verified already is not handed out (its check is a cache hit)."""
    if pool is None or not pool.takes_now(len(envelopes)):
        return SignatureVerdicts((), None)
    certificates: dict[bytes, bytes] = {}  # one object per certificate: pickled once
    jobs: list[SignatureJob] = []
    for envelope in envelopes:
        if envelope is None or envelope.certificate_info is None:
            continue
        header = bytes(envelope.header(chain_id))
        if envelope.certificate_info.known_verified(header, envelope.signature):
            continue
        certificate = certificates.setdefault(envelope.certificate, envelope.certificate)
        jobs.append((certificate, header, envelope.signature))
    if not pool.accepts(len(jobs)):
        return SignatureVerdicts((), None)
    return SignatureVerdicts(jobs, pool.submit(signature_verdict, jobs))
